package redis_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"github.com/meshplane/meshplane/libs/redistest"
	redisbus "github.com/meshplane/meshplane/services/ingest/internal/adapters/redis"
)

// The access-log bus carries one replica's entries to the others, on each
// Redis topology, and never back to the replica that published them.
func TestAccessLogBusAcrossReplicas(t *testing.T) {
	redistest.ForEachTopology(t, func(t *testing.T, d *redistest.Deployment) {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		a := redisbus.NewAccessLogBus(d.Client(t), "test", "a", log)
		b := redisbus.NewAccessLogBus(d.Client(t), "test", "b", log)
		other := redisbus.NewAccessLogBus(d.Client(t), "other", "c", log)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		gotA, gotB, gotOther := make(chan string, 100), make(chan string, 100), make(chan string, 100)
		subscribe := func(bus *redisbus.AccessLogBus, got chan<- string) {
			go func() {
				_ = bus.Subscribe(ctx, func(entries []*observabilityv1.AccessLogEntry) {
					for _, e := range entries {
						got <- e.GetPath()
					}
				})
			}()
		}
		subscribe(a, gotA)
		subscribe(b, gotB)
		subscribe(other, gotOther)

		// Pub/sub keeps nothing for a subscriber not yet subscribed:
		// publish until b hears one.
		deadline := time.After(15 * time.Second)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
	wait:
		for {
			if err := a.Publish(ctx, []*observabilityv1.AccessLogEntry{{Path: "/warmup"}}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-gotB:
				break wait
			case <-deadline:
				t.Fatal("replica b heard nothing from a within 15s")
			case <-tick.C:
			}
		}
		if err := a.Publish(ctx, []*observabilityv1.AccessLogEntry{{Path: "/reviews"}, {Path: "/ratings"}}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"/reviews", "/ratings"} {
			if got := drainUntil(t, gotB, "/warmup"); got != want {
				t.Fatalf("b heard %q, want %q", got, want)
			}
		}
		select {
		case p := <-gotA:
			t.Errorf("a heard its own entry %q back", p)
		case p := <-gotOther:
			t.Errorf("another install's replica heard %q", p)
		case <-time.After(300 * time.Millisecond):
		}
	})
}

// drainUntil returns the next path on got that is not skip.
func drainUntil(t *testing.T, got <-chan string, skip string) string {
	t.Helper()
	for {
		select {
		case p := <-got:
			if p != skip {
				return p
			}
		case <-time.After(5 * time.Second):
			t.Fatal("nothing heard within 5s")
			return ""
		}
	}
}
