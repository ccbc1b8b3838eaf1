package app

import (
	"errors"
	"slices"
	"strings"
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

func withStatuses(objs []*snapshotv1.Object, sts ...*snapshotv1.ResourceStatus) *snapshotv1.OutputSnapshot {
	s := &snapshotv1.OutputSnapshot{Cluster: "east", Objects: objs, Statuses: sts}
	snapshots.SealOutput(s)
	return s
}

func status(name string, gen int64, state string) *snapshotv1.ResourceStatus {
	return &snapshotv1.ResourceStatus{
		ApiVersion: "networking.meshplane.dev/v1", Kind: "TrafficPolicy", Namespace: "bookinfo", Name: name,
		ObservedGeneration: gen, Status: []byte(`{"state":"` + state + `"}`),
	}
}

func TestSyncerWritesStatuses(t *testing.T) {
	applier := newFakeApplier()
	relay := newFakeRelay()
	writer := &fakeStatuses{fail: map[string]error{"broken": errors.New(`trafficpolicies "broken" is forbidden`)}}
	s := NewSyncer(relay, applier, nil, testLogger(t), WithStatusWriter(writer))
	objs := []*snapshotv1.Object{object("DestinationRule", "reviews")}

	// A failed status write is a REJECTED result naming the user's
	// resource; the objects are applied all the same, and the version is
	// retried rather than taken as applied.
	v1 := withStatuses(objs, status("retries", 1, "ACCEPTED"), status("broken", 1, "INVALID"))
	if s.Apply(t.Context(), v1) {
		t.Fatal("Apply reported success with a failed status write")
	}
	a := <-relay.acks
	if got, want := outcomes(a.results), []string{"APPLIED DestinationRule/reviews", "REJECTED TrafficPolicy/broken"}; !slices.Equal(got, want) {
		t.Fatalf("ack = %v, want %v", got, want)
	}
	if r := a.results[1]; r.GetRef().GetApiVersion() != "networking.meshplane.dev/v1" || r.GetRef().GetNamespace() != "bookinfo" || !strings.Contains(r.GetError(), "forbidden") {
		t.Fatalf("status failure result = %v", r)
	}
	if s.AppliedVersion() == v1.GetVersion() {
		t.Fatal("a version with a failed status write was taken as applied")
	}

	// Retried: only the status that failed is written again; the one
	// already written costs nothing.
	writer.mu.Lock()
	delete(writer.fail, "broken")
	writer.calls = nil
	writer.mu.Unlock()
	if !s.Apply(t.Context(), v1) {
		t.Fatal("retry failed")
	}
	<-relay.acks
	if got := writer.callLog(); !slices.Equal(got, []string{"broken"}) {
		t.Fatalf("status writes on retry = %v, want only broken", got)
	}

	// A new generation's status is written; unchanged ones are not.
	writer.mu.Lock()
	writer.calls = nil
	writer.mu.Unlock()
	v2 := withStatuses(objs, status("retries", 2, "ACCEPTED"), status("broken", 1, "INVALID"))
	if !s.Apply(t.Context(), v2) {
		t.Fatal("Apply v2 failed")
	}
	<-relay.acks
	if got := writer.callLog(); !slices.Equal(got, []string{"retries"}) {
		t.Fatalf("status writes for v2 = %v, want only retries", got)
	}
}

// A skipped write (the resource is gone or at another generation) is
// tried again with the next snapshot that carries it.
func TestSyncerRetriesSkippedStatuses(t *testing.T) {
	relay := newFakeRelay()
	writer := &fakeStatuses{outcome: StatusSkipped}
	s := NewSyncer(relay, newFakeApplier(), nil, testLogger(t), WithStatusWriter(writer))
	v1 := withStatuses(nil, status("retries", 1, "ACCEPTED"))
	for range 2 {
		if !s.Apply(t.Context(), v1) {
			t.Fatal("a skipped status made Apply fail")
		}
		<-relay.acks
	}
	if got := writer.callLog(); len(got) != 2 {
		t.Fatalf("status writes = %v, want one per Apply", got)
	}
}
