package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/proto"
)

// ErrInvalidSnapshot is returned for a snapshot that is refused. The last
// good snapshot of the cluster stays in use.
var ErrInvalidSnapshot = errors.New("invalid snapshot")

// Ingestor accepts input snapshots.
type Ingestor struct {
	store    SnapshotStore
	notifier TranslationNotifier
	metrics  Metrics
	log      *slog.Logger
	replica  string
	now      func() time.Time

	mu       sync.Mutex
	clusters map[string]*ClusterState
}

// ClusterState is what this replica knows of one cluster's pushes.
type ClusterState struct {
	Cluster      string
	Connections  int
	Version      string
	LastPush     time.Time
	AgentVersion string
	Replica      string
}

// NewIngestor returns an ingestor. replica names this process in
// connectivity reports.
func NewIngestor(store SnapshotStore, notifier TranslationNotifier, metrics Metrics, log *slog.Logger, replica string) *Ingestor {
	if metrics == nil {
		metrics = NopMetrics{}
	}
	return &Ingestor{store: store, notifier: notifier, metrics: metrics, log: log, replica: replica, now: time.Now, clusters: map[string]*ClusterState{}}
}

// Push validates and stores a cluster's snapshot and notifies translation.
// cluster comes from the caller's certificate, never from the snapshot. It
// returns the version stored.
func (i *Ingestor) Push(ctx context.Context, cluster string, s *snapshotv1.InputSnapshot) (string, error) {
	version, err := i.push(ctx, cluster, s)
	i.metrics.PushReceived(cluster, proto.Size(s), err)
	return version, err
}

func (i *Ingestor) push(ctx context.Context, cluster string, s *snapshotv1.InputSnapshot) (string, error) {
	if err := Validate(cluster, s); err != nil {
		return "", err
	}
	version := s.GetVersion()
	stored, err := i.store.Version(ctx, cluster)
	if err != nil && !errors.Is(err, snapshots.ErrNotFound) {
		stored = ""
	}
	i.recordPush(cluster, version, s.GetAgent().GetVersion())
	if stored == version {
		return version, nil
	}
	if err := i.store.Put(ctx, cluster, version, s); err != nil {
		return "", fmt.Errorf("store snapshot: %w", err)
	}
	if err := i.notifier.Notify(ctx, cluster, version, s); err != nil {
		// Translation also follows the store, so a lost notice delays the
		// change rather than dropping it.
		i.log.Warn("notifying translation failed", "cluster", cluster, "version", version, "error", err)
	}
	i.log.Info("stored input snapshot", "cluster", cluster, "version", version,
		"destinations", len(s.GetDestinations()), "workloads", len(s.GetWorkloads()), "meshes", len(s.GetMeshes()))
	return version, nil
}

// Validate checks a snapshot before it may replace the last good one.
func Validate(cluster string, s *snapshotv1.InputSnapshot) error {
	if s == nil {
		return fmt.Errorf("%w: no snapshot in the request", ErrInvalidSnapshot)
	}
	if s.GetCluster() != cluster {
		return fmt.Errorf("%w: snapshot names cluster %q but the client certificate is for cluster %q", ErrInvalidSnapshot, s.GetCluster(), cluster)
	}
	want := snapshots.InputVersion(s)
	if s.GetVersion() != want {
		return fmt.Errorf("%w: version %q does not match the content hash %q (was the snapshot sorted and sealed?)", ErrInvalidSnapshot, s.GetVersion(), want)
	}
	for _, d := range s.GetDestinations() {
		if c := d.GetMetadata().GetCluster(); c != cluster {
			return fmt.Errorf("%w: destination %s/%s names cluster %q", ErrInvalidSnapshot, d.GetMetadata().GetNamespace(), d.GetMetadata().GetName(), c)
		}
	}
	return nil
}

func (i *Ingestor) recordPush(cluster, version, agentVersion string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	st := i.state(cluster)
	st.Version, st.LastPush, st.AgentVersion, st.Replica = version, i.now(), agentVersion, i.replica
}

func (i *Ingestor) state(cluster string) *ClusterState {
	st, ok := i.clusters[cluster]
	if !ok {
		st = &ClusterState{Cluster: cluster}
		i.clusters[cluster] = st
	}
	return st
}

// Connect records that a cluster's agent opened a push stream. The returned
// function records that it closed.
func (i *Ingestor) Connect(cluster string) (disconnect func()) {
	i.mu.Lock()
	i.state(cluster).Connections++
	i.mu.Unlock()
	i.metrics.ClientConnected(cluster)
	var once sync.Once
	return func() {
		once.Do(func() {
			i.mu.Lock()
			i.state(cluster).Connections--
			i.mu.Unlock()
			i.metrics.ClientDisconnected(cluster)
		})
	}
}

// Clusters returns the state of every cluster seen by this replica.
func (i *Ingestor) Clusters() []ClusterState {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make([]ClusterState, 0, len(i.clusters))
	for _, st := range i.clusters {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b ClusterState) int { return strings.Compare(a.Cluster, b.Cluster) })
	return out
}

// Snapshot returns a cluster's latest stored snapshot.
func (i *Ingestor) Snapshot(ctx context.Context, cluster string) (*snapshotv1.InputSnapshot, error) {
	e, err := i.store.Get(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return e.Value, nil
}
