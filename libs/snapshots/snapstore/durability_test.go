package snapstore_test

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
)

// With Durability, a snapshot, a delete or an ack that no replica holds
// within the timeout fails with ErrNotReplicated; the write-through store
// keeps such a snapshot pending and writes it again until replicas hold
// it. Without replicas nothing fails.
func TestWritesWaitForReplicas(t *testing.T) {
	d := redistest.StartDeployment(t, redistest.Sentinel)
	ctx := t.Context()
	client := d.Client(t)
	durable := snapstore.Durability{Replicas: 1, Timeout: 300 * time.Millisecond}
	store := snapstore.NewRedis(client, "prod", snapshots.Outputs, newOutput).WithDurability(durable)
	acks := snapstore.NewRedisAcks(client, "prod").WithDurability(durable)
	first := output("east", "reviews")
	if err := store.Put(ctx, "east", first.GetVersion(), first); err != nil {
		t.Fatalf("put with replicas up: %v", err)
	}
	if err := acks.PutAck(ctx, snapshots.Ack{Cluster: "east", Version: first.GetVersion(), AckedAt: time.Now()}); err != nil {
		t.Fatalf("ack with replicas up: %v", err)
	}

	// Both replicas go.
	primary, err := d.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var replicas []*redistest.Server
	for _, n := range d.Nodes {
		if n != primary {
			replicas = append(replicas, n)
			n.Kill()
		}
	}
	second := output("east", "ratings")
	if err := store.Put(ctx, "east", second.GetVersion(), second); !errors.Is(err, snapshots.ErrNotReplicated) {
		t.Errorf("put with no replica: %v, want ErrNotReplicated", err)
	}
	if err := acks.PutAck(ctx, snapshots.Ack{Cluster: "east", Version: second.GetVersion(), AckedAt: time.Now()}); !errors.Is(err, snapshots.ErrNotReplicated) {
		t.Errorf("ack with no replica: %v, want ErrNotReplicated", err)
	}

	// Through the write-through store the put is accepted, kept
	// pending, and written again once a replica is back.
	wt := snapstore.NewWriteThrough(store, snapstore.NewMemory(newOutput), slog.New(slog.NewTextHandler(io.Discard, nil)))
	third := output("east", "details")
	if err := wt.Put(ctx, "east", third.GetVersion(), third); err != nil {
		t.Fatalf("write-through put: %v", err)
	}
	if got := wt.Pending(); len(got) != 1 || got[0] != "east" {
		t.Fatalf("pending %v, want [east]", got)
	}
	for _, r := range replicas {
		if err := r.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	go wt.Run(ctx, 100*time.Millisecond)
	platformtest.Eventually(t, 30*time.Second, "the pending snapshot written with a replica", func() bool {
		return len(wt.Pending()) == 0
	})
	if v, err := store.Version(ctx, "east"); err != nil || v != third.GetVersion() {
		t.Errorf("stored version %q (%v), want %s", v, err, third.GetVersion())
	}
}
