package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"google.golang.org/protobuf/proto"
)

// ErrInvalidAccessLogs is returned for a batch of access-log entries that
// is refused as a whole.
var ErrInvalidAccessLogs = errors.New("invalid access-log batch")

// AccessLogBus carries accepted entries to the other replicas (Redis
// pub/sub). Every replica delivers its own entries locally, so the bus
// delivers only the other replicas' batches.
type AccessLogBus interface {
	Publish(ctx context.Context, entries []*observabilityv1.AccessLogEntry) error
	// Subscribe delivers the batches that other replicas publish until
	// ctx ends.
	Subscribe(ctx context.Context, deliver func([]*observabilityv1.AccessLogEntry)) error
}

// AccessLogMetrics records the access-log traffic.
type AccessLogMetrics interface {
	AccessLogsReceived(cluster string, n int)
	// AccessLogsDropped counts entries lost: reason "agent" (the agent's
	// queue was full), "too_large" (refused here) or "slow_watcher" (a
	// watcher's queue was full).
	AccessLogsDropped(cluster, reason string, n int)
}

type nopAccessLogMetrics struct{}

func (nopAccessLogMetrics) AccessLogsReceived(string, int)        {}
func (nopAccessLogMetrics) AccessLogsDropped(string, string, int) {}

// AccessLogOptions bound the access-log buffers.
type AccessLogOptions struct {
	// BufferSize is how many entries the ring keeps for tails.
	BufferSize int
	// WatcherQueue is how many entries a watcher may fall behind before
	// its oldest are dropped.
	WatcherQueue int
	// MaxBatch is the most entries one push message may carry.
	MaxBatch int
	// MaxEntryBytes is the largest entry kept (its protobuf size).
	MaxEntryBytes int
}

// DefaultAccessLogOptions returns the defaults.
func DefaultAccessLogOptions() AccessLogOptions {
	return AccessLogOptions{BufferSize: 10000, WatcherQueue: 1000, MaxBatch: 5000, MaxEntryBytes: 16 << 10}
}

// Validate checks the options.
func (o AccessLogOptions) Validate() error {
	var errs []error
	if o.BufferSize <= 0 {
		errs = append(errs, errors.New("access-log buffer size must be positive"))
	}
	if o.WatcherQueue <= 0 {
		errs = append(errs, errors.New("access-log watcher queue must be positive"))
	}
	if o.MaxBatch <= 0 {
		errs = append(errs, errors.New("access-log batch limit must be positive"))
	}
	if o.MaxEntryBytes <= 0 {
		errs = append(errs, errors.New("access-log entry size limit must be positive"))
	}
	return errors.Join(errs...)
}

// AccessLogFilter selects entries; empty fields match anything.
type AccessLogFilter struct {
	Cluster   string
	Namespace string
	// WorkloadPrefix is a prefix of the pod name.
	WorkloadPrefix string
	// Policy is an AccessLogPolicy as "<namespace>/<name>".
	Policy          string
	MinResponseCode uint32
}

// Validate checks the filter.
func (f AccessLogFilter) Validate() error {
	if f.Policy != "" {
		ns, name, ok := strings.Cut(f.Policy, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("%w: policy %q must be <namespace>/<name>", ErrInvalidAccessLogs, f.Policy)
		}
	}
	return nil
}

// Match says whether e passes the filter.
func (f AccessLogFilter) Match(e *observabilityv1.AccessLogEntry) bool {
	if f.Cluster != "" && e.GetCluster() != f.Cluster ||
		f.Namespace != "" && e.GetWorkload().GetNamespace() != f.Namespace ||
		f.WorkloadPrefix != "" && !strings.HasPrefix(e.GetWorkload().GetName(), f.WorkloadPrefix) ||
		e.GetResponseCode() < f.MinResponseCode {
		return false
	}
	if f.Policy == "" {
		return true
	}
	ns, name, _ := strings.Cut(f.Policy, "/")
	for _, p := range e.GetPolicies() {
		if p.GetNamespace() == ns && p.GetName() == name {
			return true
		}
	}
	return false
}

// AccessLogs keeps the access-log entries that agents push: a bounded ring
// per replica for tails, and a bounded queue per watcher for follows.
// Pushers never wait for watchers: a slow watcher loses its oldest
// entries.
type AccessLogs struct {
	opts    AccessLogOptions
	bus     AccessLogBus
	metrics AccessLogMetrics
	log     *slog.Logger

	mu       sync.Mutex
	ring     []*observabilityv1.AccessLogEntry
	next     int // where the next entry goes
	full     bool
	watchers map[*AccessLogWatcher]struct{}
}

// NewAccessLogs returns the access-log buffer. bus may be nil (one
// replica, or no Redis): entries are then seen by this replica's
// watchers only.
func NewAccessLogs(opts AccessLogOptions, bus AccessLogBus, metrics AccessLogMetrics, log *slog.Logger) (*AccessLogs, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if metrics == nil {
		metrics = nopAccessLogMetrics{}
	}
	return &AccessLogs{
		opts: opts, bus: bus, metrics: metrics, log: log,
		ring:     make([]*observabilityv1.AccessLogEntry, opts.BufferSize),
		watchers: map[*AccessLogWatcher]struct{}{},
	}, nil
}

