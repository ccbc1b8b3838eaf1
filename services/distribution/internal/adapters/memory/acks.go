// Package memory keeps acknowledgements in process memory.
package memory

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/distribution/internal/app"
)

// Acks is an app.AckStore in memory: the acks in a snapshots.AckStore that
// translation in the same process may read too, and the watch marks.
type Acks struct {
	acks     snapshots.AckStore
	mu       sync.RWMutex
	watching map[[2]string]time.Time // cluster, replica
	// sent holds the versions last sent to each cluster, newest first.
	sent map[string][]app.SentVersion
}

var _ app.AckStore = (*Acks)(nil)

// NewAcks returns a store keeping acks in acks, or in a new memory store
// when acks is nil.
func NewAcks(acks snapshots.AckStore) *Acks {
	if acks == nil {
		acks = snapstore.NewMemoryAcks()
	}
	return &Acks{acks: acks, watching: map[[2]string]time.Time{}, sent: map[string][]app.SentVersion{}}
}

func (a *Acks) MarkWatching(_ context.Context, cluster, replica string, until time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if until.IsZero() {
		delete(a.watching, [2]string{cluster, replica})
	} else {
		a.watching[[2]string{cluster, replica}] = until
	}
	return nil
}

func (a *Acks) Watched(_ context.Context, now time.Time) (map[string]bool, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := map[string]bool{}
	for k, until := range a.watching {
		if until.After(now) {
			out[k[0]] = true
		}
	}
	return out, nil
}

func (a *Acks) PutAck(ctx context.Context, rec app.AckRecord) error { return a.acks.PutAck(ctx, rec) }

func (a *Acks) ListAcks(ctx context.Context) ([]app.AckRecord, error) { return a.acks.ListAcks(ctx) }

func (a *Acks) RecordSent(_ context.Context, cluster string, v app.SentVersion) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	kept := slices.DeleteFunc(slices.Clone(a.sent[cluster]), func(s app.SentVersion) bool { return s.Version == v.Version })
	kept = slices.Insert(kept, 0, v)
	a.sent[cluster] = kept[:min(len(kept), app.KeepSent)]
	return nil
}

func (a *Acks) SentVersions(_ context.Context, cluster string) ([]app.SentVersion, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.Clone(a.sent[cluster]), nil
}
