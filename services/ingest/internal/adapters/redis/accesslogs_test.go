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
//
// That nothing arrives is judged by an ordering marker, not by a wait: a
// replica's subscription is one connection, on which Redis delivers
// messages in the order it handled them, so an entry that was wrongly
// delivered is received before an entry published after it. Every
// subscriber of the install's channel is on the same node (cluster
// clients subscribe on the channel's slot's primary), which hands a
// message to all of them at once: once b has heard a's entries, a marker
// published after that reaches a after any of them that a was sent.
func TestAccessLogBusAcrossReplicas(t *testing.T) {
	redistest.ForEachTopology(t, func(t *testing.T, d *redistest.Deployment) {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		a := redisbus.NewAccessLogBus(d.Client(t), "test", "a", log)
		b := redisbus.NewAccessLogBus(d.Client(t), "test", "b", log)
		other := redisbus.NewAccessLogBus(d.Client(t), "other", "c", log)
		// otherPeer is a replica of the other install, which only
		// publishes: other's marker.
		otherPeer := redisbus.NewAccessLogBus(d.Client(t), "other", "d", log)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		gotA, gotB, gotOther := make(chan string, 1000), make(chan string, 1000), make(chan string, 1000)
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
		// publish until each of a, b and other hears one, so that none can
		// miss an entry by subscribing late.
		warmup := []*observabilityv1.AccessLogEntry{{Path: "/warmup"}}
		deadline := time.After(15 * time.Second)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		var heardA, heardB, heardOther bool
		for !heardA || !heardB || !heardOther {
			for _, bus := range []*redisbus.AccessLogBus{a, b, otherPeer} {
				if err := bus.Publish(ctx, warmup); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-gotA:
				heardA = true
			case <-gotB:
				heardB = true
			case <-gotOther:
				heardOther = true
			case <-deadline:
				t.Fatalf("within 15s, heard a warm-up: a %v, b %v, other %v", heardA, heardB, heardOther)
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
		// The markers: a hears b's, other hears its peer's, and neither
		// may hear anything before it (but warm-ups).
		if err := b.Publish(ctx, []*observabilityv1.AccessLogEntry{{Path: "/marker"}}); err != nil {
			t.Fatal(err)
		}
		if err := otherPeer.Publish(ctx, []*observabilityv1.AccessLogEntry{{Path: "/marker"}}); err != nil {
			t.Fatal(err)
		}
		if got := drainUntil(t, gotA, "/warmup"); got != "/marker" {
			t.Errorf("a heard its own entry %q back", got)
		}
		if got := drainUntil(t, gotOther, "/warmup"); got != "/marker" {
			t.Errorf("another install's replica heard %q", got)
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
