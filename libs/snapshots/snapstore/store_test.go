package snapstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"google.golang.org/protobuf/proto"
)

func newOutput() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} }

func output(cluster, name string) *snapshotv1.OutputSnapshot {
	s := &snapshotv1.OutputSnapshot{Cluster: cluster, Objects: []*snapshotv1.Object{{ApiVersion: "v1", Kind: "K", Name: name}}}
	snapshots.SealOutput(s)
	return s
}

// The contract every Store implementation must meet. It runs against the
// memory store and a real redis-server.
func runContract(t *testing.T, newStore func(t *testing.T) snapshots.Store[*snapshotv1.OutputSnapshot]) {
	ctx := t.Context()
	t.Run("get missing", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Get(ctx, "nope"); !errors.Is(err, snapshots.ErrNotFound) {
			t.Fatalf("Get of a missing cluster: err = %v, want ErrNotFound", err)
		}
		if _, err := s.Version(ctx, "nope"); !errors.Is(err, snapshots.ErrNotFound) {
			t.Fatalf("Version of a missing cluster: err = %v, want ErrNotFound", err)
		}
	})
	t.Run("table kept with its encoding only", func(t *testing.T) {
		s := newStore(t)
		a := output("a", "x")
		var enc snapshots.OutputEncoder
		data, table, err := enc.Encode(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := snapshots.PutEncoded(ctx, s, "a", snapshots.Encoded[*snapshotv1.OutputSnapshot]{Version: a.GetVersion(), Value: a, Data: data, Table: table}); err != nil {
			t.Fatal(err)
		}
		e, err := snapshots.GetEncoded(ctx, s, "a")
		if err != nil || !bytes.Equal(e.Data, data) || !bytes.Equal(e.Table, table) {
			t.Fatalf("GetEncoded after a put with a table: %v, data equal %v, table equal %v", err, bytes.Equal(e.Data, data), bytes.Equal(e.Table, table))
		}
		// A later put without a table leaves none of the earlier version.
		b := output("a", "y")
		if err := s.Put(ctx, "a", b.GetVersion(), b); err != nil {
			t.Fatal(err)
		}
		if e, err = snapshots.GetEncoded(ctx, s, "a"); err != nil || e.Table != nil || e.Version != b.GetVersion() {
			t.Fatalf("GetEncoded after a put without a table: %v, version %s, table of %d bytes", err, e.Version, len(e.Table))
		}
	})
	t.Run("put get list delete", func(t *testing.T) {
		s := newStore(t)
		a, b := output("a", "x"), output("b", "y")
		for _, o := range []*snapshotv1.OutputSnapshot{b, a} {
			if err := s.Put(ctx, o.GetCluster(), o.GetVersion(), o); err != nil {
				t.Fatal(err)
			}
		}
		e, err := s.Get(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if e.Version != a.GetVersion() || !proto.Equal(e.Value, a) {
			t.Fatalf("Get(a) = %v %v, want %v", e.Version, e.Value, a)
		}
		enc, err := snapshots.GetEncoded(ctx, s, "a")
		if err != nil {
			t.Fatal(err)
		}
		fromBytes := &snapshotv1.OutputSnapshot{}
		if err := proto.Unmarshal(enc.Data, fromBytes); err != nil || enc.Version != a.GetVersion() || !proto.Equal(fromBytes, a) {
			t.Fatalf("GetEncoded(a) = %v, %v, want the encoding of %v", enc.Version, err, a)
		}
		v, err := s.Version(ctx, "b")
		if err != nil || v != b.GetVersion() {
			t.Fatalf("Version(b) = %q, %v", v, err)
		}
		list, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Cluster != "a" || list[1].Cluster != "b" {
			t.Fatalf("List = %+v, want a then b", list)
		}
		if _, err := s.Get(ctx, "c"); !errors.Is(err, snapshots.ErrNotFound) {
			t.Fatalf("Get of a cluster never put: %v", err)
		}
		if _, err := snapshots.GetEncoded(ctx, s, "c"); !errors.Is(err, snapshots.ErrNotFound) {
			t.Fatalf("GetEncoded of a cluster never put: %v", err)
		}
	})
	t.Run("stored value is isolated from the caller", func(t *testing.T) {
		s := newStore(t)
		a := output("a", "x")
		if err := s.Put(ctx, "a", a.GetVersion(), a); err != nil {
			t.Fatal(err)
		}
		a.Objects[0].Name = "changed"
		e, err := s.Get(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if e.Value.GetObjects()[0].GetName() != "x" {
			t.Fatal("mutating the message after Put changed the stored snapshot")
		}
	})
	t.Run("subscribe sees puts", func(t *testing.T) {
		s := newStore(t)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ch, err := s.Subscribe(sctx)
		if err != nil {
			t.Fatal(err)
		}
		a := output("a", "x")
		if err := s.Put(ctx, "a", a.GetVersion(), a); err != nil {
			t.Fatal(err)
		}
		c := next(t, ch)
		if c.Cluster != "a" || c.Version != a.GetVersion() {
			t.Fatalf("change = %+v", c)
		}
		b := output("b", "y")
		if err := s.Put(ctx, "b", b.GetVersion(), b); err != nil {
			t.Fatal(err)
		}
		if c := next(t, ch); c.Cluster != "b" || c.Version != b.GetVersion() {
			t.Fatalf("change = %+v, want b at %s", c, b.GetVersion())
		}
		cancel()
		for range ch { // must close
		}
	})
}

// next returns the next change that is not a resync.
func next(t *testing.T, ch <-chan snapshots.Change) snapshots.Change {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				t.Fatal("subscription closed")
			}
			if c.Resync {
				continue
			}
			return c
		case <-deadline:
			t.Fatal("no change within 5s")
		}
	}
}

