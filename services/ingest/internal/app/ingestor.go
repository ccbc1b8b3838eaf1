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

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/proto"
)

// ErrInvalidSnapshot is returned for a snapshot that is refused. The last
// good snapshot of the cluster stays in use.
var ErrInvalidSnapshot = errors.New("invalid snapshot")

// ErrReservedCluster is returned to an agent that pushes for the cluster
// name of the management cluster's input, which ingest reads itself.
var ErrReservedCluster = errors.New("reserved cluster name")

// Ingestor accepts input snapshots.
type Ingestor struct {
	store    SnapshotStore
	notifier TranslationNotifier
	metrics  Metrics
	log      *slog.Logger
	replica  string
	now      func() time.Time
	// staleAfter is how long after its last push a disconnected cluster
	// is reported stale; zero never.
	staleAfter time.Duration
	// limits bound the objects in an agent's snapshot.
	limits Limits

	mu       sync.Mutex
	clusters map[string]*ClusterState
	// reserved names the inputs that only this process produces (the
	// management cluster's); agents may not push for them.
	reserved map[string]bool
	// writes serializes the store writes of each cluster, so that a
	// restore never puts back an older snapshot over a push.
	writes map[string]*sync.Mutex
}

// ClusterState is what this replica knows of one cluster's pushes.
type ClusterState struct {
	Cluster      string
	Connections  int
	Version      string
	LastPush     time.Time
	AgentVersion string
	Replica      string
	// Stale is set by Clusters: no agent is connected and the last push
	// is older than the stale window. The snapshot is kept all the same.
	Stale bool
	// Management is set by Clusters for an input this process produces
	// itself (Reserve): the management cluster's own resources.
	Management bool
	// Refused is the last push refused since the last one accepted, if
	// any: the snapshot in use is older than what the agent sees.
	Refused *Refusal
}

// IngestorOption tunes an Ingestor.
type IngestorOption func(*Ingestor)

// WithStaleAfter sets how long after its last push a cluster whose agent
// is not connected is reported stale. Zero (the default) never does.
func WithStaleAfter(d time.Duration) IngestorOption {
	return func(i *Ingestor) { i.staleAfter = d }
}

// WithLimits bounds the objects in an agent's snapshot. Without it there
// is no bound.
func WithLimits(l Limits) IngestorOption {
	return func(i *Ingestor) { i.limits = l }
}

// WithClock sets the clock, for tests.
func WithClock(now func() time.Time) IngestorOption {
	return func(i *Ingestor) { i.now = now }
}

// NewIngestor returns an ingestor. replica names this process in
// connectivity reports.
func NewIngestor(store SnapshotStore, notifier TranslationNotifier, metrics Metrics, log *slog.Logger, replica string, opts ...IngestorOption) *Ingestor {
	if metrics == nil {
		metrics = NopMetrics{}
	}
	i := &Ingestor{store: store, notifier: notifier, metrics: metrics, log: log, replica: replica, now: time.Now, clusters: map[string]*ClusterState{}, writes: map[string]*sync.Mutex{}, reserved: map[string]bool{}}
	for _, o := range opts {
		o(i)
	}
	return i
}

// Reserve keeps cluster for inputs that this process produces itself:
// PushFromAgent refuses it.
func (i *Ingestor) Reserve(cluster string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.reserved[cluster] = true
}

// PushFromAgent stores a snapshot from an agent, given as its wire
// encoding (an InputSnapshot), and notifies translation; it returns the
// version stored. cluster comes from the caller's certificate, never from
// the snapshot, and may not be a reserved one: two sources of one input
// would undo each other.
//
// The encoding is checked in place (snapshots.ReadInput): an agent sends
// the canonical encoding it hashed, so the hash of the bytes received is
// the version, and those bytes are what is stored and forwarded. Anything
// else (another encoder's field or map order, or a refusal whose message
// must name the object) takes the path of Push: decode, check, encode.
func (i *Ingestor) PushFromAgent(ctx context.Context, cluster string, data []byte) (string, error) {
	i.mu.Lock()
	reserved := i.reserved[cluster]
	i.mu.Unlock()
	if reserved {
		err := fmt.Errorf("%w: %q names the management cluster's own input; register the workload cluster under another name", ErrReservedCluster, cluster)
		i.refused(cluster, len(data), err)
		return "", err
	}
	e, info, err := accept(cluster, data, i.limits)
	if err != nil {
		i.refused(cluster, len(data), err)
		return "", err
	}
	version, err := i.push(ctx, cluster, e, info)
	i.metrics.PushReceived(cluster, len(data), err)
	return version, err
}

// refused counts and remembers a refused push of cluster's agent, for
// connectivity reports.
func (i *Ingestor) refused(cluster string, size int, err error) {
	i.metrics.PushReceived(cluster, size, err)
	reason := refusalReason(err)
	if reason == "" {
		return
	}
	i.metrics.PushRefused(cluster, reason)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.state(cluster).Refused = &Refusal{Reason: reason, Message: err.Error(), At: i.now()}
}

