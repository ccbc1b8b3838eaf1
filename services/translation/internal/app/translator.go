package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
)

// ErrInvalidInput is returned for an input that cannot be used.
var ErrInvalidInput = errors.New("invalid input")

// Config tunes the translator.
type Config struct {
	Domain domain.Options
	// Debounce is the least time between the end of one translation and
	// the start of the next. A change that arrives when none ran within
	// it is translated at once; changes during a translation or within
	// the interval after one are translated together at its end. Zero
	// translates every change at once.
	Debounce time.Duration
	// RetryInterval is how often unpublished outputs are retried.
	RetryInterval time.Duration
	// SafeStartWindow is how long publishing may be held back after a
	// start, or after the input store lost inputs, waiting for every
	// registered cluster to report (safe mode, DESIGN.md section 7). Zero
	// disables safe mode.
	SafeStartWindow time.Duration
	// Expected, when set, names the clusters every output depends on (see
	// ExpectedClusters). Safe mode then waits for them rather than for the
	// clusters with outputs in the output store, which a lost store
	// forgets. Nil keeps the output store as safe mode's only source, and
	// every output complete.
	Expected ExpectedClusters
	// ExpectedRefresh is how often Expected is read again; zero means
	// DefaultExpectedRefresh.
	ExpectedRefresh time.Duration
	// ExpectedManagement, with Expected, names the management cluster's
	// input when the plane reads that cluster's own resources (ingest's
	// watch). It is expected like a registered cluster: after a restart
	// with a lost store, safe mode waits for it too, and an output built
	// without it is incomplete, because the resources applied there (a
	// VirtualMesh, a ScopeGrant, policies) shape every cluster's output.
	// Empty: only the clusters Expected names.
	ExpectedManagement string
	// EncodingCacheBytes bounds the encodings of the last published
	// outputs that are kept, so that the next version of each copies its
	// unchanged objects rather than encoding them again
	// (snapshots.OutputEncoder): about the size of every cluster's output
	// (1.5 GB at the reference estate's 101 outputs of 14.5 MB). Outputs
	// beyond it are encoded whole each time. Zero keeps none.
	EncodingCacheBytes int64
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// TestOutputHook, when set, may change each output after translation,
	// before it is sealed and published. Tests use it to inject objects the
	// API server rejects; no flag sets it.
	TestOutputHook func(cluster string, out *snapshotv1.OutputSnapshot)
}

// DefaultExpectedRefresh is how often the expected clusters are read again.
const DefaultExpectedRefresh = 10 * time.Second

// Translator keeps the latest input of every cluster in memory, so that it
// goes on translating while the store is down, and publishes each changed
// output.
type Translator struct {
	cfg     Config
	source  InputSource
	publish OutputPublisher
	metrics Metrics
	log     *slog.Logger
	now     func() time.Time

	kick chan struct{}

	mu        sync.RWMutex
	inputs    map[string]*snapshotv1.InputSnapshot
	outputs   map[string]*snapshotv1.OutputSnapshot
	published map[string]string // cluster -> version in the publisher
	// encoders encode each cluster's outputs, keeping the last encoding
	// while the cache has room (Config.EncodingCacheBytes): publishOne
	// runs for many clusters at once, one goroutine per cluster.
	encMu    sync.Mutex
	encoders map[string]*clusterEncoder
	encKept  int64
	safe     safeMode
	// expected are the clusters Config.Expected last named, sorted; nil
	// until it has answered once. expectedAt is when it was last read.
	expected   []string
	expectedAt time.Time
	// failures are the objects each cluster's agent last reported it could
	// not apply, from reports (applied.go).
	failures map[string][]domain.ApplyFailure
	reports  ApplyReports

	// applied is what the last translation applied to each discovered
	// entity, for Describe. Guarded by mu; the state it points to is
	// guarded by stateMu, because incremental translation updates it.
	applied *domain.Applied
	stateMu sync.RWMutex
	// inc translates; only Run's goroutine uses it.
	inc *domain.Incremental

	// lastGood is the last valid version of every policy, kept in force
	// when an edit makes a policy invalid. Only Run's goroutine uses it.
	lastGood domain.LastGood
	// keeper mirrors lastGood and seen into a durable store; nil without
	// one.
	keeper *lastGoodKeeper
	// seen orders conflicting policies by the time the plane first saw
	// them. Only Run's goroutine uses it.
	seen *firstSeen
	// started is when Run started: publishing waits at most the safe-start
	// window for the stored last valid versions.
	started time.Time
	// decoding are the input versions claimed for decoding (claim.go).
	// Guarded by mu.
	decoding map[inputVersion]*decoding
	// wire holds the policy encodings of the inputs that arrived encoded
	// (sourceids.go). Guarded by mu.
	wire map[string]inputWire
	// ids are the SourceIDs of each cluster's last stamped input. Only
	// Run's goroutine uses them.
	ids map[string]stampedIDs
}