func TestMemoryStore(t *testing.T) {
	runContract(t, func(t *testing.T) snapshots.Store[*snapshotv1.OutputSnapshot] {
		return snapstore.NewMemory(newOutput)
	})
}

func TestRedisStore(t *testing.T) {
	redistest.ForEachTopology(t, func(t *testing.T, d *redistest.Deployment) {
		client := d.Client(t)
		n := 0
		runContract(t, func(t *testing.T) snapshots.Store[*snapshotv1.OutputSnapshot] {
			n++ // a fresh install prefix keeps subtests apart
			return snapstore.NewRedis(client, "test"+string(rune('a'+n)), snapshots.Outputs, newOutput)
		})
	})
}

func TestWriteThroughSurvivesRedisOutage(t *testing.T) {
	ctx := t.Context()
	srv := redistest.Start(t)
	client := srv.Client(t)
	remote := snapstore.NewRedis(client, "wt", snapshots.Outputs, newOutput)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	wt := snapstore.NewWriteThrough[*snapshotv1.OutputSnapshot](remote, snapstore.NewMemory(newOutput), log)

	a := output("a", "x")
	if err := wt.Put(ctx, "a", a.GetVersion(), a); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	b := output("b", "y")
	if err := wt.Put(ctx, "b", b.GetVersion(), b); err != nil {
		t.Fatalf("Put while Redis is down must succeed: %v", err)
	}
	if got := wt.Pending(); len(got) != 1 || got[0] != "b" {
		t.Fatalf("Pending = %v, want [b]", got)
	}
	e, err := wt.Get(ctx, "b")
	if err != nil || e.Version != b.GetVersion() {
		t.Fatalf("Get(b) while Redis is down = %v, %v", e.Version, err)
	}
	list, err := wt.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("List while Redis is down = %d entries, %v; want 2", len(list), err)
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 15*time.Second, "pending snapshots written through after restart", func() bool {
		if len(wt.Pending()) == 0 {
			return true
		}
		wt.Flush(ctx)
		return false
	})
	got, err := remote.Get(ctx, "b")
	if err != nil || got.Version != b.GetVersion() {
		t.Fatalf("remote Get(b) after write-through = %v, %v", got.Version, err)
	}
}

// GetEncoded returns the stored bytes.
func TestRedisGetEncoded(t *testing.T) {
	redistest.ForEachTopology(t, testRedisGetEncoded)
}

// sealedInput is a sealed input snapshot of cluster with user resources
// and labels (maps, whose encoding order varies).
func sealedInput(cluster string) *snapshotv1.InputSnapshot {
	s := &snapshotv1.InputSnapshot{Cluster: cluster}
	for _, n := range []string{"b", "a"} {
		s.Destinations = append(s.Destinations, &discoveryv1.Destination{
			Metadata: &commonv1.ObjectMeta{Name: n, Namespace: "ns", Cluster: cluster},
			Spec: &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
				Ref:    &commonv1.ClusterObjectRef{Name: n, Namespace: "ns", Cluster: cluster},
				Labels: map[string]string{"app": "x", "b": "1", "c": "2", "d": "3"},
			}}},
		})
	}
	for i := range 2 {
		s.TrafficPolicies = append(s.TrafficPolicies, &networkingv1.TrafficPolicy{Metadata: &commonv1.ObjectMeta{Name: fmt.Sprintf("tp%d", i), Namespace: "ns", Cluster: cluster}})
	}
	snapshots.SealInput(s)
	return s
}

func testRedisGetEncoded(t *testing.T, d *redistest.Deployment) {
	store := snapstore.NewRedis(d.Client(t), "test", snapshots.Inputs, func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} })
	if _, err := store.GetEncoded(t.Context(), "east"); !errors.Is(err, snapshots.ErrNotFound) {
		t.Fatalf("GetEncoded of nothing: %v, want ErrNotFound", err)
	}
	in := sealedInput("east")
	if err := store.Put(t.Context(), "east", in.GetVersion(), in); err != nil {
		t.Fatal(err)
	}
	e, err := store.GetEncoded(t.Context(), "east")
	if err != nil {
		t.Fatal(err)
	}
	again := &snapshotv1.InputSnapshot{}
	if err := proto.Unmarshal(e.Data, again); err != nil {
		t.Fatal(err)
	}
	if e.Version != in.GetVersion() || !proto.Equal(again, in) {
		t.Fatalf("GetEncoded = version %s, data equal %v; want %s and equal", e.Version, proto.Equal(again, in), in.GetVersion())
	}
}
