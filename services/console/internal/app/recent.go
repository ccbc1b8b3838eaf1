package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/console/internal/domain"
)

// Recent is what the console remembers since it started: the last few
// output versions of every cluster (for diffs) and a sliding window of
// access-log traffic counts (for the graph's traffic edges).
type Recent struct {
	up       Upstream
	log      *slog.Logger
	keep     int
	interval time.Duration
	now      func() time.Time

	mu       sync.Mutex
	outputs  map[string]*domain.History
	traffic  *domain.TrafficWindow
	watching bool
}

// NewRecent keeps keep versions per cluster and window of traffic, and
// polls translation every interval.
func NewRecent(up Upstream, log *slog.Logger, keep int, window, interval time.Duration) *Recent {
	return &Recent{up: up, log: log, keep: keep, interval: interval, now: time.Now,
		outputs: map[string]*domain.History{}, traffic: domain.NewTrafficWindow(window)}
}

// AddOutput records a version of a cluster's output.
func (r *Recent) AddOutput(o *snapshotv1.OutputSnapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.outputs[o.GetCluster()]
	if h == nil {
		h = domain.NewHistory(r.keep)
		r.outputs[o.GetCluster()] = h
	}
	h.Add(o)
}

// Output returns cluster's version (the latest for "") and the versions
// held, newest first.
func (r *Recent) Output(cluster, version string) (*snapshotv1.OutputSnapshot, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.outputs[cluster]
	if h == nil {
		return nil, nil
	}
	o, _ := h.Get(version)
	return o, h.Versions()
}

// Traffic returns the counts over window, and whether access logs reach
// the console at all.
func (r *Recent) Traffic(now time.Time, window time.Duration) ([]domain.TrafficCount, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.traffic.Counts(now, window), r.watching
}

// AddAccessLogs counts entries in the traffic window.
func (r *Recent) AddAccessLogs(entries []*observabilityv1.AccessLogEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.traffic.Add(entries)
	r.traffic.Prune(r.now())
}

// Run polls the outputs and follows the access logs until ctx ends.
func (r *Recent) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { r.followAccessLogs(ctx) })
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		r.pollOutputs(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// pollOutputs fetches the outputs whose version changed.
func (r *Recent) pollOutputs(ctx context.Context) {
	st, err := r.up.TranslationStatus(ctx)
	if err != nil {
		r.log.Debug("output versions not read", "error", err)
		return
	}
	for cl, v := range st.GetOutputVersions() {
		r.mu.Lock()
		h := r.outputs[cl]
		have := h != nil && len(h.Versions()) > 0 && h.Versions()[0] == v
		r.mu.Unlock()
		if have {
			continue
		}
		o, err := r.up.OutputSnapshot(ctx, cl)
		if err != nil || o == nil {
			continue
		}
		r.AddOutput(o)
	}
}

// followAccessLogs keeps a stream of every cluster's access logs open,
// reconnecting after a pause, and counts them.
func (r *Recent) followAccessLogs(ctx context.Context) {
	setWatching := func(on bool) {
		r.mu.Lock()
		r.watching = on
		r.mu.Unlock()
	}
	for ctx.Err() == nil {
		// Traffic is available while the stream is open, whether or not
		// entries arrive: no entries then means no traffic.
		setWatching(true)
		err := r.up.WatchAccessLogs(ctx, &ingestv1.WatchAccessLogsRequest{Follow: true}, func(es []*observabilityv1.AccessLogEntry) error {
			r.AddAccessLogs(es)
			return nil
		})
		setWatching(false)
		if ctx.Err() != nil {
			return
		}
		r.log.Debug("access-log stream ended; reconnecting", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(r.interval):
		}
	}
}
