// Package service is the composition root of the distribution service.
package service

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"

	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/distribution/internal/adapters/connectrpc"
	"github.com/meshplane/meshplane/services/distribution/internal/adapters/memory"
	"github.com/meshplane/meshplane/services/distribution/internal/app"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Name is the service's name in its SPIFFE ID and metrics.
const Name = "distribution"

// Config is everything the service reads at start.
type Config struct {
	Install string
	Redis   snapshots.RedisOptions

	flags *platform.Flags
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Install: snapshots.DefaultInstall, Redis: snapshots.NewRedisOptions()}
}

// AddFlags registers the configuration's flags.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	c.flags = platform.NewFlags(fs, "")
	c.flags.String(&c.Install, "install", "install name; selects the install's keys in Redis")
	c.Redis.AddFlags(fs)
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.flags != nil {
		errs = append(errs, c.flags.Err())
	}
	if c.Install == "" {
		errs = append(errs, errors.New("--install must not be empty"))
	}
	errs = append(errs, c.Redis.Validate())
	return errors.Join(errs...)
}

// Option overrides a dependency, for the all-in-one process and tests.
type Option func(*deps)

type deps struct {
	log     *slog.Logger
	reg     prometheus.Registerer
	outputs snapshots.Store[*snapshotv1.OutputSnapshot]
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(d *deps) { d.log = l } }

// WithRegisterer sets where metrics are registered.
func WithRegisterer(r prometheus.Registerer) Option { return func(d *deps) { d.reg = r } }

// WithOutputs sets the output store instead of the one the configuration
// names.
func WithOutputs(s snapshots.Store[*snapshotv1.OutputSnapshot]) Option {
	return func(d *deps) { d.outputs = s }
}

// Service is a built distribution service.
type Service struct {
	dist    *app.Distributor
	handler *connectrpc.Handler
	redis   redis.UniversalClient
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
	s := &Service{}
	if d.outputs == nil {
		if !cfg.Redis.Enabled() {
			return nil, errors.New("distribution needs --redis-addrs when it runs on its own: outputs come from the shared store")
		}
		client, err := cfg.Redis.NewClient()
		if err != nil {
			return nil, err
		}
		s.redis = client
		d.outputs = snapshots.NewRedis(client, cfg.Install, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	}
	m, err := newMetrics(d.reg)
	if err != nil {
		return nil, err
	}
	s.dist = app.NewDistributor(d.outputs, memory.NewAcks(), m, d.log.With("service", Name))
	s.handler = connectrpc.NewHandler(s.dist)
	return s, nil
}

// Mount registers the service's handlers on srv. Agents watch and ack for
// their own cluster; ListAcks is for management services and tools.
func (s *Service) Mount(srv *platform.Server) {
	srv.Handle(distributionv1connect.NewDistributionServiceHandler(s.handler, srv.HandlerOptions()...))
	srv.RegisterServices(distributionv1connect.DistributionServiceName)
	srv.AddAccessPolicy(platform.AccessPolicy{
		distributionv1connect.DistributionServiceWatchProcedure:    platform.AllowCluster,
		distributionv1connect.DistributionServiceAckProcedure:      platform.AllowCluster,
		distributionv1connect.DistributionServiceListAcksProcedure: platform.AllowService,
	})
}

// Run follows the output store until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	defer func() {
		if s.redis != nil {
			s.redis.Close()
		}
	}()
	return s.dist.Run(ctx)
}
