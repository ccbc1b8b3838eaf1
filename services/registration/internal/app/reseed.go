package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// ClusterArchive is a durable copy of the cluster records outside the
// store: the KubernetesCluster mirrors in the management cluster, which
// outlive a Redis that restarts empty (DESIGN.md section 7). A copy holds
// the record's status, agent version, times and newest certificate.
type ClusterArchive interface {
	// ArchivedCluster returns the copy of name, or ErrNotFound.
	ArchivedCluster(ctx context.Context, name string) (domain.Cluster, error)
	// ArchivedClusters returns every copy.
	ArchivedClusters(ctx context.Context) ([]domain.Cluster, error)
}

// Reseeder puts back the cluster records the store lost, from the archive,
// and revokes again the certificates of the deregistered clusters there,
// which the shared revocation set lost with them. A record the store holds
// is never overwritten.
type Reseeder struct {
	clusters ClusterStore
	archive  ClusterArchive
	revoker  *Revoker
	now      func() time.Time
	log      *slog.Logger
}

// NewReseeder re-seeds clusters from archive and revokes with revoker; now
// nil means time.Now.
func NewReseeder(clusters ClusterStore, archive ClusterArchive, revoker *Revoker, now func() time.Time, log *slog.Logger) *Reseeder {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reseeder{clusters: clusters, archive: archive, revoker: revoker, now: now, log: log}
}

// Reseed returns the record of name, putting it back from the archive
// when the store has none. ErrNotFound: neither has it.
func (s *Reseeder) Reseed(ctx context.Context, name string) (domain.Cluster, error) {
	c, err := s.clusters.Cluster(ctx, name)
	if !errors.Is(err, ErrNotFound) {
		return c, err
	}
	a, err := s.archive.ArchivedCluster(ctx, name)
	if err != nil {
		return domain.Cluster{}, err
	}
	return s.put(ctx, a)
}

// ReseedAll puts back every archived record the store lacks, and revokes
// again the unexpired certificates of every deregistered cluster that has
// an archived copy.
func (s *Reseeder) ReseedAll(ctx context.Context) error {
	archived, err := s.archive.ArchivedClusters(ctx)
	if err != nil {
		return fmt.Errorf("read archived cluster records: %w", err)
	}
	var errs []error
	for _, a := range archived {
		c, err := s.clusters.Cluster(ctx, a.Name)
		switch {
		case errors.Is(err, ErrNotFound):
			_, err = s.put(ctx, a)
		case err == nil && c.Status == domain.StatusDeregistered:
			// Revoking is idempotent: this heals a revocation set that
			// was lost while the record was not. The record decides, not
			// the copy, which anyone who may edit it could change.
			err = s.revoker.Revoke(ctx, c.Deregister(s.now()))
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Preload adds to this process's revocation cache (not the store) every
// unexpired certificate of every deregistered cluster in the archive. Run
// before serving: a plane that restarts together with an emptied Redis
// then refuses them from its first call, before any resync.
func (s *Reseeder) Preload(ctx context.Context) (int, error) {
	archived, err := s.archive.ArchivedClusters(ctx)
	if err != nil {
		return 0, fmt.Errorf("read archived cluster records: %w", err)
	}
	n := 0
	now := s.now()
	for _, a := range archived {
		if a.Status != domain.StatusDeregistered {
			continue
		}
		certs := a.Deregister(now)
		s.revoker.Remember(certs)
		n += len(certs)
	}
	return n, nil
}

// put stores a unless the store got a record meanwhile, and revokes its
// certificates when it is deregistered.
func (s *Reseeder) put(ctx context.Context, a domain.Cluster) (domain.Cluster, error) {
	restored := false
	c, err := s.clusters.UpdateCluster(ctx, a.Name, func(c *domain.Cluster, exists bool) error {
		if !exists {
			*c, restored = a, true
		}
		return nil
	})
	if err != nil {
		return domain.Cluster{}, fmt.Errorf("re-seed cluster %s: %w", a.Name, err)
	}
	if c.Status == domain.StatusDeregistered {
		if err := s.revoker.Revoke(ctx, c.Deregister(s.now())); err != nil {
			return c, fmt.Errorf("revoke re-seeded cluster %s: %w", a.Name, err)
		}
	}
	if restored {
		s.log.WarnContext(ctx, "cluster record re-seeded from its KubernetesCluster: the store had lost it", "cluster", a.Name, "status", a.Status.String())
	}
	return c, nil
}
