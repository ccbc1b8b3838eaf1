package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/meshplane/meshplane/libs/snapshots"
)

// ResyncingStore is the shared store (Redis) as Restorer needs it: written
// to directly, and followed, with every (re)subscription delivered as a
// Resync change.
type ResyncingStore interface {
	SharedStore
	Subscribe(ctx context.Context) (<-chan snapshots.Change, error)
}

// Restorer follows the shared store and, on every resync (it came back,
// perhaps empty), writes back the snapshots of the clusters connected to
// this replica that it lost. Without it an agent whose content did not
// change would never be stored again: its pushes match the copy kept in
// memory.
type Restorer struct {
	ingestor *Ingestor
	shared   ResyncingStore
	retry    time.Duration
	log      *slog.Logger
}

// NewRestorer restores ingestor's clusters to shared; retry is how long it
// waits before subscribing again after a failure.
func NewRestorer(ingestor *Ingestor, shared ResyncingStore, retry time.Duration, log *slog.Logger) *Restorer {
	return &Restorer{ingestor: ingestor, shared: shared, retry: retry, log: log}
}

// Run follows the shared store until ctx ends. Each subscription that
// succeeds starts with a restore too: the store may have been lost while
// this replica was not subscribed (before the first subscription, or
// between a failed one and the next), and a subscription reports only the
// losses that happen after it.
func (r *Restorer) Run(ctx context.Context) {
	for ctx.Err() == nil {
		changes, err := r.shared.Subscribe(ctx)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(r.retry):
			}
			continue
		}
		r.restore(ctx)
		for c := range changes {
			if c.Resync {
				r.restore(ctx)
			}
		}
	}
}

// restore writes back what the shared store lost, once.
func (r *Restorer) restore(ctx context.Context) {
	restored, err := r.ingestor.Restore(ctx, r.shared)
	if err != nil && ctx.Err() == nil {
		r.log.Warn("restoring input snapshots to Redis failed; will retry on the next resync", "error", err)
	}
	if len(restored) > 0 {
		r.log.Info("restored input snapshots to Redis", "clusters", restored)
	}
}
