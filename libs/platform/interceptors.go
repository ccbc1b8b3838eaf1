package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultHandlerOptions are the options every generated NewXServiceHandler
// gets: logging, metrics, draining of streams on shutdown, and panic
// recovery, in that order from the outside in, so a recovered panic is
// logged and counted like any other CodeInternal.
//
// Metrics are registered on reg; calling this again with the same registry
// (one call per mounted service) shares the collectors instead of failing.
// A nil reg keeps the metrics unexported, a nil logger discards the logs.
// Server.HandlerOptions adds the server's message size limit on top of
// these. Messages under DefaultCompressMinBytes go uncompressed, whatever
// the client accepts: setting up gzip costs more than it saves on them
// (acknowledgements, statuses); a service may set its own threshold after
// these options.
func DefaultHandlerOptions(logger *slog.Logger, reg prometheus.Registerer) []connect.HandlerOption {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := newRPCMetrics(logger, reg)
	return []connect.HandlerOption{
		connect.WithInterceptors(
			&loggingInterceptor{logger: logger},
			&metricsInterceptor{m: m},
			drainInterceptor{},
		),
		connect.WithRecover(func(ctx context.Context, spec connect.Spec, _ http.Header, p any) error {
			m.panics.WithLabelValues(spec.Procedure).Inc()
			logger.ErrorContext(ctx, "rpc handler panicked",
				"procedure", spec.Procedure, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			// The panic value may hold anything; the caller learns only that
			// it was our fault.
			return connect.NewError(connect.CodeInternal, errors.New("internal error"))
		}),
		connect.WithCompressMinBytes(DefaultCompressMinBytes),
	}
}

// DefaultCompressMinBytes is the smallest message that servers compress.
const DefaultCompressMinBytes = 1024

// rpcMetrics are the server's Prometheus collectors.
type rpcMetrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	streams  *prometheus.GaugeVec
	panics   *prometheus.CounterVec
	rejected *prometheus.CounterVec
	ended    *prometheus.CounterVec
}

func newRPCMetrics(logger *slog.Logger, reg prometheus.Registerer) *rpcMetrics {
	return &rpcMetrics{
		requests: register(logger, reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_rpc_server_requests_total",
			Help: "RPCs handled, by procedure and Connect code (ok for success).",
		}, []string{"procedure", "code"})),
		seconds: register(logger, reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "meshplane_rpc_server_handling_seconds",
			Help: "Time from the start of an RPC to its end, by procedure; for streams, the stream's lifetime.",
			// Reaches minutes because watch streams live that long.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"procedure"})),
		streams: register(logger, reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshplane_rpc_server_streams_in_flight",
			Help: "Streaming RPCs open now, by procedure.",
		}, []string{"procedure"})),
		panics: register(logger, reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_rpc_server_panics_total",
			Help: "Handler panics recovered and answered with CodeInternal, by procedure.",
		}, []string{"procedure"})),
		ended: register(logger, reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_rpc_server_calls_ended_total",
			Help: "Calls in flight that the server ended because the caller's certificate was revoked or expired while they were open, by reason.",
		}, []string{"reason"})),
		rejected: register(logger, reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshplane_rpc_server_rejected_total",
			// Labelled by code only: rejected paths come from strangers and
			// would make the label set unbounded.
			Help: "Calls refused before reaching a handler (authentication, authorization, revocation), by Connect code.",
		}, []string{"code"})),
	}
}

// register adds c to reg, or returns the collector already registered under
// the same name, so several services in one process share one set.
func register[C prometheus.Collector](logger *slog.Logger, reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	err := reg.Register(c)
	if err == nil {
		return c
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	// A different metric already owns the name: a programming error, but
	// not one worth refusing to serve for.
	logger.Error("cannot register metric; it will not be exported", "error", err)
	return c
}

func codeLabel(err error) string {
	if err == nil {
		return "ok"
	}
	return connect.CodeOf(err).String()
}

// loggingInterceptor logs one line per RPC: what was called, by whom, how it
// ended and how long it took. Never messages or headers, which may carry
// tokens and keys.
type loggingInterceptor struct {
	logger *slog.Logger
}

func (i *loggingInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		start := time.Now()
		res, err := next(ctx, req)
		i.log(ctx, req.Spec(), req.Peer(), start, err)
		return res, err
	}
}