// Push validates and stores a cluster's snapshot and notifies translation.
// cluster comes from the caller's certificate, never from the snapshot. It
// returns the version stored.
func (i *Ingestor) Push(ctx context.Context, cluster string, s *snapshotv1.InputSnapshot) (string, error) {
	e, err := validate(cluster, s)
	if err != nil {
		i.metrics.PushReceived(cluster, proto.Size(s), err)
		return "", err
	}
	version, err := i.push(ctx, cluster, e, infoOf(s))
	i.metrics.PushReceived(cluster, len(e.Data), err)
	return version, err
}

// pushInfo is what a push reports of its snapshot, besides storing it.
type pushInfo struct {
	agentVersion                    string
	meshes, workloads, destinations int
}

func infoOf(s *snapshotv1.InputSnapshot) pushInfo {
	return pushInfo{agentVersion: s.GetAgent().GetVersion(), meshes: len(s.GetMeshes()), workloads: len(s.GetWorkloads()), destinations: len(s.GetDestinations())}
}

// accept checks an encoded snapshot from cluster's agent and returns what
// to store. The encoding is kept when it is canonical and every check
// passes on it; otherwise the snapshot is decoded and validated, which
// gives the precise refusal, or the canonical encoding to store. The
// limits are held to the counts read from the encoding, before anything
// is decoded, so they bound both paths.
func accept(cluster string, data []byte, limits Limits) (snapshots.Encoded[*snapshotv1.InputSnapshot], pushInfo, error) {
	var none snapshots.Encoded[*snapshotv1.InputSnapshot]
	if len(data) == 0 {
		return none, pushInfo{}, fmt.Errorf("%w: no snapshot in the request", ErrInvalidSnapshot)
	}
	h, err := snapshots.ReadInput(data)
	if err != nil {
		return none, pushInfo{}, fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
	}
	if err := limits.Check(h.InputCounts); err != nil {
		return none, pushInfo{}, err
	}
	if h.Cluster == cluster && h.EncodedVersion == h.Version && claimsOnly(h, cluster) {
		info := pushInfo{agentVersion: h.Agent.GetVersion(), meshes: h.Meshes, workloads: h.Workloads, destinations: h.Destinations}
		return snapshots.Encoded[*snapshotv1.InputSnapshot]{Version: h.Version, Data: data}, info, nil
	}
	s := &snapshotv1.InputSnapshot{}
	if err := proto.Unmarshal(data, s); err != nil {
		return none, pushInfo{}, fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
	}
	e, err := validate(cluster, s)
	if err != nil {
		return none, pushInfo{}, err
	}
	return e, infoOf(s), nil
}

// claimsOnly reports whether every discovered object in h names cluster,
// and every Service reference names it or no cluster: the checks of
// validate, on the encoding.
func claimsOnly(h snapshots.InputHead, cluster string) bool {
	for _, c := range h.DiscoveredClusters {
		if c != cluster {
			return false
		}
	}
	for _, c := range h.ServiceRefClusters {
		if c != "" && c != cluster {
			return false
		}
	}
	return true
}

func (i *Ingestor) push(ctx context.Context, cluster string, e snapshots.Encoded[*snapshotv1.InputSnapshot], info pushInfo) (string, error) {
	version := e.Version
	unlock := i.lockWrites(cluster)
	defer unlock()
	stored, err := i.store.Version(ctx, cluster)
	if err != nil && !errors.Is(err, snapshots.ErrNotFound) {
		stored = ""
	}
	if stored == version {
		i.recordPush(cluster, version, info.agentVersion)
		return version, nil
	}
	if err := i.store.PutEncoded(ctx, cluster, e); err != nil {
		return "", fmt.Errorf("store snapshot: %w", err)
	}
	// Recorded only once stored: connectivity reports must not show a
	// version that was refused.
	i.recordPush(cluster, version, info.agentVersion)
	if err := i.notifier.Notify(ctx, cluster, version, e.Data); err != nil {
		// Translation also follows the store, so a lost notice delays the
		// change rather than dropping it.
		i.log.Warn("notifying translation failed", "cluster", cluster, "version", version, "error", err)
	}
	i.log.Info("stored input snapshot", "cluster", cluster, "version", version,
		"destinations", info.destinations, "workloads", info.workloads, "meshes", info.meshes)
	return version, nil
}

