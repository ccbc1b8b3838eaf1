package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"go.uber.org/goleak"
)

const istioNet = "networking.istio.io/v1"

func object(kind, name string) *snapshotv1.Object {
	return &snapshotv1.Object{ApiVersion: istioNet, Kind: kind, Namespace: "bookinfo", Name: name, Spec: []byte(`{"host":"` + name + `"}`)}
}

func keyOf(kind, name string) domain.ObjectKey {
	return domain.ObjectKey{APIVersion: istioNet, Kind: kind, Namespace: "bookinfo", Name: name}
}

func output(objs ...*snapshotv1.Object) *snapshotv1.OutputSnapshot {
	s := &snapshotv1.OutputSnapshot{Cluster: "east", Objects: objs}
	snapshots.SealOutput(s)
	return s
}

// outcome is one result as "<OUTCOME> <Kind>/<name>".
func outcomes(results []*snapshotv1.ApplyResult) []string {
	var out []string
	for _, r := range results {
		o := strings.TrimPrefix(r.GetOutcome().String(), "APPLY_OUTCOME_")
		out = append(out, fmt.Sprintf("%s %s/%s", o, r.GetRef().GetKind(), r.GetRef().GetName()))
	}
	return out
}

func call(verb, kind, name string) string { return verb + " " + keyOf(kind, name).String() }

