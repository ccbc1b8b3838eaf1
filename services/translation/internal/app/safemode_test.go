package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/translation/internal/app"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// safeMetrics records what safe mode reports.
type safeMetrics struct {
	app.NopMetrics
	mu      sync.Mutex
	on      bool
	waiting int
}

func (m *safeMetrics) SetSafeMode(on bool, waiting int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.on, m.waiting = on, waiting
}

func (m *safeMetrics) get() (bool, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.on, m.waiting
}

const window = time.Hour

func newSafeTranslator(t *testing.T, source app.InputSource, publish app.OutputPublisher, clock *fakeClock, m app.Metrics) *app.Translator {
	return app.NewTranslator(app.Config{
		Debounce: 5 * time.Millisecond, RetryInterval: 10 * time.Millisecond,
		SafeStartWindow: window, Now: clock.Now,
	}, source, publish, m, slog.New(slog.NewTextHandler(t.Output(), nil)))
}

// seed stores an output published before the restart.
func seed(t *testing.T, outputs *snapstore.Memory[*snapshotv1.OutputSnapshot], cluster string) string {
	t.Helper()
	out := expected(t, input(cluster, "old"))
	if err := outputs.Put(t.Context(), cluster, out.GetVersion(), out); err != nil {
		t.Fatal(err)
	}
	return out.GetVersion()
}

// waitTranslated waits until tr holds the output of in, published or not.
func waitTranslated(t *testing.T, tr *app.Translator, in *snapshotv1.InputSnapshot) {
	t.Helper()
	want := expected(t, in).GetVersion()
	waitUntil(t, in.GetCluster()+" to be translated", func() bool {
		o, ok := tr.Output(in.GetCluster())
		return ok && o.GetVersion() == want
	})
}

// stays checks that store keeps version for cluster over ten retry
// intervals of the bubble's time. The safe-mode tests run in synctest
// bubbles: after each interval every goroutine has done what it would do
// (synctest.Wait) before the output is checked, so a slow machine cannot
// make the check pass by not getting round to publishing.
func stays(t *testing.T, store interface {
	Version(context.Context, string) (string, error)
}, cluster, version string) {
	t.Helper()
	for range 10 {
		synctest.Wait()
		if got, _ := store.Version(t.Context(), cluster); got != version {
			t.Fatalf("output of %s is %q, want it held at %q", cluster, got, version)
		}
		time.Sleep(10 * time.Millisecond)
	}
	synctest.Wait()
	if got, _ := store.Version(t.Context(), cluster); got != version {
		t.Fatalf("output of %s is %q, want it held at %q", cluster, got, version)
	}
}

func checkSafeMode(t *testing.T, tr *app.Translator, m *safeMetrics, wantOn bool, wantWaiting ...string) {
	t.Helper()
	on, waiting := tr.SafeMode()
	if on != wantOn || !slices.Equal(waiting, wantWaiting) {
		t.Fatalf("SafeMode() = %v, %v; want %v, %v", on, waiting, wantOn, wantWaiting)
	}
	waitUntil(t, fmt.Sprintf("metrics to say safe mode %v waiting %d", wantOn, len(wantWaiting)), func() bool {
		gotOn, gotWaiting := m.get()
		return gotOn == wantOn && gotWaiting == len(wantWaiting)
	})
}

// After a restart, nothing is published until every cluster with a
// published output has reported an input.
func TestSafeModeWaitsForKnownClusters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inputs, outputs := snapstore.NewMemory(newInput), snapstore.NewMemory(newOutput)
		oldEast, oldWest := seed(t, outputs, "east"), seed(t, outputs, "west")
		clock, m := &fakeClock{now: time.Unix(1e9, 0)}, &safeMetrics{}
		tr := newSafeTranslator(t, inputs, outputs, clock, m)
		run(t, tr)

		east := input("east", "reviews")
		if err := tr.Submit("east", east); err != nil {
			t.Fatal(err)
		}
		waitTranslated(t, tr, east)
		stays(t, outputs, "east", oldEast)
		stays(t, outputs, "west", oldWest)
		checkSafeMode(t, tr, m, true, "west")

		west := input("west", "details")
		if err := tr.Submit("west", west); err != nil {
			t.Fatal(err)
		}
		waitVersion(t, outputs, "east", expected(t, east).GetVersion())
		waitVersion(t, outputs, "west", expected(t, west).GetVersion())
		checkSafeMode(t, tr, m, false)
	})
}

// Inputs already in the store at start count as reported.
func TestSafeModeStoredInputsReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inputs, outputs := snapstore.NewMemory(newInput), snapstore.NewMemory(newOutput)
		seed(t, outputs, "east")
		east := input("east", "reviews")
		if err := inputs.Put(t.Context(), "east", east.GetVersion(), east); err != nil {
			t.Fatal(err)
		}
		clock, m := &fakeClock{now: time.Unix(1e9, 0)}, &safeMetrics{}
		tr := newSafeTranslator(t, inputs, outputs, clock, m)
		run(t, tr)
		waitVersion(t, outputs, "east", expected(t, east).GetVersion())
		checkSafeMode(t, tr, m, false)
	})
}

