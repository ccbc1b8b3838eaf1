package app_test

import (
	"context"
	"errors"
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

// expectedList is the clusters registered in the management cluster, as
// the test sets them.
type expectedList struct {
	mu    sync.Mutex
	names []string
	err   error
}

func (e *expectedList) set(err error, names ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.names, e.err = names, err
}

func (e *expectedList) ExpectedClusters(context.Context) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.names), e.err
}

const expectedWindow = time.Minute

// startExpected runs a translator over an empty output store (as after
// Redis restarted empty) with the expected clusters from exp, in a
// synctest bubble: its clock is the bubble's.
func startExpected(t *testing.T, inputs app.InputSource, exp app.ExpectedClusters, window time.Duration) (*app.Translator, *snapstore.Memory[*snapshotv1.OutputSnapshot]) {
	outputs := snapstore.NewMemory(newOutput)
	tr := app.NewTranslator(app.Config{
		Debounce: 5 * time.Millisecond, RetryInterval: 100 * time.Millisecond,
		SafeStartWindow: window, Expected: exp, ExpectedRefresh: time.Second,
	}, inputs, outputs, nil, slog.New(slog.NewTextHandler(t.Output(), nil)))
	run(t, tr)
	synctest.Wait()
	return tr, outputs
}

func published(t *testing.T, outputs *snapstore.Memory[*snapshotv1.OutputSnapshot], cluster string) (*snapshotv1.OutputSnapshot, bool) {
	t.Helper()
	e, err := outputs.Get(t.Context(), cluster)
	if errors.Is(err, snapshots.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return e.Value, true
}

// After Redis restarted empty, the output store names nobody, but the
// management cluster still names east and west: nothing is published
// while east is missing. When the window passes, west's output is
// published marked as built without east, and east stays missing until it
// reports; then every output is complete.
//
// These tests run in a synctest bubble: time.Sleep moves the bubble's fake
// clock past the window at once (no real time passes), and synctest.Wait
// returns when every goroutine of the translator is blocked, so the checks
// after it see the state after that time, on any machine.
func TestSafeModeWaitsForExpectedClusters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inputs := snapstore.NewMemory(newInput)
		west := input("west", "details")
		if err := inputs.Put(t.Context(), "west", west.GetVersion(), west); err != nil {
			t.Fatal(err)
		}
		exp := &expectedList{names: []string{"east", "west"}}
		tr, outputs := startExpected(t, inputs, exp, expectedWindow)

		time.Sleep(expectedWindow - time.Second)
		synctest.Wait()
		if on, waiting := tr.SafeMode(); !on || !slices.Equal(waiting, []string{"east"}) {
			t.Fatalf("SafeMode() = %v, %v; want on, waiting for east", on, waiting)
		}
		if _, ok := published(t, outputs, "west"); ok {
			t.Fatal("west was published while the expected cluster east had not reported")
		}
		if got := tr.MissingClusters(); !slices.Equal(got, []string{"east"}) {
			t.Fatalf("MissingClusters() = %v, want [east]", got)
		}

		time.Sleep(2 * time.Second)
		synctest.Wait()
		if on, _ := tr.SafeMode(); on {
			t.Fatal("safe mode still on after its window")
		}
		out, ok := published(t, outputs, "west")
		if !ok || !slices.Equal(out.GetMissingClusters(), []string{"east"}) {
			t.Fatalf("west after the window: published %v, missing %v; want published, missing [east]", ok, out.GetMissingClusters())
		}
		if out.GetVersion() != snapshots.OutputVersion(out) {
			t.Fatal("the marked output is not sealed with its own version")
		}

		east := input("east", "reviews")
		if err := tr.Submit("east", east); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		for _, c := range []string{"east", "west"} {
			out, ok := published(t, outputs, c)
			if !ok || len(out.GetMissingClusters()) != 0 {
				t.Fatalf("%s after east reported: published %v, missing %v; want a complete output", c, ok, out.GetMissingClusters())
			}
		}
		if got := tr.MissingClusters(); len(got) != 0 {
			t.Fatalf("MissingClusters() = %v after every cluster reported", got)
		}
	})
}

// A cluster registered after the start makes outputs incomplete until it
// reports; one deregistered is no longer waited for.
func TestExpectedClustersFollowRegistrations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inputs := snapstore.NewMemory(newInput)
		west := input("west", "details")
		if err := inputs.Put(t.Context(), "west", west.GetVersion(), west); err != nil {
			t.Fatal(err)
		}
		exp := &expectedList{names: []string{"west"}}
		tr, outputs := startExpected(t, inputs, exp, expectedWindow)
		time.Sleep(time.Second)
		synctest.Wait()
		if on, _ := tr.SafeMode(); on {
			t.Fatal("safe mode on although every expected cluster reported")
		}
		if out, ok := published(t, outputs, "west"); !ok || len(out.GetMissingClusters()) != 0 {
			t.Fatalf("west: published %v, missing %v; want a complete output at once", ok, out.GetMissingClusters())
		}

		exp.set(nil, "north", "west")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if out, _ := published(t, outputs, "west"); !slices.Equal(out.GetMissingClusters(), []string{"north"}) {
			t.Fatalf("west after north registered: missing %v, want [north]", out.GetMissingClusters())
		}

		exp.set(nil, "west")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if out, _ := published(t, outputs, "west"); len(out.GetMissingClusters()) != 0 {
			t.Fatalf("west after north was deregistered: missing %v, want none", out.GetMissingClusters())
		}
	})
}