func TestSyncerApply(t *testing.T) {
	errBoom := errors.New("admission webhook denied the request")
	tests := []struct {
		name  string
		owned []domain.ObjectKey
		setup func(*fakeApplier)
		snap  *snapshotv1.OutputSnapshot

		wantOK       bool
		wantCalls    []string
		wantOutcomes []string
		wantOwned    []domain.ObjectKey
		wantApplied  bool // AppliedVersion becomes the snapshot's version
		wantNoAck    bool
	}{
		{
			name: "applies in dependency order, then acknowledges",
			snap: output(object("VirtualService", "reviews"), object("DestinationRule", "reviews")),
			wantCalls: []string{
				call("apply", "DestinationRule", "reviews"),
				call("apply", "VirtualService", "reviews"),
			},
			wantOutcomes: []string{"APPLIED DestinationRule/reviews", "APPLIED VirtualService/reviews"},
			wantOwned:    []domain.ObjectKey{keyOf("DestinationRule", "reviews"), keyOf("VirtualService", "reviews")},
			wantOK:       true, wantApplied: true,
		},
		{
			name:  "deletes owned objects the snapshot no longer holds, after applying",
			owned: []domain.ObjectKey{keyOf("DestinationRule", "old"), keyOf("VirtualService", "old"), keyOf("DestinationRule", "reviews")},
			snap:  output(object("DestinationRule", "reviews")),
			wantCalls: []string{
				call("apply", "DestinationRule", "reviews"),
				call("delete", "VirtualService", "old"),
				call("delete", "DestinationRule", "old"),
			},
			wantOutcomes: []string{"APPLIED DestinationRule/reviews", "DELETED VirtualService/old", "DELETED DestinationRule/old"},
			wantOwned:    []domain.ObjectKey{keyOf("DestinationRule", "reviews")},
			wantOK:       true, wantApplied: true,
		},
		{
			name:  "an empty snapshot deletes every owned object",
			owned: []domain.ObjectKey{keyOf("DestinationRule", "old")},
			snap:  output(),
			wantCalls: []string{
				call("delete", "DestinationRule", "old"),
			},
			wantOutcomes: []string{"DELETED DestinationRule/old"},
			wantOK:       true, wantApplied: true,
		},
		{
			name: "a user's object is a conflict, the others still apply",
			setup: func(f *fakeApplier) {
				f.applyErr[keyOf("DestinationRule", "ratings")] = fmt.Errorf("%w: DestinationRule bookinfo/ratings", ErrConflict)
			},
			snap: output(object("DestinationRule", "ratings"), object("DestinationRule", "reviews"), object("VirtualService", "reviews")),
			wantCalls: []string{
				call("apply", "DestinationRule", "ratings"),
				call("apply", "DestinationRule", "reviews"),
				call("apply", "VirtualService", "reviews"),
			},
			wantOutcomes: []string{"CONFLICT DestinationRule/ratings", "APPLIED DestinationRule/reviews", "APPLIED VirtualService/reviews"},
			wantOwned:    []domain.ObjectKey{keyOf("DestinationRule", "reviews"), keyOf("VirtualService", "reviews")},
		},
		{
			name: "a rejected apply is reported, the others still apply",
			setup: func(f *fakeApplier) {
				f.applyErr[keyOf("DestinationRule", "reviews")] = errBoom
			},
			snap: output(object("DestinationRule", "reviews"), object("VirtualService", "reviews")),
			wantCalls: []string{
				call("apply", "DestinationRule", "reviews"),
				call("apply", "VirtualService", "reviews"),
			},
			wantOutcomes: []string{"REJECTED DestinationRule/reviews", "APPLIED VirtualService/reviews"},
			wantOwned:    []domain.ObjectKey{keyOf("VirtualService", "reviews")},
		},
		{
			name:  "a rejected apply does not delete the object it was meant to update",
			owned: []domain.ObjectKey{keyOf("DestinationRule", "reviews")},
			setup: func(f *fakeApplier) {
				f.applyErr[keyOf("DestinationRule", "reviews")] = errBoom
			},
			snap:         output(object("DestinationRule", "reviews")),
			wantCalls:    []string{call("apply", "DestinationRule", "reviews")},
			wantOutcomes: []string{"REJECTED DestinationRule/reviews"},
			wantOwned:    []domain.ObjectKey{keyOf("DestinationRule", "reviews")},
		},
		{
			name:  "a user's object of the same name is a conflict without an API call",
			setup: func(f *fakeApplier) { f.users[keyOf("DestinationRule", "ratings")] = true },
			snap:  output(object("DestinationRule", "ratings"), object("DestinationRule", "reviews")),
			wantCalls: []string{
				call("apply", "DestinationRule", "reviews"),
			},
			wantOutcomes: []string{"CONFLICT DestinationRule/ratings", "APPLIED DestinationRule/reviews"},
			wantOwned:    []domain.ObjectKey{keyOf("DestinationRule", "reviews")},
		},
		{
			name:  "a failed delete is reported as rejected",
			owned: []domain.ObjectKey{keyOf("DestinationRule", "old"), keyOf("VirtualService", "old")},
			setup: func(f *fakeApplier) { f.deleteErr[keyOf("VirtualService", "old")] = errBoom },
			snap:  output(),
			wantCalls: []string{
				call("delete", "VirtualService", "old"),
				call("delete", "DestinationRule", "old"),
			},
			wantOutcomes: []string{"REJECTED VirtualService/old", "DELETED DestinationRule/old"},
			wantOwned:    []domain.ObjectKey{keyOf("VirtualService", "old")},
		},
		{
			name:      "a message without a snapshot applies and deletes nothing",
			owned:     []domain.ObjectKey{keyOf("DestinationRule", "old")},
			snap:      nil,
			wantOwned: []domain.ObjectKey{keyOf("DestinationRule", "old")},
			wantNoAck: true,
		},
		{
			name:      "a snapshot without a version applies and deletes nothing",
			owned:     []domain.ObjectKey{keyOf("DestinationRule", "old")},
			snap:      &snapshotv1.OutputSnapshot{Cluster: "east"},
			wantOwned: []domain.ObjectKey{keyOf("DestinationRule", "old")},
			wantNoAck: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			applier := newFakeApplier(tt.owned...)
			if tt.setup != nil {
				tt.setup(applier)
			}
			relay := newFakeRelay()
			m := &recordingMetrics{}
			s := NewSyncer(relay, applier, m, testLogger(t))
			if err := s.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}

			ok := s.Apply(t.Context(), tt.snap)
			if ok != tt.wantOK {
				t.Errorf("Apply = %v, want %v", ok, tt.wantOK)
			}
			if got, want := inKindOrder(applier.callLog()), inKindOrder(tt.wantCalls); !slices.Equal(got, want) {
				t.Errorf("calls =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			wantOwned := map[domain.ObjectKey]bool{}
			for _, k := range tt.wantOwned {
				wantOwned[k] = true
			}
			if got := applier.ownedKeys(); !equalSets(got, wantOwned) {
				t.Errorf("owned after apply = %v, want %v", got, wantOwned)
			}
			applied := s.AppliedVersion() == tt.snap.GetVersion() && tt.snap.GetVersion() != ""
			if applied != tt.wantApplied {
				t.Errorf("AppliedVersion = %q, snapshot %q: applied = %v, want %v", s.AppliedVersion(), tt.snap.GetVersion(), applied, tt.wantApplied)
			}

			select {
			case a := <-relay.acks:
				if tt.wantNoAck {
					t.Fatalf("acknowledged %q for a message that is no snapshot", a.version)
				}
				if a.version != tt.snap.GetVersion() {
					t.Errorf("ack version = %q, want %q", a.version, tt.snap.GetVersion())
				}
				if got := outcomes(a.results); !slices.Equal(got, tt.wantOutcomes) {
					t.Errorf("ack results =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.wantOutcomes, "\n"))
				}
				for _, r := range a.results {
					failed := r.GetOutcome() == snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED || r.GetOutcome() == snapshotv1.ApplyOutcome_APPLY_OUTCOME_CONFLICT
					if failed != (r.GetError() != "") {
						t.Errorf("result %v: error %q does not match its outcome", r.GetRef(), r.GetError())
					}
				}
			default:
				if !tt.wantNoAck {
					t.Fatalf("Apply returned without acknowledging")
				}
			}
		})
	}
}

func equalSets[K comparable](a, b map[K]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func runSyncer(t *testing.T, s *Syncer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := receive(t, done, 5*time.Second, "Syncer.Run to return"); err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	}
}

func TestSyncerRunRelayDownDeletesNothing(t *testing.T) {
	defer goleak.VerifyNone(t)
	owned := []domain.ObjectKey{keyOf("DestinationRule", "reviews"), keyOf("VirtualService", "reviews")}
	applier := newFakeApplier(owned...)
	relay := newFakeRelay()
	relay.watchErr = errors.New("connection refused")
	s := NewSyncer(relay, applier, nil, testLogger(t))

	stop := runSyncer(t, s)
	// Two attempts show that it retried, not just gave up.
	waitFor(t, 5*time.Second, func() bool { return len(relay.watchCalls()) >= 2 }, "a second watch attempt")
	stop()

	if calls := applier.callLog(); len(calls) != 0 {
		t.Errorf("the applier was used while the relay was down: %v", calls)
	}
	if got := applier.ownedKeys(); len(got) != len(owned) {
		t.Errorf("owned = %v, want all of %v kept", got, owned)
	}
	if w := relay.watchCalls(); w[0] != "" {
		t.Errorf("first watch claimed version %q before applying anything", w[0])
	}
}

func TestSyncerRunAppliesReceivedSnapshots(t *testing.T) {
	defer goleak.VerifyNone(t)
	applier := newFakeApplier(keyOf("DestinationRule", "reviews"), keyOf("DestinationRule", "old"))
	relay := newFakeRelay()
	m := &recordingMetrics{}
	s := NewSyncer(relay, applier, m, testLogger(t))

	first := newFakeWatchStream()
	relay.watchStreams <- first
	stop := runSyncer(t, s)
	defer func() {
		if t.Failed() {
			stop()
		}
	}()

	// A message with no snapshot in it must not be taken for an empty
	// snapshot, which would delete everything owned.
	first.snaps <- nil
	first.snaps <- &snapshotv1.OutputSnapshot{Cluster: "east"}
	snap := output(object("DestinationRule", "reviews"))
	first.snaps <- snap

	a := receive(t, relay.acks, 5*time.Second, "the ack of the first snapshot")
	if a.version != snap.GetVersion() {
		t.Fatalf("acked %q, want %q (a message without a snapshot was acknowledged)", a.version, snap.GetVersion())
	}
	want := []string{"APPLIED DestinationRule/reviews", "DELETED DestinationRule/old"}
	if got := outcomes(a.results); !slices.Equal(got, want) {
		t.Errorf("results = %v, want %v", got, want)
	}
	if n := applier.count("delete"); n != 1 {
		t.Errorf("%d deletes, want exactly 1 (of the obsolete object): %v", n, applier.callLog())
	}
	if got := s.AppliedVersion(); got != snap.GetVersion() {
		t.Errorf("AppliedVersion = %q, want %q", got, snap.GetVersion())
	}

	// After a lost stream, the syncer watches again and says what it holds.
	second := newFakeWatchStream()
	relay.watchStreams <- second
	first.fail <- errors.New("stream reset")
	waitFor(t, 5*time.Second, func() bool { return len(relay.watchCalls()) == 2 }, "a new watch after the stream ended")
	if got := relay.watchCalls()[1]; got != snap.GetVersion() {
		t.Errorf("reconnect watched from %q, want the applied version %q", got, snap.GetVersion())
	}
	waitFor(t, 5*time.Second, first.isClosed, "the ended stream to be closed")

	next := output(object("DestinationRule", "reviews"), object("VirtualService", "reviews"))
	second.snaps <- next
	a = receive(t, relay.acks, 5*time.Second, "the ack of the second snapshot")
	want = []string{"APPLIED DestinationRule/reviews", "APPLIED VirtualService/reviews"}
	if a.version != next.GetVersion() || !slices.Equal(outcomes(a.results), want) {
		t.Errorf("ack = %s %v, want %s %v", a.version, outcomes(a.results), next.GetVersion(), want)
	}
	stop()
	if !second.isClosed() {
		t.Errorf("stream left open after Run returned")
	}
}

func TestSyncerRunRetriesAFailedApply(t *testing.T) {
	defer goleak.VerifyNone(t)
	applier := newFakeApplier()
	applier.setApplyErr(keyOf("DestinationRule", "reviews"), errors.New("webhook timeout"))
	relay := newFakeRelay()
	s := NewSyncer(relay, applier, nil, testLogger(t))

	stream := newFakeWatchStream()
	relay.watchStreams <- stream
	stop := runSyncer(t, s)
	defer stop()

	snap := output(object("DestinationRule", "reviews"))
	stream.snaps <- snap
	a := receive(t, relay.acks, 5*time.Second, "the ack of the failed apply")
	if got, want := outcomes(a.results), []string{"REJECTED DestinationRule/reviews"}; !slices.Equal(got, want) {
		t.Fatalf("results = %v, want %v", got, want)
	}
	if s.AppliedVersion() != "" {
		t.Errorf("AppliedVersion = %q after a failed apply, want none", s.AppliedVersion())
	}

	applier.setApplyErr(keyOf("DestinationRule", "reviews"), nil)
	a = receive(t, relay.acks, 5*time.Second, "the ack of the retried apply")
	if got, want := outcomes(a.results), []string{"APPLIED DestinationRule/reviews"}; a.version != snap.GetVersion() || !slices.Equal(got, want) {
		t.Errorf("retry ack = %s %v, want %s %v", a.version, got, snap.GetVersion(), want)
	}
	waitFor(t, 5*time.Second, func() bool { return s.AppliedVersion() == snap.GetVersion() }, "the retried version to count as applied")
}

// An acknowledgement lost with the plane's replica (the connection reset
// as it died) is sent again: the plane does not send again a version the
// agent says it holds, so the cluster would show as behind until the next
// version.
// TestSyncerRunSendsALostAckAgain runs in a synctest bubble, so that
// "nothing more is sent once the ack landed" is checked after a minute of
// the bubble's time has let every retry timer fire, and all goroutines
// are blocked (synctest.Wait), not after some real time that a slow
// machine may not fill.
func TestSyncerRunSendsALostAckAgain(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, testSyncerRunSendsALostAckAgain)
}

