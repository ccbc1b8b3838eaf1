package app

import (
	"slices"
	"testing"

	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
)

// TestSyncerDrift drives observe with the view's changes: the echo of the
// agent's own write, someone's edit, a deletion, and a user taking an
// object over by removing its labels.
func TestSyncerDrift(t *testing.T) {
	applier := newFakeApplier()
	m := &recordingMetrics{}
	s := NewSyncer(newFakeRelay(), applier, m, testLogger(t))
	if err := s.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !s.Apply(t.Context(), output(object("DestinationRule", "a"), object("DestinationRule", "b"), object("VirtualService", "c"))) {
		t.Fatal("apply failed")
	}
	live := func(kind, name string) domain.LiveObject {
		l, ok := applier.Get(keyOf(kind, name))
		if !ok {
			t.Fatalf("%s/%s not in the fake cluster", kind, name)
		}
		return l
	}
	writes := func() int { return applier.count("apply ") }
	before := writes()

	// The echo of the agent's own write: nothing to do.
	applier.change(ObjectChange{Object: live("DestinationRule", "a")})
	if !s.observe(t.Context()) || writes() != before || len(m.drift) != 0 {
		t.Fatalf("the echo of an own write was taken for drift: %d writes, drift %v", writes()-before, m.drift)
	}

	// Someone changes a's spec (its generation moves on), deletes b, and
	// removes c's digest annotation.
	a := live("DestinationRule", "a")
	a.Generation++
	a.SpecWriter = "kubectl-edit (Update)"
	applier.change(ObjectChange{Object: a})
	applier.change(ObjectChange{Object: live("DestinationRule", "b"), Gone: true})
	c := live("VirtualService", "c")
	c.Annotations = map[string]string{}
	applier.change(ObjectChange{Object: c})
	if !s.observe(t.Context()) {
		t.Fatal("putting back failed")
	}
	calls := applier.callLog()[before:]
	want := []string{call("apply", "DestinationRule", "a"), call("apply", "DestinationRule", "b"), call("apply", "VirtualService", "c")}
	slices.Sort(calls)
	if !slices.Equal(calls, want) {
		t.Fatalf("writes %v, want %v", calls, want)
	}
	if got := slices.Sorted(slices.Values(m.drift)); !slices.Equal(got, []string{"DestinationRule", "DestinationRule", "VirtualService"}) {
		t.Fatalf("drift counted %v", got)
	}
	if live("VirtualService", "c").Annotations[snapshots.AnnotationDigest] == "" {
		t.Fatal("c's digest annotation was not put back")
	}

	// A user removes a's labels: the object is theirs, and is not written.
	before = writes()
	applier.mu.Lock()
	applier.users[keyOf("DestinationRule", "a")] = true
	a = applier.owned[keyOf("DestinationRule", "a")]
	applier.mu.Unlock()
	a.Owned = false
	applier.change(ObjectChange{Object: a})
	s.observe(t.Context())
	if got := applier.callLog()[before:]; len(got) != 0 {
		t.Fatalf("a user's object was written: %v", got)
	}
	if len(m.drift) != 3 {
		t.Fatalf("drift counted %v after a user took an object over", m.drift)
	}
}
