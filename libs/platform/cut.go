package platform

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultRecheckInterval is how often the calls in flight are checked
// against the revocation set and their certificates' expiry. With the
// revocation cache's own refresh (2 s by default) a revoked cluster's open
// streams end within a few seconds.
const DefaultRecheckInterval = time.Second

// openCalls tracks the calls in flight that presented a client certificate,
// so that a stream opened before its certificate was revoked, or that
// outlives the certificate, is cut instead of running on. The guard admits a
// call and registers it; sweep, run by Serve, ends the ones whose
// certificate is no longer good.
//
// Ending a call cancels its context with errRevoked or errExpired as the
// cause (drainInterceptor turns that into CodeUnauthenticated for the
// client) and, on HTTP/2, closes the request body, so that a handler blocked
// reading the client's next message wakes up too.
type openCalls struct {
	revocation RevocationChecker
	logger     *slog.Logger
	ended      *prometheus.CounterVec
	now        func() time.Time

	mu    sync.Mutex
	calls map[*openCall]struct{}
}

type openCall struct {
	id        Identity
	procedure string
	cancel    context.CancelCauseFunc
	body      io.Closer // nil when closing it could block (HTTP/1)
}

func newOpenCalls(revocation RevocationChecker, logger *slog.Logger, ended *prometheus.CounterVec, now func() time.Time) *openCalls {
	return &openCalls{revocation: revocation, logger: logger, ended: ended, now: now, calls: map[*openCall]struct{}{}}
}

// add registers a call and returns the context the handler must run with,
// and the function to call when the handler has returned.
func (o *openCalls) add(ctx context.Context, id Identity, procedure string, body io.Closer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c := &openCall{id: id, procedure: procedure, cancel: cancel, body: body}
	o.mu.Lock()
	o.calls[c] = struct{}{}
	o.mu.Unlock()
	return ctx, func() {
		o.mu.Lock()
		delete(o.calls, c)
		o.mu.Unlock()
		cancel(nil)
	}
}

// sweep ends every call whose certificate has expired or been revoked. A
// revocation check that fails leaves the call alone: the checker answers
// from memory, and a store outage must not cut every agent off.
func (o *openCalls) sweep(ctx context.Context) {
	now := o.now()
	o.mu.Lock()
	calls := make([]*openCall, 0, len(o.calls))
	for c := range o.calls {
		calls = append(calls, c)
	}
	o.mu.Unlock()
	for _, c := range calls {
		cause := error(nil)
		switch {
		case !now.Before(c.id.NotAfter):
			cause = errExpired
		case o.revocation != nil:
			if revoked, err := o.revocation.IsRevoked(ctx, c.id.Serial); err == nil && revoked {
				cause = errRevoked
			}
		}
		if cause == nil {
			continue
		}
		o.mu.Lock()
		_, open := o.calls[c]
		delete(o.calls, c)
		o.mu.Unlock()
		if !open {
			continue
		}
		reason := "revoked"
		if cause == errExpired {
			reason = "expired"
		}
		o.ended.WithLabelValues(reason).Inc()
		o.logger.InfoContext(ctx, "open call ended: client certificate no longer valid",
			"procedure", c.procedure, "identity", c.id.String(), "serial", c.id.Serial, "reason", reason)
		c.cancel(cause)
		if c.body != nil {
			// HTTP/2 request bodies close without waiting for a reader.
			_ = c.body.Close()
		}
	}
}

// run sweeps every interval until ctx ends.
func (o *openCalls) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			o.sweep(ctx)
		}
	}
}
