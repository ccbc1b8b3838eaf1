package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
)

// BenchmarkLeaderFailover measures, with the default (LAN) timing, three
// replicas on loopback TCP with BoltDB stores, the time from the leader's
// loss (its process stops: Raft shut down, sockets closed) to the leader
// duties running on the new leader. That includes the new leader's start
// delay (the lease) and its leadership check. Each iteration starts a new
// group; only the failover is timed. Reported: the median, in ms.
func BenchmarkLeaderFailover(b *testing.B) {
	var samples []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		started := make(chan string, 8)
		duty := func(m *tcpMember) app.Duty {
			return app.Duty{Name: "bench", Run: func(ctx context.Context) error {
				started <- m.id
				<-ctx.Done()
				return nil
			}}
		}
		ms := tcpGroup(b, duty)
		var leader string
		select {
		case leader = <-started:
		case <-time.After(30 * time.Second):
			b.Fatal("no leader after 30s")
		}
		var old *tcpMember
		for _, m := range ms {
			if m.id == leader {
				old = m
			}
		}
		b.StartTimer()
		t0 := time.Now()
		old.kill()
		select {
		case id := <-started:
			samples = append(samples, time.Since(t0))
			if id == leader {
				b.Fatalf("the killed replica %s started the duties again", id)
			}
		case <-time.After(30 * time.Second):
			b.Fatal("no new leader after 30s")
		}
		b.StopTimer()
		for _, m := range ms {
			m.kill()
		}
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "ms-median/failover")
	b.ReportMetric(float64(samples[len(samples)-1].Microseconds())/1000, "ms-max/failover")
}

// fakeRelay serves one output snapshot on every watch and reports acks.
type fakeRelay struct {
	snap  *snapshotv1.OutputSnapshot
	acked chan string
}

func (r fakeRelay) OpenPush(context.Context) (app.PushStream, error) {
	return nil, errors.New("not used")
}

func (r fakeRelay) Watch(ctx context.Context, _ string) (app.WatchStream, error) {
	return &fakeWatch{ctx: ctx, snap: r.snap}, nil
}

func (r fakeRelay) Ack(_ context.Context, version string, _ []*snapshotv1.ApplyResult) error {
	r.acked <- version
	return nil
}

type fakeWatch struct {
	ctx  context.Context
	snap *snapshotv1.OutputSnapshot
	sent bool
}

func (w *fakeWatch) Receive() (*snapshotv1.OutputSnapshot, error) {
	if !w.sent {
		w.sent = true
		return w.snap, nil
	}
	<-w.ctx.Done()
	return nil, w.ctx.Err()
}

func (w *fakeWatch) Close() error { return nil }

// nopApplier applies instantly.
type nopApplier struct{}

func (nopApplier) Sync(context.Context) error                      { return nil }
func (nopApplier) Get(domain.ObjectKey) (domain.LiveObject, bool)  { return domain.LiveObject{}, false }
func (nopApplier) Owned() []domain.LiveObject                      { return nil }
func (nopApplier) Changed() <-chan struct{}                        { return nil }
func (nopApplier) TakeChanges() []app.ObjectChange                 { return nil }
func (nopApplier) Delete(context.Context, domain.LiveObject) error { return nil }
func (nopApplier) Apply(_ context.Context, d domain.DesiredObject, _ *domain.LiveObject) (domain.LiveObject, error) {
	return domain.LiveObject{Key: d.Key, Owned: true}, nil
}

// BenchmarkLeaderFailoverToSnapshotApplied measures, like
// BenchmarkLeaderFailover, from the leader's loss to the new leader's
// syncer having applied the output snapshot (20 objects, an instant fake
// applier and relay), replicated its EnvoyConfig through Raft and
// acknowledged it.
func BenchmarkLeaderFailoverToSnapshotApplied(b *testing.B) {
	snap := &snapshotv1.OutputSnapshot{Cluster: "east", WasmFilters: []*snapshotv1.WasmFilterConfig{{Name: "f"}}}
	for i := range 20 {
		snap.Objects = append(snap.Objects, &snapshotv1.Object{ApiVersion: "networking.istio.io/v1", Kind: "VirtualService", Namespace: "ns", Name: fmt.Sprintf("vs-%d", i), Spec: []byte(`{}`)})
	}
	snapshots.SealOutput(snap)
	var samples []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		acked := make(chan string, 8)
		duty := func(m *tcpMember) app.Duty {
			n := m.node
			return app.Duty{Name: "syncer", Run: func(ctx context.Context) error {
				s := app.NewSyncer(fakeRelay{snap: snap, acked: acked}, nopApplier{}, nil, slog.New(slog.DiscardHandler), app.WithLeadership(n), app.WithEnvoyConfigReplicator(n))
				return s.Run(ctx)
			}}
		}
		ms := tcpGroup(b, duty)
		select {
		case <-acked:
		case <-time.After(30 * time.Second):
			b.Fatal("no snapshot applied after 30s")
		}
		var old *tcpMember
		for _, m := range ms {
			if m.node.IsLeader() {
				old = m
			}
		}
		if old == nil {
			b.Fatal("no leader")
		}
		b.StartTimer()
		t0 := time.Now()
		old.kill()
		select {
		case <-acked:
			samples = append(samples, time.Since(t0))
		case <-time.After(30 * time.Second):
			b.Fatal("no snapshot applied by a new leader after 30s")
		}
		b.StopTimer()
		for _, m := range ms {
			m.kill()
		}
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "ms-median/failover")
	b.ReportMetric(float64(samples[len(samples)-1].Microseconds())/1000, "ms-max/failover")
}
