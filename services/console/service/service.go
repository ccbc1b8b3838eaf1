// Package service is the composition root of the console: the operator's
// browser UI and the ConsoleService behind it.
package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	kubelib "github.com/meshplane/meshplane/libs/kube"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/console/internal/adapters/connectrpc"
	"github.com/meshplane/meshplane/services/console/internal/adapters/httpserver"
	"github.com/meshplane/meshplane/services/console/internal/adapters/kube"
	"github.com/meshplane/meshplane/services/console/internal/adapters/upstream"
	"github.com/meshplane/meshplane/services/console/internal/adapters/web"
	"github.com/meshplane/meshplane/services/console/internal/app"
	"github.com/meshplane/meshplane/services/console/internal/domain"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
)

// Name is the service's name in its SPIFFE ID and metrics.
const Name = "console"

// maxAPIBytes bounds one API request: every request message is small.
const maxAPIBytes = 64 << 10

// Option overrides a dependency, for the all-in-one process and tests.
type Option func(*deps)

type deps struct {
	log      *slog.Logger
	reg      prometheus.Registerer
	kube     kubernetes.Interface
	static   fs.FS
	listener net.Listener
	now      func() time.Time
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(d *deps) { d.log = l } }

// WithRegisterer sets where metrics are registered.
func WithRegisterer(r prometheus.Registerer) Option { return func(d *deps) { d.reg = r } }

// WithKubeClient sets the management cluster's client instead of one from
// the kubeconfig.
func WithKubeClient(c kubernetes.Interface) Option { return func(d *deps) { d.kube = c } }

// WithStatic serves fsys instead of the embedded front end.
func WithStatic(fsys fs.FS) Option { return func(d *deps) { d.static = fsys } }

// WithListener serves on ln instead of listening on Config.Addr: tests pass
// a 127.0.0.1:0 listener.
func WithListener(ln net.Listener) Option { return func(d *deps) { d.listener = ln } }

// WithClock sets the sessions' clock, for tests of expiry.
func WithClock(now func() time.Time) Option { return func(d *deps) { d.now = now } }

// Service is a built console.
type Service struct {
	cfg      Config
	log      *slog.Logger
	handler  http.Handler
	sessions *app.Sessions
	recent   *app.Recent
	up       *upstream.Client
	ln       net.Listener
	tls      *tls.Config
}

// New builds the console.
func New(cfg Config, opts ...Option) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := deps{log: slog.New(slog.DiscardHandler), reg: prometheus.NewRegistry(), static: web.FS(), now: time.Now}
	for _, o := range opts {
		o(&d)
	}
	s := &Service{cfg: cfg, log: d.log.With("service", Name), ln: d.listener}
	m, err := newMetrics(d.reg)
	if err != nil {
		return nil, fmt.Errorf("console metrics: %w", err)
	}
	if d.kube == nil {
		if d.kube, err = newKubeClient(cfg.Kubeconfig, cfg.KubeContext); err != nil {
			return nil, err
		}
	}
	if s.up, err = upstream.New(cfg.Upstream, upstream.Addrs{Management: cfg.ManagementAddr, Ingest: cfg.IngestAddr, Translation: cfg.TranslationAddr, Distribution: cfg.DistributionAddr, Registration: cfg.RegistrationAddr}, s.log); err != nil {
		return nil, fmt.Errorf("console upstream: %w", err)
	}
	if !cfg.InsecurePlaintext {
		if s.tls, err = serverTLS(cfg, s.log); err != nil {
			return nil, err
		}
	}
	reviewer := kube.NewReviewer(d.kube)
	s.sessions = app.NewSessions(reviewer, domain.SessionPolicy{TTL: cfg.SessionTTL, Idle: cfg.SessionIdle},
		app.WithClock(d.now), app.WithSessionMetrics(m), app.WithFailureLimit(cfg.SignInFailures, time.Minute))
	s.recent = app.NewRecent(s.up, s.log, cfg.OutputVersions, cfg.TrafficWindow, cfg.PollInterval)
	console := app.NewConsole(s.up, app.NewCachedAuthorizer(reviewer, cfg.AuthzCacheTTL, d.now), s.recent, m, s.log)
	hopts := append(platform.DefaultHandlerOptions(s.log, d.reg), connect.WithReadMaxBytes(maxAPIBytes))
	path, api := connectrpc.NewHandler(console, s.sessions).Mount(hopts...)
	mux := http.NewServeMux()
	mux.Handle(path, api)
	s.handler = httpserver.New(httpserver.Options{Sessions: s.sessions, API: mux, Static: d.static, TLS: !cfg.InsecurePlaintext, Log: s.log})
	return s, nil
}

func newKubeClient(kubeconfig, context string) (kubernetes.Interface, error) {
	rc, err := kubelib.RESTConfigFromKubeconfig(kubeconfig, context)
	if err != nil {
		return nil, fmt.Errorf("management cluster kubeconfig: %w", err)
	}
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("management cluster client: %w", err)
	}
	return c, nil
}

func serverTLS(cfg Config, log *slog.Logger) (*tls.Config, error) {
	certs, err := platform.NewCertReloader(cfg.TLSCertFile, cfg.TLSKeyFile, log)
	if err != nil {
		return nil, fmt.Errorf("console certificate: %w", err)
	}
	// Browsers present no client certificate: the console authenticates
	// users by session, not by TLS.
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate, NextProtos: []string{"h2", "http/1.1"}}, nil
}

// Handler is the browser-facing handler, for tests.
func (s *Service) Handler() http.Handler { return s.handler }

// Mount adds nothing to the management server's RPC port: the console has
// a listener of its own (see Run). It is here so that the console is a
// platform.Component and RunMain or the all-in-one can run it.
func (s *Service) Mount(*platform.Server) {}

// RevocationChecker is nil: the console's browser listener takes no
// client certificates, and the console follows no revocation set.
func (s *Service) RevocationChecker() platform.RevocationChecker { return nil }

var _ platform.Component = (*Service)(nil)

// Run serves the browser-facing listener and keeps recent outputs and
// traffic until ctx ends.
//
// The console runs its own http.Server rather than a platform.Server with
// a public access policy: browsers present no client certificate and
// authenticate by session cookie, every response needs the CSP and
// security headers (platform.Server's guard, health and reflection would
// answer without them), and the SPA is not a Connect procedure. Health,
// readiness and metrics stay on the platform admin server.
func (s *Service) Run(ctx context.Context) error {
	defer s.up.Close()
	ln := s.ln
	if ln == nil {
		var err error
		if ln, err = platform.Listen(ctx, s.cfg.Addr); err != nil {
			return fmt.Errorf("console listen: %w", err)
		}
	}
	return platform.RunAll(ctx, func(ctx context.Context) error { return s.serve(ctx, ln) }, s.recent.Run, s.sweep)
}

func (s *Service) sweep(ctx context.Context) error {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.sessions.Sweep()
		}
	}
}

func (s *Service) serve(ctx context.Context, ln net.Listener) error {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if s.tls != nil {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	srv := &http.Server{
		Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, Protocols: protocols, TLSConfig: s.tls,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.log.Info("serving the console", "addr", ln.Addr().String(), "tls", s.tls != nil)
	done := make(chan error, 1)
	go func() {
		if s.tls != nil {
			done <- srv.ServeTLS(ln, "", "")
			return
		}
		done <- srv.Serve(ln)
	}()
	select {
	case err := <-done:
		return fmt.Errorf("console serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("console serve: %w", err)
	}
	return nil
}