func (i *Ingestor) lockWrites(cluster string) (unlock func()) {
	i.mu.Lock()
	m, ok := i.writes[cluster]
	if !ok {
		m = &sync.Mutex{}
		i.writes[cluster] = m
	}
	i.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// Restore writes back to the shared store the snapshot of every cluster
// whose agent is connected to this replica and that the shared store no
// longer holds, as after a Redis restart without persistence. The agent
// will not push again until something changes, and this replica holds its
// newest snapshot; clusters connected elsewhere are left to their replica.
// It returns the clusters restored.
func (i *Ingestor) Restore(ctx context.Context, shared SharedStore) ([]string, error) {
	var restored []string
	var errs []error
	for _, st := range i.Clusters() {
		if st.Connections == 0 {
			continue
		}
		ok, err := i.restore(ctx, shared, st.Cluster)
		if err != nil {
			errs = append(errs, fmt.Errorf("restore snapshot of cluster %q: %w", st.Cluster, err))
		}
		if ok {
			restored = append(restored, st.Cluster)
		}
	}
	return restored, errors.Join(errs...)
}

func (i *Ingestor) restore(ctx context.Context, shared SharedStore, cluster string) (bool, error) {
	unlock := i.lockWrites(cluster)
	defer unlock()
	_, err := shared.Version(ctx, cluster)
	if !errors.Is(err, snapshots.ErrNotFound) {
		return false, err // present (nil), or the store failed
	}
	e, err := i.store.Get(ctx, cluster)
	if errors.Is(err, snapshots.ErrNotFound) {
		return false, nil // nothing pushed here yet
	}
	if err != nil {
		return false, err
	}
	if err := shared.Put(ctx, cluster, e.Version, e.Value); err != nil {
		return false, err
	}
	i.log.Info("restored an input snapshot the shared store had lost", "cluster", cluster, "version", e.Version)
	return true, nil
}

// Validate checks a snapshot before it may replace the last good one.
func Validate(cluster string, s *snapshotv1.InputSnapshot) error {
	_, err := validate(cluster, s)
	return err
}

// validate checks s and returns it encoded: the content hash that the
// version is checked against comes from the encoding that is stored.
func validate(cluster string, s *snapshotv1.InputSnapshot) (snapshots.Encoded[*snapshotv1.InputSnapshot], error) {
	var none snapshots.Encoded[*snapshotv1.InputSnapshot]
	if s == nil {
		return none, fmt.Errorf("%w: no snapshot in the request", ErrInvalidSnapshot)
	}
	if s.GetCluster() != cluster {
		return none, fmt.Errorf("%w: snapshot names cluster %q but the client certificate is for cluster %q", ErrInvalidSnapshot, s.GetCluster(), cluster)
	}
	e, err := snapshots.EncodeInput(s)
	if err != nil {
		return none, fmt.Errorf("%w: %w", ErrInvalidSnapshot, err)
	}
	if s.GetVersion() != e.Version {
		return none, fmt.Errorf("%w: version %q does not match the content hash %q (was the snapshot sorted and sealed?)", ErrInvalidSnapshot, s.GetVersion(), e.Version)
	}
	// Discovered objects are facts about the pushing cluster; one that
	// names another cluster would let an agent speak for that cluster.
	for _, d := range s.GetDestinations() {
		if err := checkDiscovered("destination", d.GetMetadata(), cluster); err != nil {
			return none, err
		}
		if c := d.GetSpec().GetKubeService().GetRef().GetCluster(); c != "" && c != cluster {
			return none, fmt.Errorf("%w: destination %s/%s refers to a Service in cluster %q", ErrInvalidSnapshot, d.GetMetadata().GetNamespace(), d.GetMetadata().GetName(), c)
		}
	}
	for _, w := range s.GetWorkloads() {
		if err := checkDiscovered("workload", w.GetMetadata(), cluster); err != nil {
			return none, err
		}
	}
	for _, m := range s.GetMeshes() {
		if err := checkDiscovered("mesh", m.GetMetadata(), cluster); err != nil {
			return none, err
		}
	}
	return e, nil
}

func checkDiscovered(kind string, meta *commonv1.ObjectMeta, cluster string) error {
	if c := meta.GetCluster(); c != cluster {
		return fmt.Errorf("%w: %s %s/%s names cluster %q", ErrInvalidSnapshot, kind, meta.GetNamespace(), meta.GetName(), c)
	}
	return nil
}

func (i *Ingestor) recordPush(cluster, version, agentVersion string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	st := i.state(cluster)
	st.Version, st.LastPush, st.AgentVersion, st.Replica = version, i.now(), agentVersion, i.replica
	st.Refused = nil
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

// Clusters returns the state of every cluster seen by this replica, with
// Stale set as of now.
func (i *Ingestor) Clusters() []ClusterState {
	now := i.now()
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make([]ClusterState, 0, len(i.clusters))
	for _, st := range i.clusters {
		c := *st
		if c.Refused != nil {
			r := *c.Refused
			c.Refused = &r
		}
		c.Stale = i.stale(c, now)
		c.Management = i.reserved[c.Cluster]
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ClusterState) int { return strings.Compare(a.Cluster, b.Cluster) })
	return out
}

// stale reports whether st is stale at now: no agent connected, and the
// last push (if any) older than the stale window. A cluster that never
// pushed here has nothing to go stale.
func (i *Ingestor) stale(st ClusterState, now time.Time) bool {
	if i.staleAfter <= 0 || st.Connections > 0 || st.LastPush.IsZero() {
		return false
	}
	return now.Sub(st.LastPush) > i.staleAfter
}

// Snapshot returns a cluster's latest stored snapshot.
func (i *Ingestor) Snapshot(ctx context.Context, cluster string) (*snapshotv1.InputSnapshot, error) {
	e, err := i.store.Get(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return e.Value, nil
}
