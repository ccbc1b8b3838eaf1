// Package memory keeps acknowledgements in process memory.
package memory

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshplane/meshplane/services/distribution/internal/app"
)

// Acks is an app.AckStore in memory.
type Acks struct {
	mu       sync.RWMutex
	acks     map[string]app.AckRecord
	watching map[[2]string]time.Time // cluster, replica
}

var _ app.AckStore = (*Acks)(nil)

// NewAcks returns an empty store.
func NewAcks() *Acks {
	return &Acks{acks: map[string]app.AckRecord{}, watching: map[[2]string]time.Time{}}
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

func (a *Acks) PutAck(_ context.Context, rec app.AckRecord) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acks[rec.Cluster] = rec
	return nil
}

func (a *Acks) ListAcks(context.Context) ([]app.AckRecord, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make([]app.AckRecord, 0, len(a.acks))
	for _, r := range a.acks {
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y app.AckRecord) int { return strings.Compare(x.Cluster, y.Cluster) })
	return out, nil
}
