package app

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
)

// AccessLogSender opens batch streams to the management plane (ingest's
// PushAccessLogs).
type AccessLogSender interface {
	OpenAccessLogs(ctx context.Context) (AccessLogStream, error)
}

// AccessLogStream is one open PushAccessLogs stream.
type AccessLogStream interface {
	// Send sends one batch, with the entries dropped since the previous
	// batch.
	Send(entries []*observabilityv1.AccessLogEntry, dropped uint64) error
	Close() error
}

// AccessLogMetrics counts what the access-log sink does.
type AccessLogMetrics interface {
	// AccessLogsReceived counts entries from the proxies, kept or not.
	AccessLogsReceived(received, kept int)
	// AccessLogsDropped counts kept entries dropped because the queue to
	// the management plane was full.
	AccessLogsDropped(n int)
	// AccessLogsSent counts a batch sent (err nil) or failed.
	AccessLogsSent(n int, err error)
}

// NopAccessLogMetrics counts nothing.
type NopAccessLogMetrics struct{}

func (NopAccessLogMetrics) AccessLogsReceived(int, int) { /* nothing */ }
func (NopAccessLogMetrics) AccessLogsDropped(int)       { /* nothing */ }
func (NopAccessLogMetrics) AccessLogsSent(int, error)   { /* nothing */ }

// AccessLogsOptions configures AccessLogs; zero fields take the defaults.
type AccessLogsOptions struct {
	// Cluster is written into every entry.
	Cluster string
	// BufferSize is how many recent kept entries /debug/accesslogs shows.
	BufferSize int
	// QueueSize bounds the entries waiting to be sent; when it is full the
	// oldest is dropped.
	QueueSize int
	// BatchSize is the most entries sent in one message.
	BatchSize int
	// FlushInterval is the longest a kept entry waits for a batch to fill.
	FlushInterval time.Duration
	Metrics       AccessLogMetrics
	Log           *slog.Logger
}

