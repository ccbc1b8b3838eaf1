// Package service is the composition root of the distribution service.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/meshplane/meshplane/libs/revocation"
	revredis "github.com/meshplane/meshplane/libs/revocation/redis"
	"io"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/distribution/internal/adapters/connectrpc"
	"github.com/meshplane/meshplane/services/distribution/internal/adapters/debughttp"
	"github.com/meshplane/meshplane/services/distribution/internal/adapters/memory"
	redisadapter "github.com/meshplane/meshplane/services/distribution/internal/adapters/redis"
	"github.com/meshplane/meshplane/services/distribution/internal/app"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Name is the service's name in its SPIFFE ID and metrics.
const Name = "distribution"

// Config is everything the service reads at start.
type Config struct {
	snapstore.Config
	// MaxSendBytes bounds the encoded size of one output snapshot sent to
	// an agent, before compression. A larger one is not sent: it is logged
	// and counted in meshplane_distribution_snapshots_refused_total.
	MaxSendBytes int
	// CompressMinBytes is the smallest message that is sent gzipped to a
	// client that accepts gzip.
	CompressMinBytes int
	// Deltas sends an agent that accepts them the changes from the version
	// it holds instead of the whole snapshot, from output indexes kept in
	// Redis (in memory without it).
	Deltas bool

	flags *platform.Flags
}

// Defaults of the message size settings.
const (
	DefaultMaxSendBytes     = 32 << 20
	DefaultCompressMinBytes = 1 << 10
)

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Config:       snapstore.DefaultConfig(),
		MaxSendBytes: DefaultMaxSendBytes, CompressMinBytes: DefaultCompressMinBytes, Deltas: true,
	}
}

// AddFlags registers the configuration's flags.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	c.flags = platform.NewFlags(fs, "")
	c.Config.AddFlags(fs, "install name; selects the install's keys in Redis")
	c.flags.Int(&c.MaxSendBytes, "max-send-bytes", "largest output snapshot sent to an agent, in bytes before compression; larger ones are refused and logged")
	c.flags.Int(&c.CompressMinBytes, "compress-min-bytes", "smallest message sent gzipped to clients that accept gzip")
	c.flags.Bool(&c.Deltas, "deltas", "send agents that accept them the changes from the version they hold instead of whole snapshots")
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.flags != nil {
		errs = append(errs, c.flags.Err())
	}
	errs = append(errs, c.Config.Validate())
	if c.MaxSendBytes <= 0 {
		errs = append(errs, fmt.Errorf("--max-send-bytes must be positive, got %d", c.MaxSendBytes))
	}
	if c.CompressMinBytes < 0 {
		errs = append(errs, fmt.Errorf("--compress-min-bytes must not be negative, got %d", c.CompressMinBytes))
	}
	return errors.Join(errs...)
}

// Option overrides a dependency, for the all-in-one process and tests.
type Option func(*deps)

