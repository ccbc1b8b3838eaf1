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
	// MirroredClusters names the clusters that have a mirror.
	MirroredClusters(ctx context.Context) ([]string, error)
	// RemoveMirror removes the mirror of cluster, if any.
	RemoveMirror(ctx context.Context, cluster string) error
}

// ClusterChanges learns of every change to a cluster record.
type ClusterChanges interface {
	ClusterChanged(name string)
}

// DefaultMirrorResync is how often Mirroring rewrites every mirror.
const DefaultMirrorResync = 30 * time.Second

// Mirroring keeps a ClusterMirror in step with the cluster records: a
// changed record is mirrored soon after, and every resync all records are
// written and mirrors of records that no longer exist are removed, which
// also catches changes made by other replicas. A mirror that fails is
// logged and retried at the next resync; it never fails a registration.
type Mirroring struct {
	clusters ClusterStore
	mirror   ClusterMirror
	resync   time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	pending map[string]bool
	wake    chan struct{}
}

var _ ClusterChanges = (*Mirroring)(nil)

// NewMirroring mirrors clusters' records to mirror; resync <= 0 means
// DefaultMirrorResync.
func NewMirroring(clusters ClusterStore, mirror ClusterMirror, resync time.Duration, log *slog.Logger) *Mirroring {
	if resync <= 0 {
		resync = DefaultMirrorResync
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Mirroring{clusters: clusters, mirror: mirror, resync: resync, log: log, pending: map[string]bool{}, wake: make(chan struct{}, 1)}
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

// Reconcile writes every record's mirror and removes the others. When the
// records cannot be read, nothing is removed.
func (m *Mirroring) Reconcile(ctx context.Context) error {
	cs, err := m.clusters.Clusters(ctx)
	if err != nil {
		return err
	}
	var errs []error
	keep := make(map[string]bool, len(cs))
	for _, c := range cs {
		keep[c.Name] = true
		errs = append(errs, m.mirror.MirrorCluster(ctx, c))
	}
	mirrored, err := m.mirror.MirroredClusters(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, name := range mirrored {
		if keep[name] {
			continue
		}
		// Created by another replica since the list above?
		if _, err := m.clusters.Cluster(ctx, name); !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		if err := m.mirror.RemoveMirror(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		m.log.InfoContext(ctx, "KubernetesCluster mirror removed: the cluster has no record", "cluster", name)
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