// safeMode holds back publishing until every cluster known to be
// registered has reported an input, or until the safe-start window passes.
// A cluster is known when it is expected (Config.Expected) or, without an
// expected source, when it has an output in the output store at start; and
// when it has an input. Guarded by Translator.mu.
type safeMode struct {
	on       bool
	since    time.Time
	known    map[string]bool
	reported map[string]bool
	// unsure is set while the registered clusters could not be listed:
	// safe mode then lasts until they are, or until the window passes.
	unsure bool
}

// alsoExpected names the clusters its source names and one more.
type alsoExpected struct {
	source  ExpectedClusters
	cluster string
}

func (a alsoExpected) ExpectedClusters(ctx context.Context) ([]string, error) {
	names, err := a.source.ExpectedClusters(ctx)
	if err != nil {
		return nil, err
	}
	return append(names, a.cluster), nil
}

// waiting returns the known clusters that have not reported, sorted.
func (s *safeMode) waiting() []string {
	var out []string
	for c := range s.known {
		if !s.reported[c] {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// NewTranslator returns a translator. Run starts it.
func NewTranslator(cfg Config, source InputSource, publish OutputPublisher, metrics Metrics, log *slog.Logger, opts ...TranslatorOption) *Translator {
	if metrics == nil {
		metrics = NopMetrics{}
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = time.Second
	}
	if cfg.ExpectedRefresh <= 0 {
		cfg.ExpectedRefresh = DefaultExpectedRefresh
	}
	if cfg.Expected != nil && cfg.ExpectedManagement != "" {
		cfg.Expected = alsoExpected{cfg.Expected, cfg.ExpectedManagement}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	t := &Translator{
		cfg: cfg, source: source, publish: publish, metrics: metrics, log: log, now: now,
		kick:      make(chan struct{}, 1),
		inc:       domain.NewIncremental(cfg.Domain),
		seen:      newFirstSeen(cfg.Domain.Management()),
		inputs:    map[string]*snapshotv1.InputSnapshot{},
		outputs:   map[string]*snapshotv1.OutputSnapshot{},
		published: map[string]string{},
		encoders:  map[string]*clusterEncoder{},
		failures:  map[string][]domain.ApplyFailure{},
		decoding:  map[inputVersion]*decoding{},
		wire:      map[string]inputWire{},
		ids:       map[string]stampedIDs{},
	}
	if cfg.SafeStartWindow > 0 {
		t.safe = safeMode{on: true, since: now(), known: map[string]bool{}, reported: map[string]bool{}, unsure: true}
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

// SafeMode reports whether publishing is held back, and the known clusters
// that have not reported an input yet.
func (t *Translator) SafeMode() (on bool, waiting []string) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if !t.safe.on {
		return false, nil
	}
	return true, t.safe.waiting()
}

// reportedLocked records that cluster has reported an input. t.mu is held.
func (t *Translator) reportedLocked(cluster string) {
	if t.safe.on {
		t.safe.known[cluster] = true
		t.safe.reported[cluster] = true
	}
}

// MissingClusters returns the expected clusters that have no input,
// sorted: outputs built now are incomplete. Nil without an expected source.
func (t *Translator) MissingClusters() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.missingLocked()
}

func (t *Translator) missingLocked() []string {
	var out []string
	for _, c := range t.expected {
		if t.inputs[c] == nil {
			out = append(out, c)
		}
	}
	return out
}

// loadExpected reads the expected clusters when they are due: at once
// while safe mode is unsure of them, else every ExpectedRefresh. In safe
// mode they are the clusters waited for. A change schedules a translation,
// which marks the outputs complete or not again.
func (t *Translator) loadExpected(ctx context.Context) {
	if t.cfg.Expected == nil {
		return
	}
	t.mu.RLock()
	due := (t.safe.on && t.safe.unsure) || t.now().Sub(t.expectedAt) >= t.cfg.ExpectedRefresh
	t.mu.RUnlock()
	if !due {
		return
	}
	names, err := t.cfg.Expected.ExpectedClusters(ctx)
	if err != nil {
		t.mu.Lock()
		// Retried at every tick while safe mode is unsure, else after
		// ExpectedRefresh; said once per refresh interval.
		warn := t.now().Sub(t.expectedAt) >= t.cfg.ExpectedRefresh
		t.expectedAt = t.now()
		t.mu.Unlock()
		if warn {
			t.log.Warn("reading the expected clusters failed; the last ones read stay in use, and safe mode waits for them or its window", "error", err)
		}
		return
	}
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	if names == nil {
		names = []string{}
	}
	t.mu.Lock()
	changed := !slices.Equal(t.expected, names) || t.expected == nil
	t.expected, t.expectedAt = names, t.now()
	if t.safe.on {
		known := map[string]bool{}
		for _, c := range names {
			known[c] = true
		}
		for c := range t.safe.reported {
			known[c] = true
		}
		t.safe.known, t.safe.unsure = known, false
	}
	missing := len(t.missingLocked())
	t.mu.Unlock()
	t.metrics.SetMissing(missing)
	if changed {
		t.log.Info("expected clusters", "clusters", names)
		t.schedule()
	}
}

// loadKnown learns the registered clusters: from the expected source when
// there is one, else from the outputs already published. Until it
// succeeds, safe mode cannot end before its window.
func (t *Translator) loadKnown(ctx context.Context) {
	if t.cfg.Expected != nil {
		t.loadExpected(ctx)
		return
	}
	t.mu.RLock()
	need := t.safe.on && t.safe.unsure
	t.mu.RUnlock()
	if !need {
		return
	}
	entries, err := t.publish.List(ctx)
	if err != nil {
		t.log.Warn("listing published outputs failed; safe mode waits for the store or the safe-start window", "error", err)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.safe.on {
		return
	}
	for _, e := range entries {
		t.safe.known[e.Cluster] = true
	}
	t.safe.unsure = false
}

// holdPublishing reports whether safe mode holds publishing back, and
// leaves safe mode once every known cluster has reported or the window has
// passed.
func (t *Translator) holdPublishing() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &t.safe
	if !s.on {
		return false
	}
	waiting := s.waiting()
	switch {
	case !s.unsure && len(waiting) == 0:
		t.log.Info("every registered cluster has reported; leaving safe mode", "clusters", len(s.known))
	case t.now().Sub(s.since) >= t.cfg.SafeStartWindow:
		// Clusters that have not reported get no output at all: their
		// published config stays as it is.
		t.log.Warn("safe-start window passed; leaving safe mode", "window", t.cfg.SafeStartWindow, "clusters_waiting", waiting)
	default:
		t.metrics.SetSafeMode(true, len(waiting))
		return true
	}
	*s = safeMode{}
	t.metrics.SetSafeMode(false, 0)
	return false
}

// registered lists the clusters safe mode must hear from after a store
// loss: the expected ones, or without an expected source those with an
// output in the output store.
func (t *Translator) registered(ctx context.Context) ([]string, bool) {
	if t.cfg.Expected != nil {
		names, err := t.cfg.Expected.ExpectedClusters(ctx)
		if err != nil {
			t.log.Warn("reading the expected clusters failed after a resync", "error", err)
			return nil, false
		}
		return names, true
	}
	entries, err := t.publish.List(ctx)
	if err != nil {
		t.log.Warn("listing published outputs failed after a resync", "error", err)
		return nil, false
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Cluster)
	}
	return names, true
}

// enterSafeModeIfMissing enters safe mode after a store loss when a
// registered cluster has no input in translation: it must report before
// anything is published. Inputs held in memory survive a store loss, so a
// store that restarted empty holds nothing back.
func (t *Translator) enterSafeModeIfMissing(ctx context.Context) {
	if t.cfg.SafeStartWindow <= 0 {
		return
	}
	names, ok := t.registered(ctx)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var missing []string
	for _, c := range names {
		if t.inputs[c] == nil {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return
	}
	slices.Sort(missing)
	if !t.safe.on {
		t.safe = safeMode{on: true, since: t.now(), known: map[string]bool{}, reported: map[string]bool{}}
	}
	for _, c := range missing {
		t.safe.known[c] = true
	}
	for c := range t.inputs {
		t.safe.known[c] = true
		t.safe.reported[c] = true
	}
	t.metrics.SetSafeMode(true, len(t.safe.waiting()))
	t.log.Warn("registered clusters have no input after a store loss; entering safe mode until they report", "clusters", missing, "window", t.cfg.SafeStartWindow)
}

// Submit records a cluster's new input snapshot and schedules a
// translation. An older or equal version is ignored.
func (t *Translator) Submit(cluster string, in *snapshotv1.InputSnapshot) error {
	return t.submit(cluster, in, nil)
}

// submit is Submit, with the encoding in was decoded from when it came
// encoded (nil if not).
func (t *Translator) submit(cluster string, in *snapshotv1.InputSnapshot, data []byte) error {
	if cluster == "" {
		return fmt.Errorf("%w: cluster is empty", ErrInvalidInput)
	}
	if in == nil {
		return fmt.Errorf("%w: snapshot is missing", ErrInvalidInput)
	}
	if in.GetCluster() != cluster {
		return fmt.Errorf("%w: snapshot names cluster %q, notice names %q", ErrInvalidInput, in.GetCluster(), cluster)
	}
	wire := policyWire(in, data)
	t.mu.Lock()
	changed := t.inputs[cluster].GetVersion() != in.GetVersion() || t.inputs[cluster] == nil
	if changed {
		t.inputs[cluster] = in
		if wire.in != nil {
			t.wire[cluster] = wire
		} else {
			delete(t.wire, cluster)
		}
	}
	t.reportedLocked(cluster)
	t.mu.Unlock()
	if changed {
		t.schedule()
	}
	return nil
}

// Output returns the latest output of a cluster.
func (t *Translator) Output(cluster string) (*snapshotv1.OutputSnapshot, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	o, ok := t.outputs[cluster]
	return o, ok
}

// OutputVersions returns the latest output version of every cluster.
func (t *Translator) OutputVersions() map[string]string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]string, len(t.outputs))
	for c, o := range t.outputs {
		out[c] = o.GetVersion()
	}
	return out
}

func (t *Translator) schedule() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// Run loads the stored inputs, follows store changes, and translates each
// change, or each burst of changes (see debouncer), until ctx ends.
func (t *Translator) Run(ctx context.Context) error {
	changes, err := t.source.Subscribe(ctx)
	if err != nil {
		// The store may be down at start. Translation still runs on what
		// ingest sends; the subscription is retried on every retry tick,
		// and the store is read again once it succeeds.
		t.log.Warn("input store subscription failed; relying on notices from ingest until it returns", "error", err)
		changes = nil
	}
	t.mu.Lock()
	if t.safe.on {
		t.safe.since = t.now()
		t.metrics.SetSafeMode(true, len(t.safe.waiting()))
	}
	t.started = t.now()
	t.mu.Unlock()
	t.loadLastGood(ctx)
	t.loadKnown(ctx)
	t.loadAll(ctx)
	t.holdPublishing() // leaves safe mode at once when nobody is waited for
	if t.keeper != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			t.writeLastGood(ctx)
		}()
		defer func() { <-done }()
	}
	if t.reports != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			t.followAcks(ctx)
		}()
		defer func() { <-done }()
	}

	retry := time.NewTicker(t.cfg.RetryInterval)
	defer retry.Stop()
	deb := debouncer{interval: t.cfg.Debounce}
	defer deb.stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case c, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			t.onStoreChange(ctx, c)
		case <-retry.C:
			if changes == nil {
				changes = t.resubscribe(ctx)
			}
			t.loadLastGood(ctx)
			t.loadKnown(ctx)
			t.publishPending(ctx)
		case <-t.kick:
			if deb.due() {
				t.translate(ctx)
				deb.ran()
			}
		case <-deb.wait:
			deb.fired()
			t.translate(ctx)
			deb.ran()
		}
	}
}