func (i *loggingInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *loggingInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		i.log(ctx, conn.Spec(), conn.Peer(), start, err)
		return err
	}
}

func (i *loggingInterceptor) log(ctx context.Context, spec connect.Spec, peer connect.Peer, start time.Time, err error) {
	attrs := []slog.Attr{
		slog.String("procedure", spec.Procedure),
		slog.String("protocol", peer.Protocol),
		slog.String("code", codeLabel(err)),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		slog.String("peer", peer.Addr),
	}
	if spec.StreamType != connect.StreamTypeUnary {
		attrs = append(attrs, slog.String("stream", spec.StreamType.String()))
	}
	if id, ok := IdentityFromContext(ctx); ok {
		attrs = append(attrs, slog.String("identity", id.String()))
	}
	level := slog.LevelDebug
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
		level = levelFor(connect.CodeOf(err))
	}
	i.logger.LogAttrs(ctx, level, "rpc", attrs...)
}

// levelFor keeps the caller's mistakes at info and raises what an operator
// must look at.
func levelFor(code connect.Code) slog.Level {
	switch code {
	case connect.CodeUnknown, connect.CodeInternal, connect.CodeDataLoss:
		return slog.LevelError
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeResourceExhausted, connect.CodeUnimplemented:
		return slog.LevelWarn
	default:
		return slog.LevelInfo
	}
}

type metricsInterceptor struct {
	m *rpcMetrics
}

func (i *metricsInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		start := time.Now()
		res, err := next(ctx, req)
		i.observe(req.Spec().Procedure, start, err)
		return res, err
	}
}

func (i *metricsInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *metricsInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		procedure := conn.Spec().Procedure
		gauge := i.m.streams.WithLabelValues(procedure)
		gauge.Inc()
		defer gauge.Dec()
		start := time.Now()
		err := next(ctx, conn)
		i.observe(procedure, start, err)
		return err
	}
}

func (i *metricsInterceptor) observe(procedure string, start time.Time, err error) {
	i.m.requests.WithLabelValues(procedure, codeLabel(err)).Inc()
	i.m.seconds.WithLabelValues(procedure).Observe(time.Since(start).Seconds())
}

type drainKey struct{}

// errDraining is the cause set on a stream's context when the server starts
// shutting down.
var errDraining = errors.New("server is shutting down")

// drainInterceptor ends streaming handlers when their server begins to shut
// down. http.Server.Shutdown waits for handlers to return, and a watch
// stream would otherwise hold it for the whole ShutdownTimeout. Unary calls
// are short and are left to finish. The client gets CodeUnavailable, which
// tells it to reconnect, to another replica if there is one. It also turns
// a call that openCalls cut (certificate revoked or expired while open) into
// CodeUnauthenticated, whatever the handler returned.
type drainInterceptor struct{}

func (drainInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		if err != nil {
			if cut := cutError(ctx); cut != nil && ctx.Err() != nil {
				return nil, cut
			}
		}
		return res, err
	}
}

func (drainInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (drainInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		drain, ok := ctx.Value(drainKey{}).(context.Context)
		if !ok {
			// Not served by a platform Server: nothing to drain on.
			return next(ctx, conn)
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(drain, func() { cancel(errDraining) })
		defer stop()
		err := next(ctx, conn)
		// Also when the handler returned nil on seeing its context end: the
		// stream was cut, not finished, and the client must know why.
		if cut := cutError(ctx); cut != nil {
			return cut
		}
		return err
	}
}

// cutError is the error a caller gets for a call that the server cut short:
// CodeUnavailable when it is shutting down (reconnect, maybe elsewhere),
// CodeUnauthenticated when the caller's certificate was revoked or expired
// while the call was open (see openCalls). It is nil for a call that ended
// on its own.
func cutError(ctx context.Context) error {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errDraining):
		return connect.NewError(connect.CodeUnavailable, errDraining)
	case errors.Is(cause, errRevoked), errors.Is(cause, errExpired):
		return connect.NewError(connect.CodeUnauthenticated, cause)
	}
	return nil
}