// While the management cluster cannot be read, safe mode cannot know whom
// to wait for: it holds publishing until it can, or until the window.
func TestSafeModeExpectedSourceDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inputs := snapstore.NewMemory(newInput)
		west := input("west", "details")
		if err := inputs.Put(t.Context(), "west", west.GetVersion(), west); err != nil {
			t.Fatal(err)
		}
		exp := &expectedList{err: errors.New("management cluster unreachable")}
		tr, outputs := startExpected(t, inputs, exp, expectedWindow)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if on, _ := tr.SafeMode(); !on {
			t.Fatal("safe mode ended while the expected clusters could not be read")
		}
		if _, ok := published(t, outputs, "west"); ok {
			t.Fatal("published while the expected clusters could not be read")
		}
		exp.set(nil, "west")
		time.Sleep(time.Second)
		synctest.Wait()
		if out, ok := published(t, outputs, "west"); !ok || len(out.GetMissingClusters()) != 0 {
			t.Fatalf("west once the source answered: published %v, missing %v", ok, out.GetMissingClusters())
		}
	})
}

// A store loss while the plane runs, with an expected cluster whose input
// translation never held, enters safe mode again.
func TestSafeModeAfterStoreLossWithExpected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		source := &resyncSource{Memory: snapstore.NewMemory(newInput), changes: make(chan snapshots.Change)}
		west := input("west", "details")
		if err := source.Put(t.Context(), "west", west.GetVersion(), west); err != nil {
			t.Fatal(err)
		}
		exp := &expectedList{names: []string{"west"}}
		tr, outputs := startExpected(t, source, exp, expectedWindow)
		time.Sleep(time.Second)
		synctest.Wait()
		if _, ok := published(t, outputs, "west"); !ok {
			t.Fatal("west not published")
		}
		exp.set(nil, "east", "west")
		source.changes <- snapshots.Change{Resync: true} // the store restarted empty
		synctest.Wait()
		if on, waiting := tr.SafeMode(); !on || !slices.Equal(waiting, []string{"east"}) {
			t.Fatalf("after the store loss: SafeMode() = %v, %v; want on, waiting for east", on, waiting)
		}
	})
}

// The management cluster's own resources reach translation as one more
// input, which Redis loses with the rest. With ExpectedManagement it is
// expected beside the registered clusters: after a restart with Redis
// flushed, east and west reporting do not end safe mode, because outputs
// built without the management cluster's VirtualMeshes, ScopeGrants and
// policies would delete what they made. When its window passes first, the
// outputs say they lack it, so agents hold their deletions.
func TestSafeModeWaitsForTheManagementCluster(t *testing.T) {
	for _, reports := range []bool{true, false} {
		name := map[bool]string{true: "management reports", false: "window passes"}[reports]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				inputs := snapstore.NewMemory(newInput)
				exp := &expectedList{names: []string{"east", "west"}}
				outputs := snapstore.NewMemory(newOutput)
				tr := app.NewTranslator(app.Config{
					Debounce: 5 * time.Millisecond, RetryInterval: 100 * time.Millisecond,
					SafeStartWindow: expectedWindow, Expected: exp, ExpectedRefresh: time.Second,
					ExpectedManagement: "meshplane",
				}, inputs, outputs, nil, slog.New(slog.NewTextHandler(t.Output(), nil)))
				run(t, tr)
				synctest.Wait()
				for _, c := range []string{"east", "west"} {
					if err := tr.Submit(c, input(c, "reviews")); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(time.Second)
				synctest.Wait()
				if on, waiting := tr.SafeMode(); !on || !slices.Equal(waiting, []string{"meshplane"}) {
					t.Fatalf("SafeMode() = %v, %v; want on, waiting for the management cluster", on, waiting)
				}
				if _, ok := published(t, outputs, "east"); ok {
					t.Fatal("east was published before the management cluster's input was read")
				}
				if got := tr.MissingClusters(); !slices.Equal(got, []string{"meshplane"}) {
					t.Fatalf("MissingClusters() = %v, want [meshplane]", got)
				}

				if reports {
					if err := tr.Submit("meshplane", input("meshplane")); err != nil {
						t.Fatal(err)
					}
				} else {
					time.Sleep(expectedWindow)
				}
				time.Sleep(time.Second)
				synctest.Wait()
				if on, _ := tr.SafeMode(); on {
					t.Fatal("safe mode still on")
				}
				want := []string{"meshplane"}
				if reports {
					want = nil
				}
				for _, c := range []string{"east", "west"} {
					out, ok := published(t, outputs, c)
					if !ok || !slices.Equal(out.GetMissingClusters(), want) {
						t.Fatalf("%s: published %v, missing %v; want published, missing %v", c, ok, out.GetMissingClusters(), want)
					}
				}
			})
		})
	}
}