// resubscribe tries to follow the store again after its subscription
// failed or ended. On success it rereads every input, because notices sent
// meanwhile were missed.
func (t *Translator) resubscribe(ctx context.Context) <-chan snapshots.Change {
	changes, err := t.source.Subscribe(ctx)
	if err != nil {
		t.log.Debug("input store subscription still failing", "error", err)
		return nil
	}
	t.log.Info("following the input store again")
	t.resync(ctx)
	return changes
}

// resync rereads every input and publishes every output again. A resync
// follows a reconnection to the store, which may have restarted empty:
// what was published before cannot be trusted to still be there. Putting
// the same version again is harmless, and agents that hold it are sent
// nothing.
func (t *Translator) resync(ctx context.Context) {
	t.mu.Lock()
	clear(t.published)
	t.mu.Unlock()
	t.loadAll(ctx)
	t.enterSafeModeIfMissing(ctx)
	t.publishPending(ctx)
}

// debouncer spaces translations at least its interval apart, leading
// edge first: an isolated change is translated at once, and the changes of
// a burst after it are translated together once the interval has passed.
// Only Run's goroutine uses it.
type debouncer struct {
	interval time.Duration
	last     time.Time // when the last translation ended
	timer    *time.Timer
	// wait fires when a deferred translation is due; nil when none is.
	wait <-chan time.Time
}

