package app

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
)

// Syncer applies each output snapshot it receives: the objects that the
// cluster does not hold as they are (by their digest), in dependency
// order and in parallel within a kind, with server-side apply; then
// deletion of the owned objects that the snapshot no longer holds; then an
// acknowledgement. Between snapshots it puts back owned objects that
// someone else changed or deleted (drift). A snapshot built
// without some expected cluster's input (missing_clusters) deletes
// nothing: its deletions are held, counted and acknowledged as
// DELETION_HELD, until a complete snapshot arrives.
//
// It deletes only after it has received a whole snapshot from the
// management plane. A restart or a lost connection deletes nothing.
type Syncer struct {
	relay    Relay
	applier  Applier
	statuses StatusWriter
	cacerts  *CACerts
	envoy    EnvoyConfigReplicator
	// detection receives each applied snapshot's gateway detector.
	detection *GatewayDetection
	// leadership, when set, is confirmed before each apply and checked
	// before each object.
	leadership Leadership
	metrics    Metrics
	log        *slog.Logger
	opts       ApplyOptions

	// desired holds the latest snapshot's objects by identity, bySource
	// by the object as received, and list in the snapshot's order.
	// inCluster holds what the cluster holds of the owned objects as far
	// as the syncer knows: from the view when it synced, then from its
	// own writes and the view's changes. Only the goroutine that runs
	// Apply and observe uses them.
	desired  map[domain.ObjectID]*want
	bySource map[*snapshotv1.Object]*want
	list     []*want
	// spare is the array of the list before list, which the next list is
	// made in.
	spare     []*want
	inCluster map[domain.ObjectID]domain.Applied
	// settled says the last apply ran to its end, so that every object of
	// desired is in inCluster with its digest and inCluster holds nothing
	// else, but for the identities in pending (a write or delete that
	// failed, a conflict, a held deletion, anything the view changed
	// since). The next apply then looks only at the objects that changed
	// and at pending, not at every object; without it, at everything.
	settled bool
	pending map[domain.ObjectID]struct{}
	// gen numbers the applies: it marks the records a snapshot holds and
	// those an apply looks at.
	gen uint64
	// suspect holds objects found changed by another field manager while
	// no agent watched, to be counted as drift when written again.
	suspect map[domain.ObjectID]string

	// written holds, per resource, the generation and status last written
	// or found current, so that an unchanged status costs no API call.
	// Only Apply uses it, and Apply runs on one goroutine.
	written map[statusKey]string

	mu      sync.Mutex
	applied string
	// acked and ackResults are the version last acknowledged and its
	// results without the cacerts manager's, so that a change of the
	// manager's results can be acknowledged again at once.
	acked      string
	ackResults []*snapshotv1.ApplyResult
	// ackOwed says the last acknowledgement did not reach the plane (a
	// replica died, the connection reset): it is sent again on a timer and
	// at the start of the next watch. The plane does not send a version
	// the agent says it holds, so without this the cluster would show as
	// behind until the next version.
	ackOwed bool
	// failed holds the version whose apply did not fully succeed, so that
	// it is retried rather than acknowledged as current.
	failed string
}

// ApplyOptions says whose objects the syncer writes and how many at once.
type ApplyOptions struct {
	// Install and Cluster are the values of the ownership labels.
	Install, Cluster string
	// Workers is how many writes run at once.
	Workers int
}

// DefaultApplyWorkers is the number of concurrent writes by default.
const DefaultApplyWorkers = 16

