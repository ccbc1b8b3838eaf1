package app_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/translation/internal/app"
)

// countingSource counts the inputs read (and so decoded) one at a time,
// and holds each read until the test opens its gate when one is set.
type countingSource struct {
	*snapstore.Memory[*snapshotv1.InputSnapshot]
	mu   sync.Mutex
	gets int
	gate chan struct{}
}

func (s *countingSource) Get(ctx context.Context, cluster string) (snapshots.Entry[*snapshotv1.InputSnapshot], error) {
	s.read()
	return s.Memory.Get(ctx, cluster)
}

func (s *countingSource) GetEncoded(ctx context.Context, cluster string) (snapshots.Encoded[*snapshotv1.InputSnapshot], error) {
	s.read()
	return s.Memory.GetEncoded(ctx, cluster)
}

// read counts a read and waits for the gate, when one is set.
func (s *countingSource) read() {
	s.mu.Lock()
	s.gets++
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
}

func (s *countingSource) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

func (s *countingSource) hold() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = make(chan struct{})
	return s.gate
}

// startClaims runs a translator over source in a synctest bubble.
func startClaims(t *testing.T, source app.InputSource) (*app.Translator, *countingMetrics, *snapstore.Memory[*snapshotv1.OutputSnapshot]) {
	metrics := &countingMetrics{}
	outputs := snapstore.NewMemory(newOutput)
	tr := app.NewTranslator(app.Config{RetryInterval: time.Hour}, source, outputs, metrics, slog.New(slog.NewTextHandler(t.Output(), nil)))
	run(t, tr)
	synctest.Wait()
	return tr, metrics, outputs
}

// Ingest stores an input, which the store announces, and then notifies
// translation with the same bytes. Whichever path claims the version first
// decodes it; the other waits and does not decode it again, unless the
// first failed.
func TestOneDecodePerInputVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		source := &countingSource{Memory: snapstore.NewMemory(newInput)}
		tr, metrics, outputs := startClaims(t, source)

		// The notice is decoding v1 when the store announces it: the store
		// path waits, and does not read it.
		v1 := input("east", "reviews")
		claim, err := tr.ClaimInput(t.Context(), "east", v1.GetVersion())
		if err != nil || claim == nil {
			t.Fatalf("ClaimInput of a new version = %v, %v; want a claim", claim, err)
		}
		if err := source.Put(t.Context(), "east", v1.GetVersion(), v1); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := claim.Submit(v1); err != nil {
			t.Fatal(err)
		}
		claim.Abandon() // after Submit: nothing
		synctest.Wait()
		if got := source.count(); got != 0 {
			t.Fatalf("the store path read v1 %d times while the notice decoded it", got)
		}
		checkPublished(t, outputs, v1, "v1 by the notice")
		if got := metrics.count(); got != 1 {
			t.Fatalf("%d translations after v1, want 1", got)
		}

		// The notice's decoding of v2 fails: the store path reads it.
		v2 := input("east", "reviews", "ratings")
		claim, err = tr.ClaimInput(t.Context(), "east", v2.GetVersion())
		if err != nil || claim == nil {
			t.Fatalf("ClaimInput of v2 = %v, %v; want a claim", claim, err)
		}
		if err := source.Put(t.Context(), "east", v2.GetVersion(), v2); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := source.count(); got != 0 {
			t.Fatalf("the store path read v2 %d times while the notice decoded it", got)
		}
		claim.Abandon()
		synctest.Wait()
		if got := source.count(); got != 1 {
			t.Fatalf("the store path read v2 %d times after the notice failed, want 1", got)
		}
		checkPublished(t, outputs, v2, "v2 from the store")

		// The store path is reading v3 when the notice arrives: the notice
		// waits, and has nothing to decode once the store path submitted.
		gate := source.hold()
		v3 := input("east", "ratings")
		if err := source.Put(t.Context(), "east", v3.GetVersion(), v3); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := source.count(); got != 2 {
			t.Fatalf("the store path read v3 %d times, want 1", got-1)
		}
		notice := make(chan *app.InputClaim, 1)
		go func() {
			c, err := tr.ClaimInput(t.Context(), "east", v3.GetVersion())
			if err != nil {
				t.Errorf("ClaimInput of v3: %v", err)
			}
			notice <- c
		}()
		// A notice whose caller gives up while waiting says so.
		gone, cancel := context.WithCancel(t.Context())
		cancel()
		if c, err := tr.ClaimInput(gone, "east", v3.GetVersion()); !errors.Is(err, context.Canceled) || c != nil {
			t.Fatalf("ClaimInput with an ended context = %v, %v; want context.Canceled", c, err)
		}
		synctest.Wait()
		select {
		case c := <-notice:
			t.Fatalf("the notice did not wait for the store path's decoding (claim %v)", c)
		default:
		}
		close(gate)
		synctest.Wait()
		if c := <-notice; c != nil {
			t.Fatal("the notice was given v3 to decode after the store path submitted it")
		}
		if got := source.count(); got != 2 {
			t.Fatalf("v3 read %d times, want 1", got-1)
		}
		checkPublished(t, outputs, v3, "v3 from the store")

		// A held version is not claimed; an empty one always is.
		if c, err := tr.ClaimInput(t.Context(), "east", v3.GetVersion()); c != nil || err != nil {
			t.Fatalf("ClaimInput of the held version = %v, %v; want nil, nil", c, err)
		}
		if c, err := tr.ClaimInput(t.Context(), "east", ""); c == nil || err != nil {
			t.Fatalf("ClaimInput without a version = %v, %v; want a claim", c, err)
		}
	})
}
