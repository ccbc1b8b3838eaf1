package platform

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server runs one or more Connect services on one port, and an admin HTTP
// server beside it. Mount handlers with Handle, name the services with
// RegisterServices, open procedures with AddAccessPolicy, then call Run (or
// Serve and ServeAdmin with listeners of your own) until the context ends.
type Server struct {
	opts        ServerOptions
	logger      *slog.Logger
	reg         *prometheus.Registry
	tlsConfig   *tls.Config
	handlerOpts []connect.HandlerOption
	metrics     *rpcMetrics

	mux      *http.ServeMux
	adminMux *http.ServeMux
	health   *grpchealth.StaticChecker
	policy   atomic.Pointer[AccessPolicy]

	// drain ends when Serve begins to shut down; streaming handlers watch it
	// through drainInterceptor.
	drain     context.Context
	drainNow  context.CancelFunc
	startOnce sync.Once
	// calls are the calls in flight with a client certificate; Serve cuts
	// those whose certificate is revoked or expires.
	calls *openCalls

	mu       sync.Mutex
	services []string // for reflection and health
	mountErr error    // reported by Serve: Handle must not panic in wiring
	ready    bool
	reason   string // why not ready
	stopping bool   // once shutting down, never ready again
}

// NewRegistry returns a Prometheus registry with the Go runtime and process
// collectors, the usual base for NewServer.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// NewServer checks opts, loads the TLS material and mounts gRPC health and
// reflection (v1 and v1alpha). A nil reg gets a NewRegistry. The server
// starts not ready: call SetReady(true) once the service can do its work.
func NewServer(opts ServerOptions, logger *slog.Logger, reg *prometheus.Registry) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("server options: %w", err)
	}
	if logger == nil {
		return nil, errors.New("server: logger is nil")
	}
	if reg == nil {
		reg = NewRegistry()
	}
	tlsConfig, err := NewServerTLSConfig(opts.TLS, logger)
	if err != nil {
		return nil, fmt.Errorf("server TLS: %w", err)
	}
	drain, drainNow := context.WithCancel(context.Background())
	s := &Server{
		opts:      opts,
		logger:    logger,
		reg:       reg,
		tlsConfig: tlsConfig,
		metrics:   newRPCMetrics(logger, reg),
		mux:       http.NewServeMux(),
		adminMux:  http.NewServeMux(),
		health:    grpchealth.NewStaticChecker(),
		drain:     drain,
		drainNow:  drainNow,
		reason:    "starting",
	}
	s.calls = newOpenCalls(opts.Revocation, logger, s.metrics.ended, time.Now)
	registerBuildInfo(logger, reg)
	s.handlerOpts = append(DefaultHandlerOptions(logger, reg), connect.WithReadMaxBytes(opts.MaxRecvBytes))
	policy := defaultAccessPolicy()
	s.policy.Store(&policy)
	// Without an explicit entry the checker answers SERVING for the whole
	// server; until SetReady it must not.
	s.health.SetStatus("", grpchealth.StatusNotServing)

	s.Handle(grpchealth.NewHandler(s.health, s.handlerOpts...))
	reflector := grpcreflect.NewReflector(grpcreflect.NamerFunc(s.serviceNames))
	s.Handle(grpcreflect.NewHandlerV1(reflector, s.handlerOpts...))
	s.Handle(grpcreflect.NewHandlerV1Alpha(reflector, s.handlerOpts...))
	s.RegisterServices(grpchealth.HealthV1ServiceName)

	s.adminMux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		// Liveness: the process answers. Readiness is /readyz.
		_, _ = w.Write([]byte("ok\n"))
	})
	s.adminMux.HandleFunc("/readyz", s.serveReadyz)
	if opts.Pprof {
		s.adminMux.HandleFunc("/debug/pprof/", pprof.Index)
		s.adminMux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		s.adminMux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.adminMux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		s.adminMux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	s.adminMux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		Registry:          reg,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelError),
		EnableOpenMetrics: true,
	}))
	return s, nil
}