// due reports whether a change that has just arrived is translated now.
// If not, a translation is deferred to the end of the interval (wait),
// unless one is already.
func (d *debouncer) due() bool {
	if d.wait != nil {
		return false
	}
	left := d.interval - time.Since(d.last)
	if d.last.IsZero() || left <= 0 {
		return true
	}
	if d.timer == nil {
		d.timer = time.NewTimer(left)
	} else {
		d.timer.Reset(left)
	}
	d.wait = d.timer.C
	return false
}

// fired records that the deferred translation is about to run.
func (d *debouncer) fired() { d.wait = nil }

// ran records that a translation has ended.
func (d *debouncer) ran() { d.last = time.Now() }

func (d *debouncer) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
}

func (t *Translator) loadAll(ctx context.Context) {
	entries, err := t.source.List(ctx)
	if err != nil {
		t.log.Warn("reading inputs from the store failed; using what is in memory", "error", err)
		return
	}
	for _, e := range entries {
		t.adopt(e.Cluster, e.Value)
	}
}

func (t *Translator) onStoreChange(ctx context.Context, c snapshots.Change) {
	if c.Resync {
		t.resync(ctx)
		return
	}
	// Ingest notifies after it stores, so its Notify of the same version
	// is often being decoded now: the claim waits for it rather than
	// decoding the input a second time.
	claim, err := t.ClaimInput(ctx, c.Cluster, c.Version)
	if err != nil || claim == nil {
		return
	}
	defer claim.Abandon()
	e, err := t.source.GetEncoded(ctx, c.Cluster)
	if err == nil {
		e.Value, err = e.Decoded()
	}
	if err != nil {
		t.log.Warn("reading an input from the store failed", "cluster", c.Cluster, "error", err)
		return
	}
	if err := claim.SubmitEncoded(e.Value, e.Data); err != nil {
		t.log.Warn("ignoring a stored input", "cluster", c.Cluster, "error", err)
	}
}

