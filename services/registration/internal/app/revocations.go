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
	store RevocationStore
	log   *slog.Logger
}

// NewRevocations returns a cache over store; interval <= 0 means
// DefaultRevocationRefresh.
func NewRevocations(store RevocationStore, interval time.Duration, log *slog.Logger) *Revocations {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Revocations{Cache: revocation.NewCache(store, interval, log), store: store, log: log}
}

// Run reloads the shared set like every service's cache and, as the
// set's keeper, writes back what the store lost (Redis restarted empty)
// from this replica's memory after each reload: the other services'
// caches keep refusing what they had seen, but a service that starts
// meanwhile learns only from the store.
func (r *Revocations) Run(ctx context.Context) error {
	return r.RunWith(ctx, func(ctx context.Context) { _ = r.RestoreLost(ctx) })
}

// RestoreLost writes the revocations the store lost back into it.
func (r *Revocations) RestoreLost(ctx context.Context) error {
	lost := r.Lost()
	if len(lost) == 0 {
		return nil
	}
	certs := make([]domain.IssuedCert, len(lost))
	for i, l := range lost {
		certs[i] = domain.IssuedCert{Serial: l.Serial, NotAfter: l.NotAfter}
	}
	if err := r.store.Revoke(ctx, certs); err != nil {
		r.log.WarnContext(ctx, "cannot write back the revocations the store lost; retrying after the next reload", "lost", len(lost), "error", err)
		return err
	}
	r.log.WarnContext(ctx, "revocations the store had lost written back from this replica's memory", "restored", len(lost))
	return nil
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

// Remember revokes certs in this replica's cache only.
func (v *Revoker) Remember(certs []domain.IssuedCert) {
	if v.cache != nil {
		v.cache.Add(certs)
	}
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
