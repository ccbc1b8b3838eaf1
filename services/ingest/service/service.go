// Package service is the composition root of the ingest service.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/revocation"
	revredis "github.com/meshplane/meshplane/libs/revocation/redis"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/ingest/internal/adapters/connectrpc"
	ingestkube "github.com/meshplane/meshplane/services/ingest/internal/adapters/kube"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"k8s.io/client-go/rest"
)

// Name is the service's name in its SPIFFE ID and metrics.
const Name = "ingest"

// Config is everything the service reads at start.
type Config struct {
	snapstore.Config
	// Replica names this process in connectivity reports; default the host
	// name (the pod name in Kubernetes).
	Replica string
	// Translation is how to reach the translation service; unused when the
	// all-in-one process wires translation in directly.
	Translation platform.ClientOptions
	// FlushInterval is how often snapshots accepted while Redis was down
	// are retried.
	FlushInterval time.Duration
	// StaleAfter is how long after its last push a cluster whose agent is
	// not connected is reported stale. Its snapshot stays in use. Zero
	// turns stale reporting off.
	StaleAfter time.Duration
	// WatchManagement says whether the management cluster's own Meshplane
	// resources are read: "auto" (when Kubeconfig is set or the process
	// runs in a pod), "true" or "false".
	WatchManagement string
	// ManagementCluster names the management cluster's input; the install
	// name when empty, as translation expects.
	ManagementCluster string
	// Kubeconfig and KubeContext reach the management cluster; empty means
	// the in-cluster configuration.
	Kubeconfig  string
	KubeContext string
	// ManagementDebounce is how long the management cluster's resources
	// must be quiet before a change is pushed.
	ManagementDebounce time.Duration
	// AccessLogs bound the access-log buffers.
	AccessLogs AccessLogOptions
	// Limits bound the objects of each kind in a workload cluster's input
	// snapshot; a push over one is refused and the last good one stays.
	Limits Limits

	flags *platform.Flags
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	tr := platform.NewClientOptions()
	tr.Addr = "translation:9903"
	return Config{Config: snapstore.DefaultConfig(), Replica: host, Translation: tr, FlushInterval: time.Second, StaleAfter: 5 * time.Minute,
		WatchManagement: "auto", ManagementDebounce: 100 * time.Millisecond, AccessLogs: DefaultAccessLogOptions(), Limits: DefaultLimits()}
}

// AddFlags registers the configuration's flags.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	c.flags = platform.NewFlags(fs, "")
	c.Config.AddFlags(fs, "install name; selects the install's keys in Redis")
	c.AddOwnFlags(c.flags)
	c.flags.String(&c.Kubeconfig, "kubeconfig", "kubeconfig of the management cluster (default: in-cluster)")
	c.flags.String(&c.KubeContext, "kube-context", "kubeconfig context of the management cluster (default: the current one)")
	c.Translation.AddFlags(fs, "translation")
}

// AddOwnFlags registers the flags that only ingest has, on f: the
// all-in-one process registers them next to the other services' flags, and
// shares --kubeconfig and --kube-context with registration. Validate
// reports f's parse errors.
func (c *Config) AddOwnFlags(f *platform.Flags) {
	c.flags = f
	f.String(&c.Replica, "replica", "name of this replica in connectivity reports")
	f.Duration(&c.FlushInterval, "flush-interval", "how often snapshots kept in memory during a Redis outage are retried")
	f.Duration(&c.StaleAfter, "stale-after", "how long after its last push a disconnected cluster is reported stale (0: never)")
	f.String(&c.WatchManagement, "watch-management-cluster", "read the Meshplane resources applied in the management cluster: auto (when --kubeconfig is set or running in a pod), true or false")
	f.String(&c.ManagementCluster, "management-cluster-name", "cluster name of the management cluster's input (default: the install name)")
	f.Duration(&c.ManagementDebounce, "management-debounce", "how long the management cluster's resources must be quiet before a change is pushed")
	c.addAccessLogFlags()
	c.addLimitFlags()
}