func (t *Translator) adopt(cluster string, in *snapshotv1.InputSnapshot) {
	if err := t.Submit(cluster, in); err != nil {
		t.log.Warn("ignoring a stored input", "cluster", cluster, "error", err)
	}
}

func (t *Translator) translate(ctx context.Context) {
	t.mu.RLock()
	inputs := maps.Clone(t.inputs)
	wire := maps.Clone(t.wire)
	t.mu.RUnlock()

	start := time.Now()
	// Acceptance order: the time the plane first saw each resource, not the
	// creation time a workload cluster sends.
	now := t.now()
	ids := make(map[string]domain.SourceIDs, len(wire))
	for c, in := range inputs {
		inputs[c] = t.seen.stamp(c, in, now)
		if id, ok := t.sourceIDs(c, in, inputs[c], wire[c]); ok {
			ids[c] = id
		}
	}
	// Apply failures and the test hook change outputs in place, so they
	// must be fresh ones: no output reused from the last translation, which
	// may be published already, is touched.
	failures := t.applyFailures()
	marking := len(failures) > 0 || t.cfg.TestOutputHook != nil
	if marking {
		t.inc.Invalidate()
	}
	// An output that nothing changes after translating (no marking, no
	// missing cluster) is published as soon as it is sealed, while the
	// others are still being sealed, when publishing is not held back.
	if !marking && t.publishesAsSealed() {
		t.inc.OnSealed(func(o *snapshotv1.OutputSnapshot) { t.publishIfNew(ctx, o) })
	} else {
		t.inc.OnSealed(nil)
	}
	// The incremental translator updates the state that Describe reads.
	t.stateMu.Lock()
	res, err := t.inc.TranslateWithIDs(inputs, ids, t.lastGood)
	t.stateMu.Unlock()
	t.metrics.ObserveTranslation(time.Since(start), err)
	if err != nil {
		// The last outputs stay in force.
		t.log.Error("translation failed; keeping the last outputs", "error", err)
		return
	}
	outputs := res.Outputs
	present := func(cluster string) bool { _, ok := inputs[cluster]; return ok }
	t.lastGood = carryOver(res.LastGood, t.lastGood, present)
	if t.keeper != nil {
		t.keeper.record(t.lastGood, t.seen, present)
	}
	t.finishOutputs(outputs, failures)
	outputs = t.markIncomplete(outputs)
	if marking {
		// The incremental translator keeps these outputs: the next
		// translation starts afresh.
		t.inc.Invalidate()
	}
	t.mu.Lock()
	for c, o := range outputs {
		t.outputs[c] = o
	}
	t.applied = res.Applied
	t.mu.Unlock()
	t.log.Debug("translated", "clusters", len(outputs), "duration", time.Since(start))
	t.publishPending(ctx)
}