type deps struct {
	log     *slog.Logger
	reg     prometheus.Registerer
	outputs snapshots.Store[*snapshotv1.OutputSnapshot]
	redis   redis.UniversalClient
	acks    snapshots.AckStore
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

// WithRedis sets the Redis client for acknowledgements (and for outputs,
// unless WithOutputs sets them), instead of one built from the
// configuration. The caller closes it.
func WithRedis(c redis.UniversalClient) Option { return func(d *deps) { d.redis = c } }

// WithAcks sets where acknowledgements are kept when the service runs
// without Redis: the all-in-one process shares one memory store with
// translation, which reports failed applies in policy statuses. With Redis
// the acks are always in Redis.
func WithAcks(a snapshots.AckStore) Option { return func(d *deps) { d.acks = a } }

// Service is a built distribution service.
type Service struct {
	cfg     Config
	log     *slog.Logger
	dist    *app.Distributor
	handler *connectrpc.Handler
	// redis is closed by Run when the service built it.
	redis redis.UniversalClient
	// revoked follows registration's revocation set; nil without Redis.
	revoked *revocation.Cache
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
	s := &Service{cfg: cfg, log: d.log.With("service", Name)}
	client := d.redis
	if client == nil && cfg.Redis.Enabled() {
		c, err := cfg.Redis.NewClient(s.log)
		if err != nil {
			return nil, err
		}
		client, s.redis = c, c
	}
	if d.outputs == nil {
		if client == nil {
			return nil, errors.New("distribution needs --redis-addrs when it runs on its own: outputs come from the shared store")
		}
		d.outputs = snapstore.NewRedis(client, cfg.Install, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	}
	// With Redis every replica records acks in it, so any replica answers
	// ListAcks and reports the same metrics. Without it (one all-in-one
	// process) they live in memory.
	var acks app.AckStore = memory.NewAcks(d.acks)
	var indexes app.IndexStore = memory.NewIndexes()
	if client != nil {
		acks = redisadapter.NewAcks(client, cfg.Install).WithDurability(cfg.Redis.Durability())
		indexes = redisadapter.NewIndexes(client, cfg.Install)
		s.revoked = revocation.NewCache(revredis.NewSource(client, cfg.Install), 0, s.log)
		_ = s.revoked.Prime(primeTimeout)
	}
	var dist *app.Distributor
	m, err := newMetrics(d.reg, func(ctx context.Context) ([]app.AckRecord, map[string]string, error) { return dist.ListAcks(ctx) }, s.log)
	if err != nil {
		s.closeRedis()
		return nil, err
	}
	dopts := []app.DistributorOption{app.WithMaxSendBytes(cfg.MaxSendBytes)}
	if cfg.Deltas {
		dopts = append(dopts, app.WithIndexes(indexes))
	}
	dist = app.NewDistributor(outputSource{d.outputs}, acks, m, s.log, dopts...)
	s.dist = dist
	s.handler = connectrpc.NewHandler(s.dist)
	return s, nil
}

// outputSource is the output store as distribution reads it: the stored
// bytes, where the store keeps them.
type outputSource struct {
	snapshots.Store[*snapshotv1.OutputSnapshot]
}

func (s outputSource) GetEncoded(ctx context.Context, cluster string) (snapshots.Encoded[*snapshotv1.OutputSnapshot], error) {
	return snapshots.GetEncoded(ctx, s.Store, cluster)
}

// RevocationChecker is the shared revocation set, for the server in front
// of the service (platform.RunMain installs it); nil without Redis.
func (s *Service) RevocationChecker() platform.RevocationChecker {
	if s.revoked == nil {
		return nil
	}
	return s.revoked
}

var _ platform.Component = (*Service)(nil)

// Mount registers the service's handlers on srv. Agents watch and ack for
// their own cluster; ListAcks is for management services and tools.
func (s *Service) Mount(srv *platform.Server) {
	opts := append(srv.HandlerOptions(), connect.WithCompressMinBytes(s.cfg.CompressMinBytes))
	srv.Handle(distributionv1connect.NewDistributionServiceHandler(s.handler, opts...))
	srv.Handle(s.handler.WatchHandler(opts...))
	srv.HandleAdmin(debughttp.SnapshotsPath, debughttp.Snapshots(s.dist.Snapshot, s.log))
	srv.RegisterServices(distributionv1connect.DistributionServiceName)
	srv.AddAccessPolicy(platform.AccessPolicy{
		distributionv1connect.DistributionServiceWatchProcedure:    platform.AllowCluster,
		distributionv1connect.DistributionServiceAckProcedure:      platform.AllowCluster,
		distributionv1connect.DistributionServiceListAcksProcedure: platform.AllowService,
	})
}

// Run follows the output store until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	defer s.closeRedis()
	if s.revoked == nil {
		return s.dist.Run(ctx)
	}
	return platform.RunAll(ctx, s.dist.Run, s.revoked.Run)
}

func (s *Service) closeRedis() {
	if s.redis != nil {
		_ = s.redis.Close()
	}
}

// primeTimeout bounds the first load of the revocation set before the
// service serves: a call it cannot check is refused, not admitted.
const primeTimeout = 5 * time.Second
