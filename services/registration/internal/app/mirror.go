package app

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// ClusterMirror shows cluster records outside the store (KubernetesCluster
// objects in the management cluster).
type ClusterMirror interface {
	// MirrorCluster writes c's mirror.
	MirrorCluster(ctx context.Context, c domain.Cluster) error
}

// ClusterChanges learns of every change to a cluster record.
type ClusterChanges interface {
	ClusterChanged(name string)
}

// DefaultMirrorResync is how often Mirroring rewrites every mirror.
const DefaultMirrorResync = 30 * time.Second

// Mirroring keeps a ClusterMirror in step with the cluster records: a
// changed record is mirrored soon after, and every resync all records are
// written, which also catches changes made by other replicas. A mirror is
// never removed: records are never deleted, so a mirror without a record
// means the store lost it, and every resync first re-seeds such records
// from their mirrors (Reseeder). A mirror that fails is logged and retried
// at the next resync; it never fails a registration.
type Mirroring struct {
	clusters ClusterStore
	mirror   ClusterMirror
	reseed   *Reseeder
	resync   time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	pending map[string]bool
	wake    chan struct{}
}

var _ ClusterChanges = (*Mirroring)(nil)

// NewMirroring mirrors clusters' records to mirror, after re-seeding the
// records the store lost with reseed (nil: none); resync <= 0 means
// DefaultMirrorResync.
func NewMirroring(clusters ClusterStore, mirror ClusterMirror, reseed *Reseeder, resync time.Duration, log *slog.Logger) *Mirroring {
	if resync <= 0 {
		resync = DefaultMirrorResync
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Mirroring{clusters: clusters, mirror: mirror, reseed: reseed, resync: resync, log: log, pending: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// ClusterChanged queues name; it never blocks.
func (m *Mirroring) ClusterChanged(name string) {
	m.mu.Lock()
	m.pending[name] = true
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run mirrors changes and resyncs until ctx ends.
func (m *Mirroring) Run(ctx context.Context) error {
	t := time.NewTicker(m.resync)
	defer t.Stop()
	m.logErr(ctx, "", m.Reconcile(ctx))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			m.logErr(ctx, "", m.Reconcile(ctx))
		case <-m.wake:
			m.flush(ctx)
		}
	}
}

func (m *Mirroring) flush(ctx context.Context) {
	m.mu.Lock()
	names := m.pending
	m.pending = map[string]bool{}
	m.mu.Unlock()
	for name := range names {
		c, err := m.clusters.Cluster(ctx, name)
		if errors.Is(err, ErrNotFound) {
			continue // the next resync prunes its mirror
		}
		if err == nil {
			err = m.mirror.MirrorCluster(ctx, c)
		}
		m.logErr(ctx, name, err)
	}
}

// Reconcile re-seeds the records the store lost, then writes every
// record's mirror. A record that cannot be re-seeded is not mirrored over:
// its mirror stays as it is.
func (m *Mirroring) Reconcile(ctx context.Context) error {
	var errs []error
	if m.reseed != nil {
		errs = append(errs, m.reseed.ReseedAll(ctx))
	}
	cs, err := m.clusters.Clusters(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, c := range cs {
		errs = append(errs, m.mirror.MirrorCluster(ctx, c))
	}
	return errors.Join(errs...)
}

func (m *Mirroring) logErr(ctx context.Context, cluster string, err error) {
	if err == nil || ctx.Err() != nil {
		return
	}
	if cluster == "" {
		m.log.WarnContext(ctx, "KubernetesCluster mirror resync failed; retrying at the next resync", "error", err)
		return
	}
	m.log.WarnContext(ctx, "KubernetesCluster mirror failed; retrying at the next resync", "cluster", cluster, "error", err)
}
