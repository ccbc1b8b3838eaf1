package service_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/distribution/service"
	"google.golang.org/protobuf/proto"
)

func deltaWatch(t *testing.T, c distributionv1connect.DistributionServiceClient, have, base string) *connect.ServerStreamForClient[distributionv1.WatchResponse] {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	stream, err := c.Watch(ctx, connect.NewRequest(&distributionv1.WatchRequest{Version: have, AgentVersion: "test", AcceptDelta: true, DeltaBase: base}))
	if err != nil {
		cancel()
		t.Fatalf("Watch: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = stream.Close()
	})
	return stream
}

func nextResponse(t *testing.T, stream *connect.ServerStreamForClient[distributionv1.WatchResponse]) *distributionv1.WatchResponse {
	t.Helper()
	if !stream.Receive() {
		t.Fatalf("watch ended: %v", stream.Err())
	}
	return stream.Msg()
}

// Deltas through real HTTP/2 servers and a real Redis shared by two
// replicas, over Connect and gRPC:
//   - an agent that accepts deltas gets its first version whole, and the
//     next one as a delta that makes exactly that version;
//   - the index lives in Redis: an agent that moves to the other replica,
//     or returns after its replica restarted, gets a delta from the version
//     it holds;
//   - an agent that holds no whole snapshot, or one whose index is not
//     kept, gets the whole snapshot; one that does not ask for deltas never
//     gets one.
func TestDeltasAcrossReplicas(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			r := redistest.Start(t)
			cfg := service.DefaultConfig()
			cfg.Redis.Addrs = r.Addr()
			ca := platformtest.NewCA(t, "test CA")
			a, b := newEnvCA(t, ca, cfg), newEnvCA(t, ca, cfg)
			a.outputs = snapstore.NewRedis(r.Client(t), cfg.Install, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })

			names := make([]string, 200)
			for i := range names {
				names[i] = "svc-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			}
			v1 := output("east", names...)
			a.put(t, v1)
			stream := deltaWatch(t, a.client(t, eastID, p.opts), "", "")
			if got := nextResponse(t, stream); got.GetSnapshot().GetVersion() != v1.GetVersion() || got.GetDelta() != nil {
				t.Fatalf("first response: snapshot %q, delta %v; want the whole of v1", got.GetSnapshot().GetVersion(), got.GetDelta() != nil)
			}

			v2 := output("east", names[:199]...) // one object removed
			v2.Objects[10].Spec = []byte(`{"host":"changed"}`)
			snapshots.SealOutput(v2)
			a.put(t, v2)
			got := nextResponse(t, stream)
			d := got.GetDelta()
			if d == nil || got.GetSnapshot() != nil {
				t.Fatalf("second response: snapshot %v, no delta; want a delta", got.GetSnapshot().GetVersion())
			}
			if len(d.GetObjects()) != 1 || len(d.GetRemovedObjects()) != 1 {
				t.Fatalf("delta carries %d objects and %d removals, want 1 and 1", len(d.GetObjects()), len(d.GetRemovedObjects()))
			}
			made, err := snapshots.ApplyDelta(v1, d)
			if err != nil || !proto.Equal(made, v2) {
				t.Fatalf("ApplyDelta(v1, delta) = %v, %v; want v2", made.GetVersion(), err)
			}
			if full := proto.Size(v2); proto.Size(d)*20 > full {
				t.Fatalf("delta %d bytes for a whole snapshot of %d", proto.Size(d), full)
			}

			// The other replica, which never served this agent, has the index
			// from Redis.
			v3 := output("east", names[:198]...)
			a.put(t, v3)
			other := deltaWatch(t, b.client(t, eastID, p.opts), v2.GetVersion(), v2.GetVersion())
			got = nextResponse(t, other)
			if got.GetDelta() == nil {
				t.Fatalf("the other replica sent the whole snapshot, want a delta from v2")
			}
			if made, err := snapshots.ApplyDelta(v2, got.GetDelta()); err != nil || made.GetVersion() != v3.GetVersion() {
				t.Fatalf("delta from the other replica: %v, %v", made.GetVersion(), err)
			}

			// No whole snapshot held, an unknown base, or no deltas asked
			// for: the whole snapshot.
			for name, req := range map[string][2]string{"no base": {v1.GetVersion(), ""}, "unknown base": {v1.GetVersion(), "sha256:0000"}} {
				got := nextResponse(t, deltaWatch(t, b.client(t, eastID, p.opts), req[0], req[1]))
				if got.GetDelta() != nil || got.GetSnapshot().GetVersion() != v3.GetVersion() {
					t.Errorf("%s: delta %v, snapshot %q; want the whole of v3", name, got.GetDelta() != nil, got.GetSnapshot().GetVersion())
				}
			}
			if s := next(t, watchStream(t, b.client(t, eastID, p.opts), v2.GetVersion())); s.GetVersion() != v3.GetVersion() {
				t.Errorf("a watch without deltas got %q, want the whole of v3", s.GetVersion())
			}
			// Replica a sent v2, and v3 to its first watch, which is still
			// open, as deltas.
			got = nextResponse(t, stream)
			if got.GetDelta().GetVersion() != v3.GetVersion() {
				t.Fatalf("the first watch got %v, want a delta to v3", got)
			}
			wantMetric(t, scrape(t, a.admin, "meshplane_distribution_deltas"), `meshplane_distribution_deltas_sent_total{cluster="east"}`, "2")
		})
	}
}

