package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/meshplane/meshplane/libs/revocation"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// DefaultRevocationRefresh is how often Revocations reloads the shared set.
const DefaultRevocationRefresh = revocation.DefaultRefresh

// Revocations is the shared revocation cache (libs/revocation) as
// registration uses it: it also revokes in this replica at once, so that a
// deregistered cluster is refused here before the next reload. It
// implements platform.RevocationChecker.
type Revocations struct {
	*revocation.Cache
}

// NewRevocations returns a cache over store; interval <= 0 means
// DefaultRevocationRefresh.
func NewRevocations(store RevocationStore, interval time.Duration, log *slog.Logger) *Revocations {
	return &Revocations{Cache: revocation.NewCache(store, interval, log)}
}

// Add revokes certs in this replica at once.
func (r *Revocations) Add(certs []domain.IssuedCert) {
	for _, c := range certs {
		r.Cache.Add(c.Serial, c.NotAfter)
	}
}

// Revoker revokes certificates in the shared set, and in this replica's
// cache at once even when the store fails, so that at least this replica
// refuses them.
type Revoker struct {
	store RevocationStore
	cache *Revocations
}

// NewRevoker revokes into store and cache (nil: no cache).
func NewRevoker(store RevocationStore, cache *Revocations) *Revoker {
	return &Revoker{store: store, cache: cache}
}

// Revoke revokes certs.
func (v *Revoker) Revoke(ctx context.Context, certs []domain.IssuedCert) error {
	if len(certs) == 0 {
		return nil
	}
	if v.cache != nil {
		v.cache.Add(certs)
	}
	return v.store.Revoke(ctx, certs)
}