func (o *AccessLogsOptions) defaults() {
	if o.BufferSize <= 0 {
		o.BufferSize = 1000
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 10000
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 500
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = time.Second
	}
	if o.Metrics == nil {
		o.Metrics = NopAccessLogMetrics{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// AccessLogs is the access-log sink of one replica: it filters the entries
// of every proxy by the current access-log policies, keeps the recent ones
// in a ring buffer and forwards them in batches through a bounded queue
// that drops the oldest when the management plane cannot keep up.
type AccessLogs struct {
	opts   AccessLogsOptions
	filter atomic.Pointer[domain.AccessLogFilter]

	mu sync.Mutex
	// ring holds the most recent kept entries; next is where the next one
	// goes.
	ring []*observabilityv1.AccessLogEntry
	next int
	// queue is a circular buffer of qLen entries from qHead.
	queue   []*observabilityv1.AccessLogEntry
	qHead   int
	qLen    int
	dropped uint64
	notify  chan struct{}
}

var _ EnvoyConfigSink = (*AccessLogs)(nil)

// NewAccessLogs returns a sink that keeps nothing until the first
// EnvoyConfig arrives.
func NewAccessLogs(opts AccessLogsOptions) *AccessLogs {
	opts.defaults()
	return &AccessLogs{
		opts:   opts,
		ring:   make([]*observabilityv1.AccessLogEntry, 0, opts.BufferSize),
		queue:  make([]*observabilityv1.AccessLogEntry, opts.QueueSize),
		notify: make(chan struct{}, 1),
	}
}

// SetEnvoyConfig implements EnvoyConfigSink: the access-log policies take
// effect for the next entry.
func (a *AccessLogs) SetEnvoyConfig(c EnvoyConfig) {
	f, errs := domain.CompileAccessLogFilter(c.AccessLogPolicies)
	for _, err := range errs {
		a.opts.Log.Warn("access-log filter ignored: it never matches", "version", c.Version, "error", err)
	}
	a.filter.Store(f)
	a.opts.Log.Info("access-log policies updated", "version", c.Version, "policies", f.Policies())
}

// Accept filters the entries of one proxy and queues those kept. It sets
// each kept entry's cluster and workload; entries are owned by the sink
// afterwards.
func (a *AccessLogs) Accept(w domain.ProxyWorkload, entries []*observabilityv1.AccessLogEntry) int {
	f := a.filter.Load()
	kept := entries[:0:0]
	for _, e := range entries {
		if !f.Keep(w, e) {
			continue
		}
		e.Cluster = a.opts.Cluster
		e.Workload = workloadRef(a.opts.Cluster, w)
		kept = append(kept, e)
	}
	a.opts.Metrics.AccessLogsReceived(len(entries), len(kept))
	if len(kept) == 0 {
		return 0
	}
	dropped := 0
	a.mu.Lock()
	for _, e := range kept {
		if len(a.ring) < cap(a.ring) {
			a.ring = append(a.ring, e)
		} else {
			a.ring[a.next] = e
		}
		a.next = (a.next + 1) % cap(a.ring)
		if a.qLen == len(a.queue) {
			a.qHead = (a.qHead + 1) % len(a.queue)
			a.qLen--
			a.dropped++
			dropped++
		}
		a.queue[(a.qHead+a.qLen)%len(a.queue)] = e
		a.qLen++
	}
	a.mu.Unlock()
	if dropped > 0 {
		a.opts.Metrics.AccessLogsDropped(dropped)
	}
	select {
	case a.notify <- struct{}{}:
	default:
	}
	return len(kept)
}

func workloadRef(cluster string, w domain.ProxyWorkload) *commonv1.ClusterObjectRef {
	return &commonv1.ClusterObjectRef{Name: w.Pod, Namespace: w.Namespace, Cluster: cluster}
}

// Recent returns up to n of the most recent kept entries, oldest first.
func (a *AccessLogs) Recent(n int) []*observabilityv1.AccessLogEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	size := len(a.ring)
	n = min(n, size)
	out := make([]*observabilityv1.AccessLogEntry, 0, n)
	start := a.next - n
	if size < cap(a.ring) {
		start = size - n
	}
	for i := range n {
		out = append(out, a.ring[(start+i+size)%size])
	}
	return out
}

// Queued reports how many entries wait to be sent.
func (a *AccessLogs) Queued() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.qLen
}

// take removes up to BatchSize entries when a batch is full, or any
// entries when flush is set, with the drop count since the previous batch.
func (a *AccessLogs) take(flush bool) ([]*observabilityv1.AccessLogEntry, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.qLen == 0 || (!flush && a.qLen < a.opts.BatchSize) {
		return nil, 0
	}
	n := min(a.qLen, a.opts.BatchSize)
	out := make([]*observabilityv1.AccessLogEntry, n)
	for i := range n {
		j := (a.qHead + i) % len(a.queue)
		out[i], a.queue[j] = a.queue[j], nil
	}
	a.qHead = (a.qHead + n) % len(a.queue)
	a.qLen -= n
	dropped := a.dropped
	a.dropped = 0
	return out, dropped
}

// Run forwards the queued entries until ctx ends, through the first
// sender and on to the next one whenever a stream fails. A batch that
// could not be sent is sent again on the next stream.
func (a *AccessLogs) Run(ctx context.Context, senders ...AccessLogSender) error {
	if len(senders) == 0 {
		return errors.New("access logs: no sender")
	}
	b := Backoff{Min: 200 * time.Millisecond, Max: 30 * time.Second}
	var pending []*observabilityv1.AccessLogEntry
	var pendingDropped uint64
	for i := 0; ; i = (i + 1) % len(senders) {
		stream, err := senders[i].OpenAccessLogs(ctx)
		if err == nil {
			pending, pendingDropped, err = a.forward(ctx, stream, pending, pendingDropped, &b)
			stream.Close()
		}
		if ctx.Err() != nil {
			return nil
		}
		a.opts.Log.Warn("access-log stream failed; retrying", "error", err)
		if !b.Wait(ctx) {
			return nil
		}
	}
}

func (a *AccessLogs) forward(ctx context.Context, s AccessLogStream, batch []*observabilityv1.AccessLogEntry, dropped uint64, b *Backoff) ([]*observabilityv1.AccessLogEntry, uint64, error) {
	tick := time.NewTicker(a.opts.FlushInterval)
	defer tick.Stop()
	flush := false
	for {
		if len(batch) == 0 {
			batch, dropped = a.take(flush)
		}
		if len(batch) > 0 {
			err := s.Send(batch, dropped)
			a.opts.Metrics.AccessLogsSent(len(batch), err)
			if err != nil {
				return batch, dropped, err
			}
			b.Reset()
			batch, dropped, flush = nil, 0, false
			continue
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-a.notify:
			flush = false
		case <-tick.C:
			flush = true
		}
	}
}