// Validate checks the configuration. The translation client is checked by
// New, which knows whether it is needed.
func (c *Config) Validate() error {
	var errs []error
	if c.flags != nil {
		errs = append(errs, c.flags.Err())
	}
	errs = append(errs, c.Config.Validate())
	if c.FlushInterval <= 0 {
		errs = append(errs, errors.New("--flush-interval must be positive"))
	}
	if c.StaleAfter < 0 {
		errs = append(errs, errors.New("--stale-after must not be negative"))
	}
	switch c.WatchManagement {
	case "auto", "true", "false":
	default:
		errs = append(errs, fmt.Errorf("--watch-management-cluster must be auto, true or false, not %q", c.WatchManagement))
	}
	if c.ManagementDebounce <= 0 {
		errs = append(errs, errors.New("--management-debounce must be positive"))
	}
	errs = append(errs, c.AccessLogs.Validate(), c.Limits.Validate())
	return errors.Join(errs...)
}

// managementCluster is the name of the management cluster's input.
func (c *Config) managementCluster() string {
	if c.ManagementCluster != "" {
		return c.ManagementCluster
	}
	return c.Install
}

// WatchesManagement reports whether the management cluster's own
// resources are read, as the input named ManagementClusterName.
func (c *Config) WatchesManagement() bool {
	switch c.WatchManagement {
	case "false":
		return false
	case "auto":
		// When configured or in a pod.
		return c.Kubeconfig != "" || os.Getenv("KUBERNETES_SERVICE_HOST") != ""
	}
	return true
}

// ManagementClusterName is the name of the management cluster's input.
func (c *Config) ManagementClusterName() string { return c.managementCluster() }

// managementREST returns how to reach the management cluster, or nil when
// its resources are not to be read.
func (c *Config) managementREST() (*rest.Config, error) {
	if !c.WatchesManagement() {
		return nil, nil
	}
	if c.Kubeconfig == "" && c.KubeContext == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	return kube.RESTConfigFromKubeconfig(c.Kubeconfig, c.KubeContext)
}

// TranslationNotifier tells translation about a changed input. The
// translation service's *service.Service satisfies it, for the all-in-one
// process.
type TranslationNotifier = app.TranslationNotifier

// Option overrides a dependency, for the all-in-one process and tests.
type Option func(*deps)

type deps struct {
	log      *slog.Logger
	reg      prometheus.Registerer
	inputs   snapshots.Store[*snapshotv1.InputSnapshot]
	shared   *snapstore.Redis[*snapshotv1.InputSnapshot]
	outputs  app.OutputSource
	notifier TranslationNotifier
	now      func() time.Time
	redis    redis.UniversalClient
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(d *deps) { d.log = l } }

// WithRegisterer sets where metrics are registered.
func WithRegisterer(r prometheus.Registerer) Option { return func(d *deps) { d.reg = r } }

// WithInputs sets the input store instead of the one the configuration
// names. The store is used as it is: nothing is kept in memory while it is
// down, and nothing written back when it comes back empty (see
// WithSharedInputs).
func WithInputs(s snapshots.Store[*snapshotv1.InputSnapshot]) Option {
	return func(d *deps) { d.inputs = s }
}

// WithSharedInputs sets the Redis input store instead of one built from
// cfg.Redis, with everything ingest does for its own: pushes are kept in
// memory while Redis is down and written through when it returns, and the
// inputs of connected clusters are written back when Redis comes back
// empty. The all-in-one process passes the store its other services read.
func WithSharedInputs(s *snapstore.Redis[*snapshotv1.InputSnapshot]) Option {
	return func(d *deps) { d.shared = s }
}

// WithOutputs sets where translation's outputs are read, for writing the
// statuses of the management cluster's resources, instead of the Redis
// store the configuration names.
func WithOutputs(s snapshots.Store[*snapshotv1.OutputSnapshot]) Option {
	return func(d *deps) { d.outputs = s }
}

// WithRedis sets the Redis client instead of one built from cfg.Redis: for
// the input store unless WithInputs or WithSharedInputs sets it, for
// sharing access logs with the other replicas, and for reading outputs
// unless WithOutputs sets them. The caller closes it. The all-in-one
// process passes its own client with its own input store, so that access
// logs are shared all the same.
func WithRedis(c redis.UniversalClient) Option { return func(d *deps) { d.redis = c } }