// HandlerOptions are DefaultHandlerOptions plus this server's MaxRecvBytes,
// sharing the server's metrics. Pass them to every generated
// NewXServiceHandler mounted on this server.
func (s *Server) HandlerOptions() []connect.HandlerOption {
	return slices.Clone(s.handlerOpts)
}

// Registry is where the server's metrics live; services add their own.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Handle mounts h at path on the RPC port, in the shape generated
// constructors return: s.Handle(xv1connect.NewXServiceHandler(impl, s.HandlerOptions()...)).
// A path mounted twice makes Serve fail rather than panicking here.
func (s *Server) Handle(path string, h http.Handler) {
	s.mountOn(s.mux, path, h)
}

// HandleAdmin mounts h on the admin port, for /debug/ pages and the like.
func (s *Server) HandleAdmin(path string, h http.Handler) {
	s.mountOn(s.adminMux, path, h)
}

func (s *Server) mountOn(mux *http.ServeMux, path string, h http.Handler) {
	defer func() {
		// ServeMux panics on a duplicate or malformed pattern; turn it into
		// an error that Serve returns, as a wiring mistake should be.
		if r := recover(); r != nil {
			s.mu.Lock()
			s.mountErr = errors.Join(s.mountErr, fmt.Errorf("mount %q: %v", path, r))
			s.mu.Unlock()
		}
	}()
	mux.Handle(path, h)
}

// RegisterServices names the fully-qualified protobuf services mounted on
// this server (the generated XServiceName constants), so reflection lists
// them and health checking answers for them with the server's readiness.
func (s *Server) RegisterServices(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		if !slices.Contains(s.services, n) {
			s.services = append(s.services, n)
		}
		s.health.SetStatus(n, healthStatus(s.ready))
	}
}

func (s *Server) serviceNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.services)
}

// AddAccessPolicy merges p into the server's policy; a key already present is
// replaced. It is safe to call at any time, but services normally call it
// next to Handle. Health checking is public by default.
func (s *Server) AddAccessPolicy(p AccessPolicy) {
	mergePolicy(&s.policy, p)
}

// HealthChecker is the gRPC health state. SetReady sets every registered
// service at once; a service may set its own status in between.
func (s *Server) HealthChecker() *grpchealth.StaticChecker { return s.health }

// SetReady marks the server ready (or not, with the reason "not ready") on
// /readyz and in gRPC health checking.
func (s *Server) SetReady(ready bool) {
	s.setReady(ready, "not ready")
}

// SetNotReady marks the server not ready and says why on /readyz, for
// example "waiting for the first snapshot from Redis".
func (s *Server) SetNotReady(reason string) {
	s.setReady(false, reason)
}

func (s *Server) setReady(ready bool, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		// A late SetReady(true) from a service must not bring traffic back
		// to a server that is draining.
		return
	}
	s.ready, s.reason = ready, reason
	status := healthStatus(ready)
	s.health.SetStatus("", status)
	for _, n := range s.services {
		s.health.SetStatus(n, status)
	}
}

func healthStatus(ready bool) grpchealth.Status {
	if ready {
		return grpchealth.StatusServing
	}
	return grpchealth.StatusNotServing
}

func (s *Server) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	ready, reason := s.ready, s.reason
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, "not ready: %s\n", reason)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// rpcHandler is everything in front of the mux: identity, revocation and
// access checks.
func (s *Server) rpcHandler() http.Handler {
	return &guard{
		next:        s.mux,
		calls:       s.calls,
		logger:      s.logger,
		policy:      &s.policy,
		trustDomain: s.opts.TrustDomain,
		revocation:  s.opts.Revocation,
		errWriter:   connect.NewErrorWriter(s.handlerOpts...),
		rejected:    s.metrics.rejected,
		now:         time.Now,
	}
}

