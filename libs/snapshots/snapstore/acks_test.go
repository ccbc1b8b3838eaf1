package snapstore_test

import (
	"errors"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"google.golang.org/protobuf/proto"
)

// testAckStore is the contract every AckStore keeps.
func testAckStore(t *testing.T, s snapshots.AckStore) {
	ctx := t.Context()
	if _, err := s.GetAck(ctx, "east"); !errors.Is(err, snapshots.ErrNotFound) {
		t.Fatalf("GetAck of an unknown cluster: %v, want ErrNotFound", err)
	}
	changes, err := s.SubscribeAcks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := snapshots.Ack{
		Cluster: "east", Version: "sha256:1", ApplyErrors: 1, AckedAt: time.Unix(0, 1700000000123456789), Applied: 21053, Deleted: 2,
		Results: []*snapshotv1.ApplyResult{{
			Ref:     &snapshotv1.ObjectRef{ApiVersion: "networking.istio.io/v1", Kind: "VirtualService", Namespace: "default", Name: "reviews"},
			Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED, Error: "spec.http[0].timeout: invalid",
		}},
	}
	if err := s.PutAck(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAck(ctx, snapshots.Ack{Cluster: "west", Version: "sha256:2", AckedAt: time.Unix(5, 0)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetAck(ctx, "east")
	if err != nil {
		t.Fatal(err)
	}
	if got.Cluster != want.Cluster || got.Version != want.Version || got.ApplyErrors != want.ApplyErrors ||
		got.Applied != want.Applied || got.Deleted != want.Deleted || !got.AckedAt.Equal(want.AckedAt) || len(got.Results) != 1 || !proto.Equal(got.Results[0], want.Results[0]) {
		t.Errorf("GetAck = %+v, want %+v", got, want)
	}
	list, err := s.ListAcks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Cluster != "east" || list[1].Cluster != "west" || list[1].Version != "sha256:2" {
		t.Errorf("ListAcks = %+v, want east and west in order", list)
	}
	seen := map[string]string{}
	deadline := time.After(10 * time.Second)
	for len(seen) < 2 {
		select {
		case c := <-changes:
			if !c.Resync {
				seen[c.Cluster] = c.Version
			}
		case <-deadline:
			t.Fatalf("notices seen: %v, want east and west", seen)
		}
	}
	if seen["east"] != "sha256:1" || seen["west"] != "sha256:2" {
		t.Errorf("notices = %v", seen)
	}
}

func TestMemoryAcks(t *testing.T) { testAckStore(t, snapstore.NewMemoryAcks()) }

func TestRedisAcks(t *testing.T) {
	redistest.ForEachTopology(t, func(t *testing.T, d *redistest.Deployment) {
		testAckStore(t, snapstore.NewRedisAcks(d.Client(t), "test"))
	})
}
