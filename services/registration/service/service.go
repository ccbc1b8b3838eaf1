// Package service is the composition root of the registration service.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/connectrpc"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/memory"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/prometheus/client_golang/prometheus"
)

// Name is the service's name in its SPIFFE ID and metrics.
const Name = "registration"

// Config is everything the service reads at start.
type Config struct {
	TrustDomain string
	// CADir holds the CA (root.crt, intermediate.crt, intermediate.key). A
	// development CA is created there when it is empty.
	CADir string
	// TokensFile lists "<cluster> <token>" or "<cluster> sha256:<hex>".
	TokensFile string
	// CertTTL is the lifetime of cluster certificates.
	CertTTL time.Duration

	flags *platform.Flags
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{TrustDomain: pki.DefaultTrustDomain, CADir: "/var/run/meshplane/ca", CertTTL: 24 * time.Hour}
}

// AddFlags registers the configuration's flags.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	c.flags = platform.NewFlags(fs, "")
	c.flags.String(&c.CADir, "ca-dir", "directory of the CA; a development CA is created when empty")
	c.flags.String(&c.TokensFile, "bootstrap-tokens-file", "file of \"<cluster> <token>\" lines")
	c.flags.Duration(&c.CertTTL, "cert-ttl", "lifetime of cluster certificates")
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.flags != nil {
		errs = append(errs, c.flags.Err())
	}
	if c.TrustDomain == "" {
		errs = append(errs, errors.New("--trust-domain must not be empty"))
	}
	if c.CADir == "" {
		errs = append(errs, errors.New("--ca-dir must not be empty"))
	}
	if c.CertTTL < time.Minute {
		errs = append(errs, errors.New("--cert-ttl must be at least 1m"))
	}
	return errors.Join(errs...)
}

// Option overrides a dependency, for the all-in-one process and tests.
type Option func(*deps)

type deps struct {
	log *slog.Logger
	reg prometheus.Registerer
	ca  *pki.CA
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(d *deps) { d.log = l } }

// WithRegisterer sets where metrics are registered.
func WithRegisterer(r prometheus.Registerer) Option { return func(d *deps) { d.reg = r } }

// WithCA sets the CA instead of loading it from cfg.CADir.
func WithCA(ca *pki.CA) Option { return func(d *deps) { d.ca = ca } }

// Service is a built registration service.
type Service struct {
	handler *connectrpc.Handler
	tokens  *memory.Tokens
	ca      *pki.CA
}

// New builds the service.
func New(cfg Config, opts ...Option) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := deps{log: slog.New(slog.NewTextHandler(io.Discard, nil)), reg: prometheus.NewRegistry()}
	for _, o := range opts {
		o(&d)
	}
	log := d.log.With("service", Name)
	if d.ca == nil {
		ca, created, err := pki.LoadOrCreateCA(cfg.CADir, "Meshplane")
		if err != nil {
			return nil, err
		}
		if created {
			log.Warn("created a development CA; supply your own for production", "dir", cfg.CADir)
		}
		d.ca = ca
	}
	tokens := memory.NewTokens()
	if cfg.TokensFile != "" {
		if err := tokens.LoadFile(cfg.TokensFile); err != nil {
			return nil, fmt.Errorf("registration: %w", err)
		}
	}
	r := app.NewRegistrar(tokens, d.ca, cfg.TrustDomain, cfg.CertTTL, log)
	return &Service{handler: connectrpc.NewHandler(r), tokens: tokens, ca: d.ca}, nil
}

// AddBootstrapToken registers a token for a cluster; only its hash is kept.
func (s *Service) AddBootstrapToken(cluster, token string) { s.tokens.Set(cluster, token) }

// Mount registers the service's handlers on srv. Register and
// GetTrustBundle need no client certificate; Renew needs the cluster's.
func (s *Service) Mount(srv *platform.Server) {
	srv.Handle(registrationv1connect.NewRegistrationServiceHandler(s.handler, srv.HandlerOptions()...))
	srv.RegisterServices(registrationv1connect.RegistrationServiceName)
	srv.AddAccessPolicy(platform.AccessPolicy{
		registrationv1connect.RegistrationServiceRegisterProcedure:       platform.AllowPublic,
		registrationv1connect.RegistrationServiceGetTrustBundleProcedure: platform.AllowPublic,
		registrationv1connect.RegistrationServiceRenewProcedure:          platform.AllowCluster,
	})
}

// Run has no background work yet; it waits for ctx.
func (s *Service) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