// NewSyncer returns a syncer.
func NewSyncer(relay Relay, applier Applier, metrics Metrics, log *slog.Logger, opts ...SyncerOption) *Syncer {
	if metrics == nil {
		metrics = NopMetrics{}
	}
	s := &Syncer{
		relay: relay, applier: applier, metrics: metrics, log: log, written: map[statusKey]string{},
		opts:    ApplyOptions{Install: snapshots.DefaultInstall, Workers: DefaultApplyWorkers},
		desired: map[domain.ObjectID]*want{}, bySource: map[*snapshotv1.Object]*want{},
		inCluster: map[domain.ObjectID]domain.Applied{}, pending: map[domain.ObjectID]struct{}{},
		suspect: map[domain.ObjectID]string{},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// SyncerOption sets an optional setting or collaborator of a Syncer.
type SyncerOption func(*Syncer)

// WithApplyOptions sets the ownership labels' values and the number of
// workers. A zero Workers keeps DefaultApplyWorkers, an empty Install
// snapshots.DefaultInstall.
func WithApplyOptions(o ApplyOptions) SyncerOption {
	return func(s *Syncer) {
		if o.Workers <= 0 {
			o.Workers = DefaultApplyWorkers
		}
		if o.Install == "" {
			o.Install = snapshots.DefaultInstall
		}
		s.opts = o
	}
}

// WithStatusWriter makes the syncer write the snapshots' statuses with w.
// Without one, statuses are not written.
func WithStatusWriter(w StatusWriter) SyncerOption {
	return func(s *Syncer) { s.statuses = w }
}

// WithCACerts hands each applied snapshot's IssuedCertificates to m, and
// adds m's conflicts and failures to the acknowledgements.
func WithCACerts(m *CACerts) SyncerOption {
	return func(s *Syncer) { s.cacerts = m }
}

// WithEnvoyConfigReplicator hands each applied snapshot's EnvoyConfig (Wasm
// filters, access-log policies) to r, which gets it to every replica's 9977
// servers.
func WithEnvoyConfigReplicator(r EnvoyConfigReplicator) SyncerOption {
	return func(s *Syncer) { s.envoy = r }
}

// WithGatewayDetectorSink hands each applied snapshot's gateway detector
// to g, which the pusher discovers with (WithGatewayDetection).
func WithGatewayDetectorSink(g *GatewayDetection) SyncerOption {
	return func(s *Syncer) { s.detection = g }
}

// WithLeadership makes the syncer confirm leadership with a quorum before
// each apply and check it before each object, so that a replica that lost
// leadership stops between objects.
func WithLeadership(l Leadership) SyncerOption {
	return func(s *Syncer) { s.leadership = l }
}

// leading reports whether the apply may go on.
func (s *Syncer) leading(ctx context.Context) bool {
	return ctx.Err() == nil && (s.leadership == nil || s.leadership.IsLeader())
}

type statusKey struct{ apiVersion, kind, namespace, name string }

// AppliedVersion returns the version last applied in full.
func (s *Syncer) AppliedVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// Run watches and applies until ctx ends. It first waits for the view of
// the cluster, from which it learns what is applied already.
func (s *Syncer) Run(ctx context.Context) error {
	if err := s.Sync(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	b := Backoff{Min: 200 * time.Millisecond, Max: 30 * time.Second}
	for ctx.Err() == nil {
		err := s.session(ctx, &b)
		s.metrics.Connected("watch", false)
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("watch stream ended; reconnecting", "error", err)
		if !b.Wait(ctx) {
			return nil
		}
	}
	return nil
}

func (s *Syncer) session(ctx context.Context, b *Backoff) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := s.relay.Watch(ctx, s.AppliedVersion())
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	// Cancelling ends the stream's Receive; the receiver is waited for
	// before Close, which must not run concurrently with Receive, and so
	// that no goroutine outlives the session.
	defer func() {
		cancel()
		wg.Wait()
		stream.Close()
	}()
	s.metrics.Connected("watch", true)
	if s.owesAck() {
		s.reack(ctx)
	}

	received := make(chan *snapshotv1.OutputSnapshot, 1)
	errs := make(chan error, 1)
	wg.Go(func() {
		for {
			snap, err := stream.Receive()
			if err != nil {
				errs <- err
				return
			}
			select {
			case received <- snap:
			case <-ctx.Done():
				return
			}
		}
	})

	// A snapshot that did not apply in full is applied again until it
	// does, or until a newer one replaces it.
	var last *snapshotv1.OutputSnapshot
	retry := Backoff{Min: time.Second, Max: time.Minute}
	var retryC <-chan time.Time
	ackRetry := Backoff{Min: time.Second, Max: time.Minute}
	var ackRetryC <-chan time.Time
	// owed arms the acknowledgement's retry timer while one is owed.
	owed := func() {
		switch {
		case !s.owesAck():
			ackRetry.Reset()
			ackRetryC = nil
		case ackRetryC == nil:
			ackRetryC = time.After(ackRetry.Next())
		}
	}
	owed()
	var caChanged <-chan struct{}
	if s.cacerts != nil {
		caChanged = s.cacerts.Changed()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			return err
		case <-s.applier.Changed():
			if !s.observe(ctx) && retryC == nil && last != nil {
				retryC = time.After(retry.Next())
			}
			continue
		case <-caChanged:
			// A cacerts conflict or failure found (or gone) after the last
			// acknowledgement: say so now rather than with the next
			// snapshot, which may be long in coming.
			s.reack(ctx)
			owed()
			continue
		case <-ackRetryC:
			ackRetryC = nil
			s.reack(ctx)
			owed()
			continue
		case snap := <-received:
			b.Reset()
			if !complete(snap) {
				// Applying it would garbage-collect everything that
				// Meshplane applied.
				s.log.Warn("ignored a watch message without a versioned snapshot")
				continue
			}
			retry.Reset()
			last = snap
		case <-retryC:
		}
		if s.Apply(ctx, last) {
			retryC = nil
		} else {
			retryC = time.After(retry.Next())
		}
		owed()
	}
}

// complete reports whether snap is a whole output snapshot. Every snapshot
// that distribution serves is sealed with its content hash, even an empty
// one, so a missing version means a message that carries none.
func complete(snap *snapshotv1.OutputSnapshot) bool {
	return snap != nil && snap.GetVersion() != ""
}

// Apply applies one snapshot and acknowledges it. It reports whether
// everything applied. A snapshot without a version is refused: nothing is
// applied or deleted for it.
func (s *Syncer) Apply(ctx context.Context, snap *snapshotv1.OutputSnapshot) bool {
	if !complete(snap) {
		return false
	}
	if s.leadership != nil {
		// A barrier: a leader cut off from its quorum learns it here,
		// before it writes anything.
		if err := s.leadership.VerifyLeader(ctx); err != nil {
			s.log.Warn("not applying: leadership not confirmed", "version", snap.GetVersion(), "error", err)
			return false
		}
	}
	start := time.Now()
	look := s.desire(snap.GetObjects())
	if !s.settled {
		look = nil // every object
	} else {
		for id := range s.pending {
			look[id] = struct{}{}
		}
	}
	s.settled, s.pending = false, map[domain.ObjectID]struct{}{}
	results, applied, failed, ok := s.applyDesired(ctx, look)
	if !ok {
		// Nothing more is written, deleted or acknowledged: the new
		// leader applies the snapshot in full.
		s.log.Warn("apply aborted: no longer leading", "version", snap.GetVersion(), "applied", applied)
		return false
	}
	if !s.leading(ctx) {
		s.log.Warn("apply aborted before garbage collection: no longer leading", "version", snap.GetVersion(), "applied", applied)
		return false
	}
	gcResults, deleted, held, gcFailed, ok := s.collectGarbage(ctx, snap.GetMissingClusters(), look)
	if !ok {
		s.log.Warn("garbage collection aborted: no longer leading", "version", snap.GetVersion(), "deleted", deleted)
		return false
	}
	s.settled = true
	failed += gcFailed
	results = append(results, gcResults...)

	written, statusFailed, statusResults := s.writeStatuses(ctx, snap.GetStatuses())
	failed += statusFailed
	results = append(results, statusResults...)

	s.mu.Lock()
	// Not copied: results is not changed after this; what is appended
	// below goes beyond the length kept, or into a new array.
	s.acked, s.ackResults = snap.GetVersion(), results[:len(results):len(results)]
	s.mu.Unlock()
	if s.cacerts != nil {
		// Issuing happens in the background; the acknowledgement carries
		// what the manager found so far, and reack sends it again when
		// that changes. It does not count as failed: the Istio objects
		// did apply.
		s.cacerts.SetDesired(snap.GetIssuedCertificates())
		results = append(results, s.cacerts.Results()...)
	}
	if s.envoy != nil {
		// The proxies' config does not depend on the Kubernetes objects:
		// it is handed on even when some of them failed.
		if err := s.envoy.Replicate(ctx, EnvoyConfigFromOutput(snap)); err != nil {
			s.log.Warn("replicating the Envoy config failed", "version", snap.GetVersion(), "error", err)
		}
	}

	if s.detection != nil && s.detection.Set(snap.GetGatewayDetector()) {
		// Like the proxies' config, it does not depend on the objects.
		s.log.Info("gateway detection from Settings", "version", snap.GetVersion(), "detector", snap.GetGatewayDetector().String())
	}

	s.mu.Lock()
	if failed == 0 {
		s.applied, s.failed = snap.GetVersion(), ""
	} else {
		s.failed = snap.GetVersion()
	}
	s.mu.Unlock()
	s.metrics.Applied(snap.GetVersion(), applied, failed, deleted)
	s.metrics.HeldDeletions(held)
	if held > 0 {
		s.log.Warn("deletions held: the output was built without the inputs of expected clusters", "version", snap.GetVersion(), "held", held, "missing_clusters", snap.GetMissingClusters())
	}
	s.log.Info("applied output snapshot", "version", snap.GetVersion(), "objects", len(s.list), "looked_at", lookedAt(look, len(s.list)), "written", applied, "failed", failed, "deleted", deleted, "statuses_written", written, "duration", time.Since(start))
	s.ack(ctx, snap.GetVersion(), results)
	return failed == 0
}

// ack sends an acknowledgement and records whether one is still owed.
func (s *Syncer) ack(ctx context.Context, version string, results []*snapshotv1.ApplyResult) {
	err := s.relay.Ack(ctx, version, results)
	s.mu.Lock()
	s.ackOwed = err != nil
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("acknowledging failed; will send it again", "version", version, "error", err)
	}
}