// WithNotifier sets how translation is told about changes, instead of a
// client of cfg.Translation.
func WithNotifier(n TranslationNotifier) Option { return func(d *deps) { d.notifier = n } }

// WithClock sets the clock that push times and staleness are read from,
// for tests.
func WithClock(now func() time.Time) Option { return func(d *deps) { d.now = now } }

// Service is a built ingest service.
type Service struct {
	ingestor *app.Ingestor
	handler  *connectrpc.Handler
	// flusher writes through to shared what was pushed while Redis was
	// down; nil without Redis.
	flusher *snapstore.WriteThrough[*snapshotv1.InputSnapshot]
	flush   time.Duration
	redis   redis.UniversalClient
	// ownRedis: New built redis from the configuration, and Run closes it.
	ownRedis bool
	// shared is the Redis store behind the write-through one; nil without
	// Redis. restorer writes back to it what it loses.
	shared   *snapstore.Redis[*snapshotv1.InputSnapshot]
	restorer *app.Restorer
	// revoked follows registration's revocation set; nil without Redis.
	revoked *revocation.Cache
	// mgmt reads the management cluster's resources; nil when off. Its
	// statuses are written by statuses through outputs, when both are set.
	mgmt     *app.Management
	outputs  app.OutputSource
	statuses app.StatusWriter
	// logs holds the access logs agents push; logsHandler serves them.
	logs        *app.AccessLogs
	logsHandler *connectrpc.AccessLogHandler
	log         *slog.Logger
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
	s := &Service{flush: cfg.FlushInterval, log: log}
	newInput := func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} }
	s.redis = d.redis
	if d.inputs == nil && d.shared == nil {
		if s.redis == nil && cfg.Redis.Enabled() {
			client, err := cfg.Redis.NewClient(log)
			if err != nil {
				return nil, err
			}
			s.redis, s.ownRedis = client, true
		}
		if client := s.redis; client != nil {
			s.revoked = revocation.NewCache(revredis.NewSource(client, cfg.Install), 0, log)
			_ = s.revoked.Prime(primeTimeout)
			d.shared = snapstore.NewRedis(client, cfg.Install, snapshots.Inputs, newInput).WithDurability(cfg.Redis.Durability())
		}
	}
	switch {
	case d.inputs != nil: // WithInputs: used as it is
	case d.shared != nil:
		// Pushes are accepted while Redis is down and written through
		// when it returns; the restorer (below) writes back what it lost.
		s.shared = d.shared
		s.flusher = snapstore.NewWriteThrough(s.shared, snapstore.NewMemory(newInput), log)
		d.inputs = s.flusher
	default:
		d.inputs = snapstore.NewMemory(newInput)
	}
	if d.notifier == nil {
		if err := cfg.Translation.Validate(); err != nil {
			return nil, err
		}
		httpClient, err := platform.NewHTTPClient(cfg.Translation, log)
		if err != nil {
			return nil, err
		}
		d.notifier = connectrpc.NewNotifier(httpClient, platform.BaseURL(cfg.Translation), platform.DefaultClientOptions(cfg.Translation)...)
	}
	m, err := newMetrics(d.reg)
	if err != nil {
		return nil, err
	}
	ingOpts := []app.IngestorOption{app.WithStaleAfter(cfg.StaleAfter), app.WithLimits(cfg.Limits)}
	if d.now != nil {
		ingOpts = append(ingOpts, app.WithClock(d.now))
	}
	s.ingestor = app.NewIngestor(encodingStore{d.inputs}, d.notifier, m, log, cfg.Replica, ingOpts...)
	if err := d.reg.Register(newStaleCollector(s.ingestor)); err != nil {
		return nil, err
	}
	s.handler = connectrpc.NewHandler(s.ingestor, log)
	if s.shared != nil {
		s.restorer = app.NewRestorer(s.ingestor, s.shared, cfg.FlushInterval, log)
	}
	if err := s.buildManagement(cfg, d); err != nil {
		return nil, err
	}
	if err := s.buildAccessLogs(cfg, d); err != nil {
		return nil, err
	}
	return s, nil
}

