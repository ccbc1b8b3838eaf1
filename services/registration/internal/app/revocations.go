package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// DefaultRevocationRefresh is how often Revocations reloads the shared set.
const DefaultRevocationRefresh = 2 * time.Second

// Revocations answers whether a certificate is revoked from memory, and
// reloads the shared set from the store in the background. It implements
// platform.RevocationChecker. When the store is down it keeps answering
// from the last set it loaded plus what this replica revoked itself, so an
// outage refuses no one who was admitted before it; a revocation made on
// another replica during the outage is seen when the store returns.
type Revocations struct {
	store    RevocationStore
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu     sync.RWMutex
	shared map[string]struct{}  // the store's set, as last loaded
	local  map[string]time.Time // revoked here, until they expire
}

// NewRevocations returns a cache over store; interval <= 0 means
// DefaultRevocationRefresh.
func NewRevocations(store RevocationStore, interval time.Duration, log *slog.Logger) *Revocations {
	if interval <= 0 {
		interval = DefaultRevocationRefresh
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Revocations{store: store, interval: interval, log: log, now: time.Now, shared: map[string]struct{}{}, local: map[string]time.Time{}}
}

// IsRevoked answers from memory and never fails. serial is in decimal.
func (r *Revocations) IsRevoked(_ context.Context, serial string) (bool, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if _, ok := r.shared[serial]; ok {
		return true, nil
	}
	_, ok := r.local[serial]
	return ok, nil
}

// Add revokes certs in this replica at once.
func (r *Revocations) Add(certs []domain.IssuedCert) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range certs {
		r.local[c.Serial] = c.NotAfter
	}
}

// Refresh reloads the shared set. On error the previous set stays.
func (r *Revocations) Refresh(ctx context.Context) error {
	now := r.now()
	serials, err := r.store.RevokedSerials(ctx, now)
	if err != nil {
		return err
	}
	shared := make(map[string]struct{}, len(serials))
	for _, s := range serials {
		shared[s] = struct{}{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shared = shared
	for s, notAfter := range r.local {
		if !now.Before(notAfter) {
			delete(r.local, s)
		}
	}
	return nil
}

// Run refreshes every interval until ctx ends. Failures are logged, once
// per outage, and do not stop it.
func (r *Revocations) Run(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	failing := false
	for {
		err := r.Refresh(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			r.log.WarnContext(ctx, "cannot reload the revocation set; answering from the last one loaded", "error", err)
		case err == nil && failing:
			failing = false
			r.log.InfoContext(ctx, "revocation set reloaded again")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