// Serve serves RPCs on ln until ctx ends, then shuts down gracefully: it
// marks itself not ready, ends open streams with CodeUnavailable, lets
// unary calls finish for up to ShutdownTimeout and then closes what is left.
// It returns nil after a shutdown that ctx asked for. Serve closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	err := s.mountErr
	s.mu.Unlock()
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("serve: %w", err)
	}
	started := false
	s.startOnce.Do(func() { started = true })
	if !started {
		_ = ln.Close()
		return errors.New("serve: a Server serves RPCs once")
	}

	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if s.tlsConfig != nil {
		protocols.SetHTTP2(true)
	} else {
		// HTTP/2 with prior knowledge on plain TCP, from net/http itself:
		// no h2c upgrade dance and no x/net dependency.
		protocols.SetUnencryptedHTTP2(true)
	}
	srv := &http.Server{
		Handler:           s.rpcHandler(),
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		Protocols:         protocols,
		TLSConfig:         s.tlsConfig,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context {
			// Carries the drain signal to every request's context.
			return context.WithValue(context.Background(), drainKey{}, s.drain)
		},
	}
	s.logger.Info("serving RPCs", "addr", ln.Addr().String(), "tls", s.tlsConfig != nil, "client_auth", string(s.opts.TLS.ClientAuth))
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	defer stopSweep()
	interval := s.opts.CertRecheckInterval
	if interval <= 0 {
		interval = DefaultRecheckInterval
	}
	go s.calls.run(sweepCtx, interval)
	serve := func() error { return srv.Serve(ln) }
	if s.tlsConfig != nil {
		serve = func() error { return srv.ServeTLS(ln, "", "") }
	}
	return s.serveUntilDone(ctx, "rpc", srv, serve, func() {
		s.SetNotReady("shutting down")
		s.mu.Lock()
		s.stopping = true
		s.mu.Unlock()
		s.drainNow()
	})
}

// ServeAdmin serves /healthz, /readyz, /metrics and whatever HandleAdmin
// mounted, over plain HTTP/1.1, until ctx ends. Serve closes ln.
func (s *Server) ServeAdmin(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.adminMux,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	s.logger.Info("serving admin endpoints", "addr", ln.Addr().String())
	return s.serveUntilDone(ctx, "admin", srv, func() error { return srv.Serve(ln) }, func() {})
}

func (s *Server) serveUntilDone(ctx context.Context, name string, srv *http.Server, serve func() error, beforeShutdown func()) error {
	done := make(chan error, 1)
	go func() { done <- serve() }()
	select {
	case err := <-done:
		// The listener failed before anyone asked us to stop.
		return fmt.Errorf("serve %s: %w", name, err)
	case <-ctx.Done():
	}
	beforeShutdown()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.logger.Warn("graceful shutdown timed out; closing connections", "server", name, "timeout", s.opts.ShutdownTimeout, "error", err)
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", name, err)
	}
	s.logger.Info("server stopped", "server", name)
	return nil
}

// Run listens on Addr and AdminAddr and serves both until ctx ends or one of
// them fails, which stops the other too.
func (s *Server) Run(ctx context.Context) error {
	ln, err := Listen(ctx, s.opts.Addr)
	if err != nil {
		return fmt.Errorf("listen for RPCs: %w", err)
	}
	var adminLn net.Listener
	if s.opts.AdminAddr != "" {
		if adminLn, err = Listen(ctx, s.opts.AdminAddr); err != nil {
			_ = ln.Close()
			return fmt.Errorf("listen for admin: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	run := func(serve func(context.Context, net.Listener) error, l net.Listener) {
		err := serve(ctx, l)
		cancel()
		errs <- err
	}
	n := 1
	go run(s.Serve, ln)
	if adminLn != nil {
		n++
		go run(s.ServeAdmin, adminLn)
	}
	var all []error
	for range n {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}
