package app

import (
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
