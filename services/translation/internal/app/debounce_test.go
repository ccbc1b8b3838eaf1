package app_test

import (
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/translation/internal/app"
)

// countingMetrics counts translations.
type countingMetrics struct {
	app.NopMetrics
	mu           sync.Mutex
	translations int
}

func (m *countingMetrics) ObserveTranslation(time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.translations++
}

func (m *countingMetrics) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.translations
}

const testDebounce = time.Second

// startDebounced runs a translator with a debounce of testDebounce in a
// synctest bubble, whose clock moves only when every goroutine in it is
// blocked: synctest.Wait returns with the clock where it was, so whatever
// happened by then happened without waiting.
func startDebounced(t *testing.T) (*app.Translator, *countingMetrics, *snapstore.Memory[*snapshotv1.OutputSnapshot]) {
	metrics := &countingMetrics{}
	outputs := snapstore.NewMemory(newOutput)
	tr := app.NewTranslator(app.Config{Debounce: testDebounce, RetryInterval: time.Hour},
		snapstore.NewMemory(newInput), outputs, metrics, slog.New(slog.NewTextHandler(t.Output(), nil)))
	run(t, tr)
	synctest.Wait()
	return tr, metrics, outputs
}

// checkPublished fails unless outputs holds in's output for east.
func checkPublished(t *testing.T, outputs *snapstore.Memory[*snapshotv1.OutputSnapshot], in *snapshotv1.InputSnapshot, when string) {
	t.Helper()
	out, ok := published(t, outputs, "east")
	if want := expected(t, in).GetVersion(); !ok || out.GetVersion() != want {
		t.Fatalf("%s: published east %s (%v), want %s", when, out.GetVersion(), ok, want)
	}
}

// A change that arrives when no translation ran within the debounce
// interval is translated at once, without waiting for the interval.
func TestIsolatedChangeTranslatesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr, metrics, outputs := startDebounced(t)
		for i, services := range [][]string{{"reviews"}, {"reviews", "ratings"}} {
			start := time.Now()
			in := input("east", services...)
			if err := tr.Submit("east", in); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if waited := time.Since(start); waited != 0 {
				t.Fatalf("change %d: the bubble's clock moved %v before the translation", i, waited)
			}
			if got := metrics.count(); got != i+1 {
				t.Fatalf("change %d: %d translations, want %d", i, got, i+1)
			}
			checkPublished(t, outputs, in, "isolated change")
			// The next change is isolated again once the interval has passed.
			time.Sleep(testDebounce)
		}
	})
}

// Changes that arrive within the interval after a translation are
// translated together, once, at its end: at most one translation per
// interval under a burst.
func TestBurstCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr, metrics, outputs := startDebounced(t)
		first := input("east", "a")
		if err := tr.Submit("east", first); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := metrics.count(); got != 1 {
			t.Fatalf("%d translations after the first change, want 1", got)
		}

		burst := [][]string{{"a", "b"}, {"a", "b", "c"}, {"a", "c"}, {"a", "c", "d"}}
		var last *snapshotv1.InputSnapshot
		for _, services := range burst {
			time.Sleep(testDebounce / 10)
			last = input("east", services...)
			if err := tr.Submit("east", last); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		if got := metrics.count(); got != 1 {
			t.Fatalf("%d translations during the interval after the first, want 1", got)
		}
		checkPublished(t, outputs, first, "within the interval")

		time.Sleep(testDebounce) // past the interval's end
		synctest.Wait()
		if got := metrics.count(); got != 2 {
			t.Fatalf("%d translations after the interval, want 2 (the burst as one)", got)
		}
		checkPublished(t, outputs, last, "after the interval")

		time.Sleep(5 * testDebounce)
		synctest.Wait()
		if got := metrics.count(); got != 2 {
			t.Fatalf("%d translations with no change, want 2", got)
		}
	})
}