// When the window passes, the clusters that reported are published. A
// cluster that did not report gets no output: what it has stays.
func TestSafeModeWindowPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inputs, outputs := snapstore.NewMemory(newInput), snapstore.NewMemory(newOutput)
		oldEast, oldWest := seed(t, outputs, "east"), seed(t, outputs, "west")
		clock, m := &fakeClock{now: time.Unix(1e9, 0)}, &safeMetrics{}
		tr := newSafeTranslator(t, inputs, outputs, clock, m)
		run(t, tr)

		east := input("east", "reviews")
		if err := tr.Submit("east", east); err != nil {
			t.Fatal(err)
		}
		waitTranslated(t, tr, east)
		clock.Advance(window - time.Second)
		stays(t, outputs, "east", oldEast)
		checkSafeMode(t, tr, m, true, "west")

		clock.Advance(time.Second)
		waitVersion(t, outputs, "east", expected(t, east).GetVersion())
		checkSafeMode(t, tr, m, false)
		stays(t, outputs, "west", oldWest)
		if _, ok := tr.Output("west"); ok {
			t.Fatal("an output was made for a cluster without an input")
		}
	})
}

// With no output published before the start, there is nobody to wait for:
// the clusters that report are published at once.
func TestSafeModeNothingKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inputs, outputs := snapstore.NewMemory(newInput), snapstore.NewMemory(newOutput)
		clock, m := &fakeClock{now: time.Unix(1e9, 0)}, &safeMetrics{}
		tr := newSafeTranslator(t, inputs, outputs, clock, m)
		run(t, tr)
		east := input("east", "reviews")
		if err := tr.Submit("east", east); err != nil {
			t.Fatal(err)
		}
		waitVersion(t, outputs, "east", expected(t, east).GetVersion())
		checkSafeMode(t, tr, m, false)
	})
}

// failingLister is an output store whose List fails until told otherwise.
type failingLister struct {
	*snapstore.Memory[*snapshotv1.OutputSnapshot]
	mu   sync.Mutex
	down bool
}

func (f *failingLister) List(ctx context.Context) ([]snapshots.Entry[*snapshotv1.OutputSnapshot], error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return nil, errDown
	}
	return f.Memory.List(ctx)
}

// While the registered clusters cannot be listed, nothing is published;
// once they can, safe mode waits for them.
func TestSafeModeUnlistedClusters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		outputs := &failingLister{Memory: snapstore.NewMemory(newOutput), down: true}
		oldWest := seed(t, outputs.Memory, "west")
		clock, m := &fakeClock{now: time.Unix(1e9, 0)}, &safeMetrics{}
		tr := newSafeTranslator(t, snapstore.NewMemory(newInput), outputs, clock, m)
		run(t, tr)
		east := input("east", "reviews")
		if err := tr.Submit("east", east); err != nil {
			t.Fatal(err)
		}
		waitTranslated(t, tr, east)
		stays(t, outputs, "east", "")
		checkSafeMode(t, tr, m, true)

		outputs.mu.Lock()
		outputs.down = false
		outputs.mu.Unlock()
		waitUntil(t, "safe mode to wait for west", func() bool {
			_, waiting := tr.SafeMode()
			return slices.Equal(waiting, []string{"west"})
		})
		stays(t, outputs, "east", "")
		stays(t, outputs, "west", oldWest)
		west := input("west", "details")
		if err := tr.Submit("west", west); err != nil {
			t.Fatal(err)
		}
		waitVersion(t, outputs, "east", expected(t, east).GetVersion())
		waitVersion(t, outputs, "west", expected(t, west).GetVersion())
	})
}

// After a store loss, a cluster with a published output but no input held
// in memory holds publishing back again.
func TestSafeModeAfterStoreLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		source := &resyncSource{Memory: snapstore.NewMemory(newInput), changes: make(chan snapshots.Change)}
		outputs := snapstore.NewMemory(newOutput)
		clock, m := &fakeClock{now: time.Unix(1e9, 0)}, &safeMetrics{}
		tr := newSafeTranslator(t, source, outputs, clock, m)
		run(t, tr)

		east := input("east", "reviews")
		if err := tr.Submit("east", east); err != nil {
			t.Fatal(err)
		}
		waitVersion(t, outputs, "east", expected(t, east).GetVersion())
		checkSafeMode(t, tr, m, false)

		// Another replica published west, whose input this one never got, and
		// the input store comes back empty.
		oldWest := seed(t, outputs, "west")
		select {
		case source.changes <- snapshots.Change{Resync: true}:
		case <-time.After(10 * time.Second):
			t.Fatal("translator is not reading changes")
		}
		waitUntil(t, "safe mode after the store loss", func() bool {
			on, _ := tr.SafeMode()
			return on
		})
		checkSafeMode(t, tr, m, true, "west")
		east2 := input("east", "reviews", "ratings")
		if err := tr.Submit("east", east2); err != nil {
			t.Fatal(err)
		}
		waitTranslated(t, tr, east2)
		stays(t, outputs, "east", expected(t, east).GetVersion())
		stays(t, outputs, "west", oldWest)

		clock.Advance(window)
		waitVersion(t, outputs, "east", expected(t, east2).GetVersion())
		stays(t, outputs, "west", oldWest)
		checkSafeMode(t, tr, m, false)
	})
}