func testSyncerRunSendsALostAckAgain(t *testing.T) {
	applier := newFakeApplier()
	relay := newFakeRelay()
	relay.ackErr = errors.New("connection reset by peer")
	s := NewSyncer(relay, applier, nil, testLogger(t))

	first := newFakeWatchStream()
	relay.watchStreams <- first
	stop := runSyncer(t, s)
	defer stop()

	snap := output(object("DestinationRule", "reviews"))
	first.snaps <- snap
	if a := receive(t, relay.acks, 5*time.Second, "the ack that fails"); a.version != snap.GetVersion() {
		t.Fatalf("acked %q, want %q", a.version, snap.GetVersion())
	}
	// The replica is gone: the stream ends, and the next one is to a
	// plane that takes acknowledgements.
	relay.mu.Lock()
	relay.ackErr = nil
	relay.mu.Unlock()
	second := newFakeWatchStream()
	relay.watchStreams <- second
	first.fail <- errors.New("stream reset")
	a := receive(t, relay.acks, 5*time.Second, "the lost ack sent again")
	if a.version != snap.GetVersion() {
		t.Fatalf("sent again %q, want %q", a.version, snap.GetVersion())
	}
	if got, want := outcomes(a.results), []string{"APPLIED DestinationRule/reviews"}; !slices.Equal(got, want) {
		t.Errorf("results sent again = %v, want %v", got, want)
	}
	if n := applier.count("apply"); n != 1 {
		t.Errorf("%d applies, want 1: sending the ack again must not apply again", n)
	}
	// Once it landed, nothing more is sent.
	time.Sleep(time.Minute)
	synctest.Wait()
	select {
	case a := <-relay.acks:
		t.Errorf("acknowledged %s again after it landed", a.version)
	default:
	}
}

// inKindOrder sorts each run of calls of one verb and kind: the workers
// write the objects of a kind in any order, one kind after another.
func inKindOrder(calls []string) []string {
	calls = slices.Clone(calls)
	group := func(c string) string {
		f := strings.Fields(c)
		return strings.Join(f[:min(3, len(f))], " ")
	}
	for i := 0; i < len(calls); {
		j := i + 1
		for j < len(calls) && group(calls[j]) == group(calls[i]) {
			j++
		}
		slices.Sort(calls[i:j])
		i = j
	}
	return calls
}