// markIncomplete returns outputs with each marked as built without the
// expected clusters that have no input, if any. The marked outputs are
// new messages sharing the translated ones' fields, which the incremental
// translator keeps as they are.
func (t *Translator) markIncomplete(outputs map[string]*snapshotv1.OutputSnapshot) map[string]*snapshotv1.OutputSnapshot {
	t.mu.RLock()
	missing := t.missingLocked()
	t.mu.RUnlock()
	t.metrics.SetMissing(len(missing))
	if len(missing) == 0 {
		return outputs
	}
	marked := make(map[string]*snapshotv1.OutputSnapshot, len(outputs))
	for c, o := range outputs {
		marked[c] = withMissing(o, missing)
	}
	t.log.Warn("outputs built without the inputs of expected clusters; agents hold their deletions until those clusters report", "missing", missing, "outputs", len(outputs))
	return marked
}

// withMissing returns a sealed copy of o that names missing; the copy
// shares o's field values.
func withMissing(o *snapshotv1.OutputSnapshot, missing []string) *snapshotv1.OutputSnapshot {
	m := snapshots.ShallowCopy(o)
	m.MissingClusters = slices.Clone(missing)
	snapshots.SealOutput(m)
	return m
}

// publishPending publishes every output whose version the publisher does not
// hold yet. Failures are retried on the next tick. Nothing is published in
// safe mode; outputs exist only for clusters with an input, so a cluster
// whose input is missing never gets one.
func (t *Translator) publishPending(ctx context.Context) {
	if t.holdPublishing() || t.waitLastGood() {
		return
	}
	t.mu.RLock()
	var pending []*snapshotv1.OutputSnapshot
	for c, o := range t.outputs {
		if t.published[c] != o.GetVersion() {
			pending = append(pending, o)
		}
	}
	t.mu.RUnlock()
	slices.SortFunc(pending, func(a, b *snapshotv1.OutputSnapshot) int {
		return strings.Compare(a.GetCluster(), b.GetCluster())
	})
	t.forgetEncoders()
	// An edit of a federated service's policy changes the output of every
	// cluster that reaches it: each is encoded and stored on its own, on
	// as many goroutines as Go runs at once, in cluster order.
	next := make(chan *snapshotv1.OutputSnapshot)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(pending)) {
		wg.Go(func() {
			for o := range next {
				t.publishOne(ctx, o)
			}
		})
	}
	for _, o := range pending {
		next <- o
	}
	close(next)
	wg.Wait()
}

// publishesAsSealed reports whether outputs may be published as the
// translation seals them: publishing is not held back, and no expected
// cluster is missing (markIncomplete would publish marked copies).
func (t *Translator) publishesAsSealed() bool {
	if t.holdPublishing() || t.waitLastGood() {
		return false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.missingLocked()) == 0
}

// publishIfNew publishes o unless its version is published already.
func (t *Translator) publishIfNew(ctx context.Context, o *snapshotv1.OutputSnapshot) {
	t.mu.RLock()
	done := t.published[o.GetCluster()] == o.GetVersion()
	t.mu.RUnlock()
	if !done {
		t.publishOne(ctx, o)
	}
}