// buildManagement sets up the reading of the management cluster's own
// resources, when configured, and the write-back of their statuses.
func (s *Service) buildManagement(cfg Config, d deps) error {
	restCfg, err := cfg.managementREST()
	if err != nil {
		return fmt.Errorf("management cluster: %w", err)
	}
	if restCfg == nil {
		s.log.Info("not reading the management cluster's resources (--watch-management-cluster)", "mode", cfg.WatchManagement)
		return nil
	}
	res, err := ingestkube.NewResources(restCfg, s.log)
	if err != nil {
		return err
	}
	name := cfg.managementCluster()
	s.mgmt = app.NewManagement(s.ingestor, res, name, cfg.ManagementDebounce, time.Second, s.log)
	s.outputs = d.outputs
	if s.outputs == nil && s.redis != nil {
		s.outputs = snapstore.NewRedis(s.redis, cfg.Install, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	}
	if s.outputs == nil {
		s.log.Warn("statuses of the management cluster's resources are not written: no output store (Redis) to read them from")
	} else {
		s.statuses = ingestkube.NewStatusWriter(res.Dynamic())
	}
	s.log.Info("reading the management cluster's resources", "cluster", name, "host", restCfg.Host)
	return nil
}

// ClusterState is what a replica knows of one cluster's pushes.
type ClusterState = app.ClusterState

// Clusters returns the state of every cluster seen by this replica.
func (s *Service) Clusters() []ClusterState { return s.ingestor.Clusters() }

// Mount registers the service's handlers on srv. Agents push for their own
// cluster; the queries are for management services and tools.
func (s *Service) Mount(srv *platform.Server) {
	srv.Handle(connectrpc.NewServiceHandler(connectrpc.WithAccessLogs(s.handler, s.logsHandler), s.handler, srv.HandlerOptions()...))
	srv.RegisterServices(ingestv1connect.IngestServiceName)
	srv.AddAccessPolicy(platform.AccessPolicy{
		ingestv1connect.IngestServicePushProcedure:             platform.AllowCluster,
		ingestv1connect.IngestServiceListClustersProcedure:     platform.AllowService,
		ingestv1connect.IngestServiceGetInputSnapshotProcedure: platform.AllowService,
		ingestv1connect.IngestServiceListMeshesProcedure:       platform.AllowService,
		ingestv1connect.IngestServiceListWorkloadsProcedure:    platform.AllowService,
		ingestv1connect.IngestServiceListDestinationsProcedure: platform.AllowService,
		ingestv1connect.IngestServicePushAccessLogsProcedure:   platform.AllowCluster,
		ingestv1connect.IngestServiceWatchAccessLogsProcedure:  platform.AllowService,
	})
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

// Run writes through snapshots kept in memory during a Redis outage, and
// restores what Redis lost when it comes back empty, until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		if s.ownRedis {
			s.redis.Close()
		}
	}()
	if s.restorer != nil {
		wg.Go(func() { s.restorer.Run(ctx) })
	}
	if s.revoked != nil {
		wg.Go(func() { _ = s.revoked.Run(ctx) })
	}
	wg.Go(func() { _ = s.logs.RunBus(ctx) })
	if s.mgmt != nil {
		wg.Go(func() {
			if err := s.mgmt.Run(ctx); err != nil {
				s.log.Error("reading the management cluster's resources stopped", "error", err)
			}
		})
		if s.statuses != nil {
			wg.Go(func() { _ = s.mgmt.RunStatuses(ctx, s.outputs, s.statuses) })
		}
	}
	if s.flusher != nil {
		s.flusher.Run(ctx, s.flush)
		return nil
	}
	<-ctx.Done()
	return nil
}

var _ app.ResyncingStore = (*snapstore.Redis[*snapshotv1.InputSnapshot])(nil)

// encodingStore gives any store the PutEncoded that the ingestor uses.
type encodingStore struct {
	snapshots.Store[*snapshotv1.InputSnapshot]
}

func (s encodingStore) PutEncoded(ctx context.Context, cluster string, e snapshots.Encoded[*snapshotv1.InputSnapshot]) error {
	return snapshots.PutEncoded(ctx, s.Store, cluster, e)
}

// primeTimeout bounds the first load of the revocation set before the
// service serves: a call it cannot check is refused, not admitted.
const primeTimeout = 5 * time.Second