func (s *Syncer) owesAck() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ackOwed
}

// reack acknowledges the last acknowledged version again, with the cacerts
// manager's current results.
func (s *Syncer) reack(ctx context.Context) {
	s.mu.Lock()
	version, results := s.acked, slices.Clone(s.ackResults)
	s.mu.Unlock()
	if version == "" {
		return
	}
	if s.cacerts != nil {
		results = append(results, s.cacerts.Results()...)
	}
	s.ack(ctx, version, results)
}

// writeStatuses writes each status that differs from what was last written.
// A failure is reported as a REJECTED result naming the user's resource.
func (s *Syncer) writeStatuses(ctx context.Context, statuses []*snapshotv1.ResourceStatus) (written, failed int, results []*snapshotv1.ApplyResult) {
	if s.statuses == nil {
		return 0, 0, nil
	}
	// Forget resources that left the snapshot: one deleted and created
	// again starts at generation 1 with no status.
	present := make(map[statusKey]bool, len(statuses))
	for _, st := range statuses {
		present[statusKey{st.GetApiVersion(), st.GetKind(), st.GetNamespace(), st.GetName()}] = true
	}
	for k := range s.written {
		if !present[k] {
			delete(s.written, k)
		}
	}
	for _, st := range statuses {
		key := statusKey{st.GetApiVersion(), st.GetKind(), st.GetNamespace(), st.GetName()}
		want := strconv.FormatInt(st.GetObservedGeneration(), 10) + " " + string(st.GetStatus())
		if s.written[key] == want {
			continue
		}
		outcome, err := s.statuses.WriteStatus(ctx, st)
		if err != nil {
			failed++
			delete(s.written, key)
			results = append(results, &snapshotv1.ApplyResult{
				Ref:     &snapshotv1.ObjectRef{ApiVersion: key.apiVersion, Kind: key.kind, Namespace: key.namespace, Name: key.name},
				Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED,
				Error:   "write status: " + err.Error(),
			})
			s.log.Warn("writing a status failed", "kind", key.kind, "namespace", key.namespace, "name", key.name, "error", err)
			continue
		}
		switch outcome {
		case StatusWritten:
			written++
			s.written[key] = want
		case StatusCurrent:
			s.written[key] = want
		default:
			// Not remembered: the resource may come back at this generation.
		}
	}
	return written, failed, results
}
