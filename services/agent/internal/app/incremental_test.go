package app

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"google.golang.org/protobuf/proto"
)

// After an apply that ran to its end, a version made from it by a delta
// (the same objects but the changed ones) is applied by looking only at
// what changed and at what was left to do: the changed and new objects
// are written, the removed ones deleted, a failed write is retried and a
// user's object stays a conflict, and every object is still acknowledged.
// A whole snapshot with the same content writes nothing.
func TestSyncerAppliesOnlyWhatADeltaChanged(t *testing.T) {
	f := newFakeApplier()
	f.users[keyOf("DestinationRule", "user")] = true
	relay := newFakeRelay()
	s := NewSyncer(relay, f, nil, slog.New(slog.DiscardHandler))
	ctx := t.Context()
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	lastAck := func() []string {
		t.Helper()
		select {
		case a := <-relay.acks:
			out := outcomes(a.results)
			slices.Sort(out)
			return out
		default:
			t.Fatal("no acknowledgement")
			return nil
		}
	}
	calls := func() []string {
		t.Helper()
		c := f.callLog()
		f.mu.Lock()
		f.calls = nil
		f.mu.Unlock()
		return c
	}

	v1 := output(object("DestinationRule", "a"), object("DestinationRule", "b"), object("DestinationRule", "c"),
		object("VirtualService", "d"), object("VirtualService", "e"), object("DestinationRule", "user"))
	if s.Apply(ctx, v1) {
		t.Fatal("the first apply reported no conflict")
	}
	if got := calls(); len(got) != 5 {
		t.Fatalf("first apply: %d calls, want 5: %v", len(got), got)
	}
	lastAck()

	// A delta: c changed, e removed, f added; c's write fails.
	next := proto.Clone(v1).(*snapshotv1.OutputSnapshot)
	next.Objects = slices.DeleteFunc(next.Objects, func(o *snapshotv1.Object) bool { return o.GetName() == "e" })
	for _, o := range next.Objects {
		if o.GetName() == "c" {
			o.Spec = []byte(`{"host":"c","subsets":[{"name":"v2"}]}`)
		}
	}
	next.Objects = append(next.Objects, object("VirtualService", "f"))
	snapshots.SealOutput(next)
	d, _, err := snapshots.Diff(v1.GetVersion(), snapshots.IndexOutput(v1), next)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := snapshots.ApplyDelta(v1, d)
	if err != nil {
		t.Fatal(err)
	}
	f.setApplyErr(keyOf("DestinationRule", "c"), errBoomTest)
	if s.Apply(ctx, v2) {
		t.Fatal("the apply with a failed write reported success")
	}
	want := []string{call("apply", "DestinationRule", "c"), call("apply", "VirtualService", "f"), call("delete", "VirtualService", "e")}
	if got := calls(); !slices.Equal(got, want) {
		t.Fatalf("the delta's apply made\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantAck := []string{"APPLIED DestinationRule/a", "APPLIED DestinationRule/b", "APPLIED VirtualService/d", "APPLIED VirtualService/f",
		"CONFLICT DestinationRule/user", "DELETED VirtualService/e", "REJECTED DestinationRule/c"}
	if got := lastAck(); !slices.Equal(got, wantAck) {
		t.Fatalf("ack\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantAck, "\n"))
	}

	// The retry writes only what failed.
	f.setApplyErr(keyOf("DestinationRule", "c"), nil)
	if s.Apply(ctx, v2) {
		t.Fatal("the retry reported no conflict")
	}
	if got, want := calls(), []string{call("apply", "DestinationRule", "c")}; !slices.Equal(got, want) {
		t.Fatalf("the retry made %v, want %v", got, want)
	}
	wantAck = []string{"APPLIED DestinationRule/a", "APPLIED DestinationRule/b", "APPLIED DestinationRule/c", "APPLIED VirtualService/d",
		"APPLIED VirtualService/f", "CONFLICT DestinationRule/user"}
	if got := lastAck(); !slices.Equal(got, wantAck) {
		t.Fatalf("ack\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantAck, "\n"))
	}

	// Someone deletes a; the view's change is looked at again by the next
	// apply, which finds a put back by drift correction.
	live, _ := f.Get(keyOf("DestinationRule", "a"))
	f.change(ObjectChange{Object: live, Gone: true})
	if !s.observe(ctx) {
		t.Fatal("the drift correction failed")
	}
	if got, want := calls(), []string{call("apply", "DestinationRule", "a")}; !slices.Equal(got, want) {
		t.Fatalf("drift correction made %v, want %v", got, want)
	}

	// The whole snapshot of the same content, decoded anew: nothing to write.
	raw, err := proto.Marshal(v2)
	if err != nil {
		t.Fatal(err)
	}
	whole := &snapshotv1.OutputSnapshot{}
	if err := proto.Unmarshal(raw, whole); err != nil {
		t.Fatal(err)
	}
	s.Apply(ctx, whole)
	if got := calls(); len(got) != 0 {
		t.Fatalf("the same content as a whole snapshot made %v", got)
	}
	if got := lastAck(); !slices.Equal(got, wantAck) {
		t.Fatalf("ack\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantAck, "\n"))
	}
	if !equalSets(f.ownedKeys(), map[domain.ObjectKey]bool{
		keyOf("DestinationRule", "a"): true, keyOf("DestinationRule", "b"): true, keyOf("DestinationRule", "c"): true,
		keyOf("VirtualService", "d"): true, keyOf("VirtualService", "f"): true,
	}) {
		t.Fatalf("owned objects %v", f.ownedKeys())
	}
}

var errBoomTest = errors.New("admission webhook denied the request")