// Outputs stored with their tables (translation's OutputEncoder), through
// a real Redis: deltas are cut by the table, and a table that does not
// match its encoding (one that lies about an object the delta sends, or
// that is not a table) costs a scan of the whole output, never a wrong
// delta; an agent without a base gets the whole snapshot.
func TestDeltasCutByTables(t *testing.T) {
	r := redistest.Start(t)
	cfg := service.DefaultConfig()
	cfg.Redis.Addrs = r.Addr()
	e := newEnvCA(t, platformtest.NewCA(t, "test CA"), cfg)
	e.outputs = snapstore.NewRedis(r.Client(t), cfg.Install, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	var enc snapshots.OutputEncoder
	put := func(o *snapshotv1.OutputSnapshot, spoil func(table []byte) []byte) {
		t.Helper()
		data, table, err := enc.Encode(o)
		if err != nil {
			t.Fatal(err)
		}
		if spoil != nil {
			table = spoil(slices.Clone(table))
		}
		if err := snapshots.PutEncoded(t.Context(), e.outputs, o.GetCluster(), snapshots.Encoded[*snapshotv1.OutputSnapshot]{Version: o.GetVersion(), Value: o, Data: data, Table: table}); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprintf("svc-%03d", i)
	}
	v1 := output("east", names...)
	put(v1, nil)
	stream := deltaWatch(t, e.client(t, eastID, protocols[0].opts), "", "")
	if got := nextResponse(t, stream); got.GetSnapshot().GetVersion() != v1.GetVersion() {
		t.Fatalf("first response: %v; want the whole of v1", got)
	}
	held := v1
	for i, spoil := range []func([]byte) []byte{
		nil,
		// The changed object's content hash, the last byte of the table.
		func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		func([]byte) []byte { return []byte("mpt1 not a table") },
	} {
		next := &snapshotv1.OutputSnapshot{Cluster: "east", Objects: slices.Clone(held.GetObjects())}
		last := proto.Clone(next.Objects[99]).(*snapshotv1.Object)
		last.Spec = fmt.Appendf(nil, `{"round":%d}`, i)
		next.Objects[99] = last
		snapshots.SealOutput(next)
		put(next, spoil)
		got := nextResponse(t, stream)
		if got.GetDelta() == nil {
			t.Fatalf("round %d: the whole snapshot, want a delta", i)
		}
		if n := len(got.GetDelta().GetObjects()); n != 1 {
			t.Fatalf("round %d: the delta carries %d objects, want 1", i, n)
		}
		made, err := snapshots.ApplyDelta(held, got.GetDelta())
		if err != nil || !proto.Equal(made, next) {
			t.Fatalf("round %d: the delta makes %v, %v; want the next version", i, made.GetVersion(), err)
		}
		held = next
	}
	// No base: the whole snapshot, checked in full.
	if got := nextResponse(t, deltaWatch(t, e.client(t, eastID, protocols[0].opts), "", "")); got.GetSnapshot().GetVersion() != held.GetVersion() {
		t.Fatalf("a watch with no base got %v, want the whole snapshot", got)
	}
}