// Push accepts a batch from an agent of cluster. Every entry must name
// that cluster; a batch that is too long or names another cluster is
// refused whole. Entries larger than the limit are dropped and counted.
// It returns how many entries were accepted.
func (a *AccessLogs) Push(ctx context.Context, cluster string, entries []*observabilityv1.AccessLogEntry, agentDropped uint64) (int, error) {
	if agentDropped > 0 {
		a.metrics.AccessLogsDropped(cluster, "agent", int(min(agentDropped, uint64(1<<31))))
	}
	if len(entries) > a.opts.MaxBatch {
		return 0, fmt.Errorf("%w: %d entries in one message, at most %d", ErrInvalidAccessLogs, len(entries), a.opts.MaxBatch)
	}
	for i, e := range entries {
		if e == nil {
			return 0, fmt.Errorf("%w: entry %d is empty", ErrInvalidAccessLogs, i)
		}
		if e.GetCluster() != cluster {
			return 0, fmt.Errorf("%w: entry %d names cluster %q, but the caller is cluster %q", ErrInvalidAccessLogs, i, e.GetCluster(), cluster)
		}
	}
	kept := entries
	if tooLarge := countTooLarge(entries, a.opts.MaxEntryBytes); tooLarge > 0 {
		kept = make([]*observabilityv1.AccessLogEntry, 0, len(entries)-tooLarge)
		for _, e := range entries {
			if proto.Size(e) <= a.opts.MaxEntryBytes {
				kept = append(kept, e)
			}
		}
		a.metrics.AccessLogsDropped(cluster, "too_large", tooLarge)
	}
	if len(kept) == 0 {
		return 0, nil
	}
	a.metrics.AccessLogsReceived(cluster, len(kept))
	a.deliver(kept)
	if a.bus != nil {
		if err := a.bus.Publish(ctx, kept); err != nil {
			// The entries are still here for this replica's watchers;
			// losing them elsewhere is better than refusing the agent.
			a.log.Warn("publishing access logs to the other replicas failed", "cluster", cluster, "entries", len(kept), "error", err)
		}
	}
	return len(kept), nil
}

func countTooLarge(entries []*observabilityv1.AccessLogEntry, limit int) int {
	n := 0
	for _, e := range entries {
		if proto.Size(e) > limit {
			n++
		}
	}
	return n
}

// Deliver adds entries that another replica accepted.
func (a *AccessLogs) Deliver(entries []*observabilityv1.AccessLogEntry) { a.deliver(entries) }

func (a *AccessLogs) deliver(entries []*observabilityv1.AccessLogEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range entries {
		a.ring[a.next] = e
		a.next++
		if a.next == len(a.ring) {
			a.next, a.full = 0, true
		}
	}
	for w := range a.watchers {
		w.offer(entries)
	}
}

// Tail returns up to n buffered entries that match f, oldest first.
func (a *AccessLogs) Tail(f AccessLogFilter, n int) []*observabilityv1.AccessLogEntry {
	if n <= 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tailLocked(f, n)
}

func (a *AccessLogs) tailLocked(f AccessLogFilter, n int) []*observabilityv1.AccessLogEntry {
	var out []*observabilityv1.AccessLogEntry
	size := a.next
	if a.full {
		size = len(a.ring)
	}
	for i := 1; i <= size && len(out) < n; i++ {
		e := a.ring[(a.next-i+len(a.ring))%len(a.ring)]
		if f.Match(e) {
			out = append(out, e)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Watch returns the tail and, atomically with it, a watcher of the
// entries that arrive afterwards. Close the watcher when done.
func (a *AccessLogs) Watch(f AccessLogFilter, tail int) ([]*observabilityv1.AccessLogEntry, *AccessLogWatcher) {
	w := &AccessLogWatcher{a: a, filter: f, limit: a.opts.WatcherQueue, ready: make(chan struct{}, 1)}
	a.mu.Lock()
	defer a.mu.Unlock()
	var first []*observabilityv1.AccessLogEntry
	if tail > 0 {
		first = a.tailLocked(f, tail)
	}
	a.watchers[w] = struct{}{}
	return first, w
}

// Watchers returns how many watchers are open.
func (a *AccessLogs) Watchers() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.watchers)
}

// RunBus delivers the other replicas' entries until ctx ends; without a
// bus it returns at once.
func (a *AccessLogs) RunBus(ctx context.Context) error {
	if a.bus == nil {
		return nil
	}
	return a.bus.Subscribe(ctx, a.Deliver)
}

// AccessLogWatcher is one follower's bounded queue.
type AccessLogWatcher struct {
	a      *AccessLogs
	filter AccessLogFilter
	limit  int
	ready  chan struct{}

	// Guarded by a.mu.
	queue   []*observabilityv1.AccessLogEntry
	dropped int
}

// offer queues the matching entries, dropping the oldest beyond the
// limit. Called with a.mu held.
func (w *AccessLogWatcher) offer(entries []*observabilityv1.AccessLogEntry) {
	added := false
	for _, e := range entries {
		if !w.filter.Match(e) {
			continue
		}
		w.queue = append(w.queue, e)
		added = true
	}
	if over := len(w.queue) - w.limit; over > 0 {
		for _, e := range w.queue[:over] {
			w.a.metrics.AccessLogsDropped(e.GetCluster(), "slow_watcher", 1)
		}
		w.dropped += over
		w.queue = append(w.queue[:0:0], w.queue[over:]...)
	}
	if added {
		select {
		case w.ready <- struct{}{}:
		default:
		}
	}
}

// Next waits for entries and returns them with how many were dropped
// since the previous call because the watcher fell behind.
func (w *AccessLogWatcher) Next(ctx context.Context) ([]*observabilityv1.AccessLogEntry, int, error) {
	for {
		w.a.mu.Lock()
		q, dropped := w.queue, w.dropped
		w.queue, w.dropped = nil, 0
		w.a.mu.Unlock()
		if len(q) > 0 || dropped > 0 {
			return q, dropped, nil
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-w.ready:
		}
	}
}

// Close stops the watcher.
func (w *AccessLogWatcher) Close() {
	w.a.mu.Lock()
	defer w.a.mu.Unlock()
	delete(w.a.watchers, w)
	w.queue = nil
}
