package app_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
)

// lateStore is a shared store that loses everything while the restorer is
// not subscribed: its first Subscribe fails (Redis down), and the store
// comes back empty. The subscription that follows reports no resync, as
// a first subscription does not.
type lateStore struct {
	*countingStore
	mu    sync.Mutex
	calls int
}

func (s *lateStore) Subscribe(ctx context.Context) (<-chan snapshots.Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls == 1 {
		return nil, errors.New("redis down")
	}
	ch := make(chan snapshots.Change)
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch, nil
}

// TestRestorerRestoresAfterAMissedLoss: a loss that happened before the
// restorer could subscribe is restored by its first subscription (the CI
// failure of TestRedisRestartRestoresConnectedClusters: Redis was killed
// and restarted while the restorer's first subscription was under way).
func TestRestorerRestoresAfterAMissedLoss(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	in := app.NewIngestor(newCountingStore(), &recordingNotifier{}, nil, slog.New(slog.DiscardHandler), "r")
	defer in.Connect("east")()
	east := sealed("east", []string{"a"}, nil)
	if _, err := in.Push(ctx, "east", east); err != nil {
		t.Fatal(err)
	}
	shared := &lateStore{countingStore: newCountingStore()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		app.NewRestorer(in, shared, time.Millisecond, slog.New(slog.DiscardHandler)).Run(ctx)
	}()
	platformtest.Eventually(t, 10*time.Second, "east restored to the shared store", func() bool {
		v, err := shared.Version(ctx, "east")
		return err == nil && v == east.GetVersion()
	})
	cancel()
	<-done
}
