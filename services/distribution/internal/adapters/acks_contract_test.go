// The AckStore contract: one suite, run against every adapter.
package adapters_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/services/distribution/internal/adapters/memory"
	redisacks "github.com/meshplane/meshplane/services/distribution/internal/adapters/redis"
	"github.com/meshplane/meshplane/services/distribution/internal/app"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"
)

type ackStoreFactory struct {
	name string
	// new returns two views of one store, as two replicas would see it.
	new func(t *testing.T) (app.AckStore, app.AckStore)
}

// factories returns memory, and Redis on each topology: one deployment
// per topology for the test, a fresh install per store.
func factories(t *testing.T) []ackStoreFactory {
	out := []ackStoreFactory{
		{"memory", func(t *testing.T) (app.AckStore, app.AckStore) {
			s := memory.NewAcks(nil)
			return s, s
		}},
	}
	n := 0
	for _, d := range deployments(t) {
		out = append(out, ackStoreFactory{"redis-" + string(d.Topology), func(t *testing.T) (app.AckStore, app.AckStore) {
			n++
			install := fmt.Sprintf("test%d", n)
			return redisacks.NewAcks(d.Client(t), install), redisacks.NewAcks(d.Client(t), install)
		}})
	}
	return out
}

// deployments starts a Redis deployment of each topology for the test.
func deployments(t *testing.T) []*redistest.Deployment {
	var out []*redistest.Deployment
	for _, topology := range redistest.Topologies {
		out = append(out, redistest.StartDeployment(t, topology))
	}
	return out
}

func TestAckStoreContract(t *testing.T) {
	for _, f := range factories(t) {
		t.Run(f.name, func(t *testing.T) {
			t.Run("empty", func(t *testing.T) {
				a, _ := f.new(t)
				got, err := a.ListAcks(t.Context())
				if err != nil || len(got) != 0 {
					t.Fatalf("ListAcks = %v, %v; want none", got, err)
				}
			})
			t.Run("latest ack per cluster, seen by every replica", func(t *testing.T) {
				a, b := f.new(t)
				ctx := t.Context()
				at := time.Date(2026, 11, 21, 12, 0, 0, 123, time.UTC)
				put(t, ctx, a, app.AckRecord{Cluster: "west", Version: "w1", AckedAt: at})
				put(t, ctx, a, app.AckRecord{Cluster: "east", Version: "e1", AckedAt: at})
				east2 := app.AckRecord{Cluster: "east", Version: "e2", AckedAt: at.Add(time.Second), ApplyErrors: 1, Results: []*snapshotv1.ApplyResult{
					{Ref: &snapshotv1.ObjectRef{ApiVersion: "networking.istio.io/v1", Kind: "DestinationRule", Namespace: "bookinfo", Name: "reviews"}, Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED},
					{Ref: &snapshotv1.ObjectRef{ApiVersion: "networking.istio.io/v1", Kind: "VirtualService", Namespace: "bookinfo", Name: "reviews"}, Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED, Error: "spec.http: Invalid value"},
				}}
				put(t, ctx, b, east2) // another replica records the next ack

				got, err := a.ListAcks(ctx)
				if err != nil {
					t.Fatal(err)
				}
				want := []app.AckRecord{east2, {Cluster: "west", Version: "w1", AckedAt: at}}
				if diff := cmp.Diff(want, got, protocmp.Transform(), cmp.Comparer(func(x, y time.Time) bool { return x.Equal(y) })); diff != "" {
					t.Fatalf("ListAcks (-want +got):\n%s", diff)
				}
			})
			t.Run("versions sent, newest first, the last KeepSent, seen by every replica", func(t *testing.T) {
				a, b := f.new(t)
				ctx := t.Context()
				if got, err := a.SentVersions(ctx, "east"); err != nil || len(got) != 0 {
					t.Fatalf("SentVersions before any = %v, %v; want none", got, err)
				}
				record := func(s app.AckStore, cluster string, v app.SentVersion) {
					t.Helper()
					if err := s.RecordSent(ctx, cluster, v); err != nil {
						t.Fatalf("RecordSent: %v", err)
					}
				}
				v := func(i int) app.SentVersion {
					return app.SentVersion{Version: fmt.Sprintf("sha256:%04d", i), Objects: i, Results: 2 * i}
				}
				for i := range app.KeepSent + 3 {
					record(a, "east", v(i))
				}
				record(b, "west", v(100))
				// Sent again: the newest, and not kept twice.
				record(b, "east", v(5))
				want := []app.SentVersion{v(5)}
				for i := app.KeepSent + 2; len(want) < app.KeepSent; i-- {
					if i != 5 {
						want = append(want, v(i))
					}
				}
				got, err := b.SentVersions(ctx, "east")
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("SentVersions(east) (-want +got):\n%s", diff)
				}
				if got, err := a.SentVersions(ctx, "west"); err != nil || !cmp.Equal(got, []app.SentVersion{v(100)}) {
					t.Fatalf("SentVersions(west) = %v, %v", got, err)
				}
			})
			t.Run("watch marks lapse and are removed", func(t *testing.T) {
				a, b := f.new(t)
				ctx := t.Context()
				now := time.Now()
				mark := func(s app.AckStore, cluster, replica string, until time.Time) {
					t.Helper()
					if err := s.MarkWatching(ctx, cluster, replica, until); err != nil {
						t.Fatalf("MarkWatching: %v", err)
					}
				}
				mark(a, "east", "r1", now.Add(time.Minute))
				mark(b, "east", "r2", now.Add(time.Minute))
				mark(b, "west", "r2", now.Add(-time.Second)) // lapsed
				mark(a, "north", "r1", now.Add(time.Minute))
				mark(a, "north", "r1", time.Time{}) // removed
				got, err := b.Watched(ctx, now)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(map[string]bool{"east": true}, got); diff != "" {
					t.Fatalf("Watched (-want +got):\n%s", diff)
				}
				// east stays watched while one replica still marks it.
				mark(a, "east", "r1", time.Time{})
				if got, _ := a.Watched(ctx, now); !got["east"] {
					t.Fatal("east not watched while r2 marks it")
				}
				if got, _ := a.Watched(ctx, now.Add(2*time.Minute)); len(got) != 0 {
					t.Fatalf("Watched after every mark lapsed = %v", got)
				}
			})
		})
	}
}

func put(t *testing.T, ctx context.Context, s app.AckStore, rec app.AckRecord) {
	t.Helper()
	if err := s.PutAck(ctx, rec); err != nil {
		t.Fatalf("PutAck: %v", err)
	}
}