// publishOne encodes o and stores it; a failure is retried on the next
// tick.
func (t *Translator) publishOne(ctx context.Context, o *snapshotv1.OutputSnapshot) {
	// Encoded once, by hand and deterministically, with its table: the
	// store keeps both, and distribution sends the bytes as they are,
	// cutting deltas by the table.
	data, table, err := t.encode(o)
	if err == nil {
		err = t.publish.PutEncoded(ctx, o.GetCluster(), snapshots.Encoded[*snapshotv1.OutputSnapshot]{Version: o.GetVersion(), Value: o, Data: data, Table: table})
	}
	if err != nil {
		t.metrics.ObservePublishError(o.GetCluster())
		t.log.Warn("publishing an output failed; will retry", "cluster", o.GetCluster(), "version", o.GetVersion(), "error", err)
		return
	}
	t.metrics.ObserveOutput(o.GetCluster(), len(o.GetObjects()), len(data))
	t.mu.Lock()
	t.published[o.GetCluster()] = o.GetVersion()
	t.mu.Unlock()
	t.log.Info("published output", "cluster", o.GetCluster(), "version", o.GetVersion(), "objects", len(o.GetObjects()))
}

// clusterEncoder is a cluster's OutputEncoder and the bytes it keeps.
type clusterEncoder struct {
	enc  snapshots.OutputEncoder
	kept int64
}

// encode encodes o with its cluster's encoder, which keeps the encoding
// for the next version while the cache has room.
func (t *Translator) encode(o *snapshotv1.OutputSnapshot) (data, table []byte, err error) {
	t.encMu.Lock()
	e := t.encoders[o.GetCluster()]
	if e == nil {
		e = &clusterEncoder{}
		t.encoders[o.GetCluster()] = e
	}
	t.encMu.Unlock()
	data, table, err = e.enc.Encode(o)
	t.encMu.Lock()
	defer t.encMu.Unlock()
	t.encKept -= e.kept
	e.kept = 0
	if err == nil && t.encKept+int64(len(data)) <= t.cfg.EncodingCacheBytes {
		e.kept = int64(len(data))
		t.encKept += e.kept
	} else {
		e.enc.Reset()
	}
	t.metrics.SetEncodingCache(t.encKept)
	return data, table, err
}

// forgetEncoders drops the encoders of clusters that have no output.
func (t *Translator) forgetEncoders() {
	t.mu.RLock()
	defer t.mu.RUnlock()
	t.encMu.Lock()
	defer t.encMu.Unlock()
	for c, e := range t.encoders {
		if _, ok := t.outputs[c]; !ok {
			t.encKept -= e.kept
			delete(t.encoders, c)
		}
	}
}

// Refresh reads a cluster's input from the store, for a notice that carries
// no snapshot.
func (t *Translator) Refresh(ctx context.Context, cluster string) error {
	e, err := t.source.Get(ctx, cluster)
	if err != nil {
		return fmt.Errorf("read input of cluster %q: %w", cluster, err)
	}
	return t.Submit(cluster, e.Value)
}

// loadLastGood reads the stored last valid versions once. Those of
// resources that the last translation did not see valid are added to the
// ones in memory, and everything is translated again with them.
func (t *Translator) loadLastGood(ctx context.Context) {
	if t.keeper == nil || t.keeper.isLoaded() {
		return
	}
	stored, records, ok := t.keeper.load(ctx)
	t.metrics.SetLastGood(ok, 0)
	if !ok {
		return
	}
	t.lastGood = carryOver(t.lastGood, stored, func(string) bool { return false })
	t.seen.adopt(records)
	t.inc.Invalidate()
	t.schedule()
}

// waitLastGood reports whether publishing waits for the stored last valid
// versions: without them, an output would leave out every resource that is
// invalid now. It waits at most the safe-start window.
func (t *Translator) waitLastGood() bool {
	if t.keeper == nil || t.keeper.isLoaded() {
		return false
	}
	if t.now().Sub(t.started) < t.cfg.SafeStartWindow {
		return true
	}
	t.log.Error("the last valid versions could not be read within the safe-start window; publishing without them", "window", t.cfg.SafeStartWindow)
	return false
}

// writeLastGood writes the last valid versions that changed, and retries
// failed writes, until ctx ends.
func (t *Translator) writeLastGood(ctx context.Context) {
	retry := time.NewTicker(t.cfg.RetryInterval)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.keeper.wake:
		case <-retry.C:
		}
		t.keeper.flush(ctx)
		t.metrics.SetLastGood(t.keeper.isLoaded(), t.keeper.pendingCount())
	}
}
