package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/proto"
)

// ErrInvalidAck is returned for an acknowledgement that cannot be recorded.
var ErrInvalidAck = errors.New("invalid acknowledgement")

// ErrAckNotSent is returned for an acknowledgement of a version that was
// not sent to the cluster (or is not among the KeepSent last sent). It
// wraps ErrInvalidAck.
var ErrAckNotSent = fmt.Errorf("%w: version not sent to the cluster", ErrInvalidAck)

// Distributor serves output snapshots to watching agents. It follows the
// store's change notices once for the whole replica and wakes only the
// watchers of the cluster that changed. A watcher's wake-up channel holds at
// most one signal, so a slow agent never blocks others and is simply sent
// the newest version when it is ready.
type Distributor struct {
	source  OutputSource
	acks    AckStore
	metrics Metrics
	log     *slog.Logger
	now     func() time.Time

	// resyncEvery bounds how long a missed notice can delay a watcher.
	resyncEvery time.Duration
	// maxSendBytes bounds the encoded size of a snapshot sent to an agent;
	// zero means no bound.
	maxSendBytes int

	// replica names this process in the store's watch marks.
	replica string
	// indexes keeps the output indexes deltas are computed from; nil sends
	// whole snapshots only.
	indexes IndexStore

	// reads holds a token for each watch reading and scanning an output.
	reads chan struct{}

	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{}
}

// markTTL is how long a watch mark lives without renewal; Run renews the
// marks of this replica's clusters every resyncEvery, which is shorter.
const markTTL = 90 * time.Second

// NewDistributor returns a distributor. Run must be running for watchers to
// see changes.
func NewDistributor(source OutputSource, acks AckStore, metrics Metrics, log *slog.Logger, opts ...DistributorOption) *Distributor {
	if metrics == nil {
		metrics = NopMetrics{}
	}
	d := &Distributor{
		source: source, acks: acks, metrics: metrics, log: log, now: time.Now,
		resyncEvery: 30 * time.Second,
		watchers:    map[string]map[chan struct{}]struct{}{},
		replica:     replicaID(),
		reads:       make(chan struct{}, 2*runtime.GOMAXPROCS(0)),
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// DistributorOption sets an optional bound or collaborator of a
// Distributor.
type DistributorOption func(*Distributor)

// WithMaxConcurrentReads bounds how many watches read and scan an output
// at once (twice the CPUs Go uses by default): the memory a change of
// every cluster's output takes is that many outputs, not all of them.
func WithMaxConcurrentReads(n int) DistributorOption {
	return func(d *Distributor) { d.reads = make(chan struct{}, max(n, 1)) }
}

// acquireRead takes a read token; false when ctx ended first.
func (d *Distributor) acquireRead(ctx context.Context) bool {
	select {
	case d.reads <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (d *Distributor) releaseRead() { <-d.reads }

// replicaID is unique per process: the host name and a random suffix.
func replicaID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%s", host, hex.EncodeToString(b))
}

// WithMaxSendBytes bounds the encoded (uncompressed) size of a snapshot
// sent to an agent. A larger snapshot is not sent: the agent keeps what it
// has, and the refusal is logged and counted.
func WithMaxSendBytes(n int) DistributorOption {
	return func(d *Distributor) { d.maxSendBytes = n }
}

// WithIndexes makes the distributor send deltas to agents that accept
// them, from the output indexes kept in store.
func WithIndexes(store IndexStore) DistributorOption {
	return func(d *Distributor) { d.indexes = store }
}

// Run follows the store's changes until ctx ends. When the subscription
// fails it retries, and wakes every watcher after each new subscription.
func (d *Distributor) Run(ctx context.Context) error {
	for {
		changes, err := d.source.Subscribe(ctx)
		if err != nil {
			d.log.Warn("output store subscription failed; retrying", "error", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
				continue
			}
		}
		d.wakeAll()
		ticker := time.NewTicker(d.resyncEvery)
	loop:
		for {
			select {
			case <-ctx.Done():
				ticker.Stop()
				return nil
			case <-ticker.C:
				d.wakeAll()
				d.renewMarks(ctx)
			case c, ok := <-changes:
				if !ok {
					break loop
				}
				if c.Resync {
					d.wakeAll()
				} else {
					d.wake(c.Cluster)
				}
			}
		}
		ticker.Stop()
	}
}

func (d *Distributor) subscribe(ctx context.Context, cluster string) chan struct{} {
	ch := make(chan struct{}, 1)
	d.mu.Lock()
	first := d.watchers[cluster] == nil
	if first {
		d.watchers[cluster] = map[chan struct{}]struct{}{}
	}
	d.watchers[cluster][ch] = struct{}{}
	d.mu.Unlock()
	if first {
		d.mark(ctx, cluster, d.now().Add(markTTL))
	}
	return ch
}

func (d *Distributor) unsubscribe(ctx context.Context, cluster string, ch chan struct{}) {
	d.mu.Lock()
	delete(d.watchers[cluster], ch)
	last := len(d.watchers[cluster]) == 0
	if last {
		delete(d.watchers, cluster)
	}
	d.mu.Unlock()
	if last {
		// The watch's own context has ended; the mark still goes.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		d.mark(ctx, cluster, time.Time{})
	}
}

// mark records in the store that this replica serves cluster (until is
// non-zero) or no longer does. A failure only makes ListAcks less exact
// until the next renewal, so it is logged.
func (d *Distributor) mark(ctx context.Context, cluster string, until time.Time) {
	if err := d.acks.MarkWatching(ctx, cluster, d.replica, until); err != nil {
		d.log.Warn("recording a watch in the store failed", "cluster", cluster, "error", err)
	}
}

func (d *Distributor) renewMarks(ctx context.Context) {
	d.mu.Lock()
	clusters := make([]string, 0, len(d.watchers))
	for c := range d.watchers {
		clusters = append(clusters, c)
	}
	d.mu.Unlock()
	until := d.now().Add(markTTL)
	for _, c := range clusters {
		d.mark(ctx, c, until)
	}
}

func (d *Distributor) wake(cluster string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for ch := range d.watchers[cluster] {
		signal(ch)
	}
}

func (d *Distributor) wakeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, set := range d.watchers {
		for ch := range set {
			signal(ch)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Watch sends the cluster's output snapshot each time its version differs
// from the one the agent last had, starting from have. It returns when ctx
// ends or send fails.
func (d *Distributor) Watch(ctx context.Context, cluster, have string, send func(*snapshotv1.OutputSnapshot) error) error {
	return d.WatchUpdates(ctx, cluster, WatchRequest{Have: have}, func(u Update) error {
		o := &snapshotv1.OutputSnapshot{}
		if err := proto.Unmarshal(u.Snapshot, o); err != nil {
			return fmt.Errorf("decode output version %s: %w", u.Version, err)
		}
		return send(o)
	})
}

// WatchRequest is what an agent asks of a watch.
type WatchRequest struct {
	// Have is the version the agent holds; empty when none.
	Have string
	// AcceptDelta says the agent takes deltas; DeltaBase is the version it
	// holds in full, which the first delta may be from.
	AcceptDelta bool
	DeltaBase   string
}

// Update is what a watch sends, in its wire encoding: a whole
// snapshot (an encoded snapshotv1.OutputSnapshot), or a delta from a
// version the agent holds in full (an encoded snapshotv1.OutputDelta).
// The bytes are shared: nobody may modify them.
type Update struct {
	Version  string
	Snapshot []byte
	Delta    []byte
}

// WatchUpdates is Watch for agents that may take deltas: when the agent
// accepts them and the index of the version it holds in full is kept, a
// new version goes out as a delta from it, if that is smaller than the
// whole snapshot. After each update the agent holds its version in full.
func (d *Distributor) WatchUpdates(ctx context.Context, cluster string, req WatchRequest, send func(Update) error) error {
	wake := d.subscribe(ctx, cluster)
	defer d.unsubscribe(ctx, cluster, wake)
	d.metrics.WatchStarted(cluster)
	defer d.metrics.WatchEnded(cluster)

	have := req.Have
	base := ""
	if req.AcceptDelta && d.indexes != nil {
		base = req.DeltaBase
	}
	signal(wake)  // look once at the start
	refused := "" // the version refused as too large, logged once
	// held: the agent holds a version that was not sent on this watch,
	// checked when it is (or becomes) the current one.
	held := have != ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
		version, err := d.source.Version(ctx, cluster)
		if err == nil && version == have && held {
			held = false
			if !d.remembersSent(ctx, cluster, have) {
				// The store forgot sending it (it was emptied, or the
				// replica that sent it died before recording it), and
				// may have lost its acknowledgement too: the cluster
				// would show as behind until the next version. Send it
				// again (a delta from itself when its index is kept):
				// the agent finds nothing to write and acknowledges it.
				have = ""
			}
		}
		if errors.Is(err, snapshots.ErrNotFound) || (err == nil && version == have) {
			continue
		}
		if err != nil {
			// The store is unreachable: the agent keeps what it has. The
			// resync ticker brings us back here.
			d.log.Warn("reading an output version failed", "cluster", cluster, "error", err)
			continue
		}
		// At most d.reads watches read and scan an output at once: an edit
		// of a federated service's policy changes every cluster's output
		// together, and each is read whole.
		if !d.acquireRead(ctx) {
			return nil
		}
		p := func() prepared {
			defer d.releaseRead()
			return d.prepare(ctx, cluster, req, have, base, refused)
		}()
		u, scan, size, full := p.update, p.scan, p.size, p.full
		if p.notDecoding != "" {
			refused = p.notDecoding
		}
		if !p.prepared {
			continue
		}
		if d.maxSendBytes > 0 && size > d.maxSendBytes {
			// Sending it would end the stream with ResourceExhausted and
			// the agent would redial into the same failure. Keep the
			// stream: the agent keeps what it has, and a smaller version
			// goes out as soon as there is one.
			refused = u.Version
			d.metrics.SnapshotRefused(cluster, size)
			d.log.Error("output snapshot is larger than the message size limit; not sent",
				"cluster", cluster, "version", u.Version, "bytes", size, "max_send_bytes", d.maxSendBytes)
			continue
		}
		// Recorded before sending: the agent may ack before send returns.
		if err := d.acks.RecordSent(ctx, cluster, sentVersion(u.Version, scan)); err != nil {
			// Its ack will be refused and the cluster reported behind
			// until the next version; the agent still gets this one.
			d.log.Warn("recording a sent version failed", "cluster", cluster, "version", u.Version, "error", err)
		}
		if err := send(u); err != nil {
			return fmt.Errorf("send version %s to cluster %q: %w", u.Version, cluster, err)
		}
		if u.Delta != nil {
			d.metrics.DeltaSent(cluster, size, full)
		} else {
			d.metrics.SnapshotSent(cluster, size)
		}
		have, base, held = u.Version, u.Version, false
	}
}

// prepared is an output read and made ready to send: the update, its
// scan, its size and the whole snapshot's. notDecoding names a stored
// version that does not decode (not to be read again).
type prepared struct {
	update      Update
	scan        *snapshots.OutputScan
	size, full  int
	prepared    bool
	notDecoding string
}

// prepare reads the cluster's output and makes the update for an agent
// that holds have (in full: base), unless the output is have or refused.
func (d *Distributor) prepare(ctx context.Context, cluster string, req WatchRequest, have, base, refused string) (p prepared) {
	e, err := d.source.GetEncoded(ctx, cluster)
	if err != nil {
		d.log.Warn("reading an output failed", "cluster", cluster, "error", err)
		return p
	}
	if e.Version == have || e.Version == refused {
		return p
	}
	// The output is sent as translation stored it, whole or cut
	// into a delta: never decoded here (13 MB and 21,000 objects
	// for one cluster at the reference estate).
	scan := d.scan(cluster, e)
	if scan == nil {
		p.notDecoding = e.Version
		return p
	}
	p.full = scan.Size()
	if req.AcceptDelta && d.indexes != nil {
		delta, err := d.delta(ctx, cluster, base, e.Version, scan)
		if err != nil {
			// The table does not describe what it is stored
			// with: scanned whole, the delta is cut again.
			d.log.Warn("an output's table does not match its encoding; scanning it whole", "cluster", cluster, "version", e.Version, "error", err)
			if scan = d.scan(cluster, snapshots.Encoded[*snapshotv1.OutputSnapshot]{Version: e.Version, Data: e.Data}); scan == nil {
				p.notDecoding = e.Version
				return p
			}
			delta, _ = d.delta(ctx, cluster, base, e.Version, scan)
		}
		if delta != nil && len(delta) < p.full {
			p.update, p.size = Update{Version: e.Version, Delta: delta}, len(delta)
		}
	}
	if p.update.Delta == nil {
		// Sent whole: every object checked first.
		verified, err := scan.Verified()
		if err != nil {
			d.log.Error("a stored output does not decode; not sent", "cluster", cluster, "version", e.Version, "error", err)
			p.notDecoding = e.Version
			return p
		}
		scan = verified
		p.update, p.size = Update{Version: e.Version, Snapshot: scan.Data()}, p.full
	}
	p.scan, p.prepared = scan, true
	return p
}

// scan returns the scan of a stored output: by its table when translation
// stored one that matches it, else of every byte; nil when the output
// does not decode (logged).
func (d *Distributor) scan(cluster string, e snapshots.Encoded[*snapshotv1.OutputSnapshot]) *snapshots.OutputScan {
	if e.Table != nil {
		scan, err := snapshots.ScanOutputTable(e.Data, e.Table)
		if err == nil {
			return scan
		}
		d.log.Warn("an output's table does not match its encoding; scanning it whole", "cluster", cluster, "version", e.Version, "error", err)
	}
	scan, err := snapshots.ScanOutput(e.Data)
	if err != nil {
		d.log.Error("a stored output does not decode; not sent", "cluster", cluster, "version", e.Version, "error", err)
		return nil
	}
	return scan
}

// delta returns the encoded delta from base to the scanned version, or
// nil when there is none to send: no base, or its index is not kept. It
// keeps the version's index either way, for the next delta from it. An
// error means the scan's table does not match its encoding: nothing is
// kept then.
func (d *Distributor) delta(ctx context.Context, cluster, base, version string, scan *snapshots.OutputScan) ([]byte, error) {
	var from snapshots.OutputIndex
	var err error
	if base != "" {
		from, err = d.indexes.GetIndex(ctx, cluster, base)
		if err != nil && !errors.Is(err, snapshots.ErrNotFound) {
			d.log.Warn("reading an output index failed; sending the whole snapshot", "cluster", cluster, "version", base, "error", err)
		}
	}
	var delta []byte
	if base != "" && err == nil {
		if delta, err = scan.AppendDelta(nil, base, from); err != nil {
			return nil, err
		}
	}
	if err := d.indexes.PutIndex(ctx, cluster, version, scan.Index); err != nil {
		// The next version goes out whole.
		d.log.Warn("keeping an output index failed", "cluster", cluster, "version", version, "error", err)
	}
	return delta, nil
}

// sentVersion is what an ack of the scanned output may hold.
func sentVersion(version string, o *snapshots.OutputScan) SentVersion {
	return SentVersion{Version: version, Objects: o.Objects, Results: o.Objects + o.Statuses + o.IssuedCertificates}
}

// remembersSent reports whether the store remembers sending version to
// cluster. A store it cannot read counts as remembering: nothing is sent
// again on a guess.
func (d *Distributor) remembersSent(ctx context.Context, cluster, version string) bool {
	sent, err := d.acks.SentVersions(ctx, cluster)
	if err != nil {
		d.log.Warn("reading the versions sent failed", "cluster", cluster, "error", err)
		return true
	}
	return slices.ContainsFunc(sent, func(s SentVersion) bool { return s.Version == version })
}

// Snapshot returns the cluster's current output snapshot, or
// snapshots.ErrNotFound.
func (d *Distributor) Snapshot(ctx context.Context, cluster string) (*snapshotv1.OutputSnapshot, error) {
	e, err := d.source.Get(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return e.Value, nil
}

// Ack records the outcome of applying a version. cluster comes from the
// caller's certificate. Only a version recently sent to that cluster is
// recorded, with at most as many results as its output holds (objects,
// statuses and issued certificates) plus the deletions of objects that an
// earlier output held: anything else would record what the agent was never
// asked to do, and hold the plane's memory and store with it.
func (d *Distributor) Ack(ctx context.Context, cluster, version string, results []*snapshotv1.ApplyResult) error {
	return d.AckCounted(ctx, cluster, version, results, AckCounts{})
}

// AckCounts are the outcomes an agent counted instead of listing them one
// by one: objects, statuses and certificates applied, and objects deleted.
type AckCounts struct{ Applied, Deleted int }

// AckCounted is Ack for an agent that lists only the outcomes the plane
// needs one by one (all but APPLIED and DELETED) and counts the rest. The
// counts are held to the same bound as the results: together they may not
// exceed what the output holds plus the deletions of an earlier one.
func (d *Distributor) AckCounted(ctx context.Context, cluster, version string, results []*snapshotv1.ApplyResult, counts AckCounts) error {
	if version == "" {
		return fmt.Errorf("%w: version is empty", ErrInvalidAck)
	}
	if counts.Applied < 0 || counts.Deleted < 0 {
		return fmt.Errorf("%w: negative counts", ErrInvalidAck)
	}
	if err := d.checkAck(ctx, cluster, version, len(results)+counts.Applied+counts.Deleted); err != nil {
		return err
	}
	errs := 0
	for _, r := range results {
		if r.GetOutcome() == snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED || r.GetOutcome() == snapshotv1.ApplyOutcome_APPLY_OUTCOME_CONFLICT {
			errs++
		}
	}
	rec := AckRecord{Cluster: cluster, Version: version, Results: results, Applied: counts.Applied, Deleted: counts.Deleted, ApplyErrors: errs, AckedAt: d.now()}
	if err := d.acks.PutAck(ctx, rec); err != nil {
		return fmt.Errorf("record ack of cluster %q: %w", cluster, err)
	}
	d.metrics.Acked(cluster, errs)
	return nil
}

// checkAck refuses an ack of a version not sent to cluster, or with more
// results than it may hold.
func (d *Distributor) checkAck(ctx context.Context, cluster, version string, outcomes int) error {
	sent, err := d.acks.SentVersions(ctx, cluster)
	if err != nil {
		return fmt.Errorf("read the versions sent to cluster %q: %w", cluster, err)
	}
	i := slices.IndexFunc(sent, func(s SentVersion) bool { return s.Version == version })
	if i < 0 {
		d.metrics.AckRefused(cluster, "not-sent")
		return fmt.Errorf("%w: %s was not sent to cluster %q (or is not among the %d versions sent last); the ack is not recorded", ErrAckNotSent, version, cluster, KeepSent)
	}
	// Deleted objects are those of earlier outputs, which the store
	// remembers only by count: the largest of them bounds the deletions.
	deletable := 0
	for _, s := range sent {
		deletable = max(deletable, s.Objects)
	}
	if limit := sent[i].Results + deletable; outcomes > limit {
		d.metrics.AckRefused(cluster, "too-many-results")
		return fmt.Errorf("%w: %d results for version %s, which holds %d objects, statuses and certificates (at most %d results, with %d deletions); the ack is not recorded",
			ErrInvalidAck, outcomes, version, sent[i].Results, limit, deletable)
	}
	return nil
}

// ListAcks returns the latest acknowledgement of each cluster, with the
// newest published version.
func (d *Distributor) ListAcks(ctx context.Context) ([]AckRecord, map[string]string, error) {
	recs, err := d.acks.ListAcks(ctx)
	if err != nil {
		return nil, nil, err
	}
	latest := map[string]string{}
	for _, r := range recs {
		if v, err := d.source.Version(ctx, r.Cluster); err == nil {
			latest[r.Cluster] = v
		}
	}
	return recs, latest, nil
}

// Watched returns the clusters that an agent watches on any replica, as
// the store knows it; with a store only this replica uses, this replica's.
func (d *Distributor) Watched(ctx context.Context) (map[string]bool, error) {
	return d.acks.Watched(ctx, d.now())
}

// Connected reports whether a cluster has a watcher on this replica.
func (d *Distributor) Connected(cluster string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.watchers[cluster]) > 0
}
