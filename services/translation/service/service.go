// Package service is the composition root of the translation service: its
// configuration, and the wiring of domain, app and adapters. The standalone
// binary and the all-in-one process both build the service here.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	kubelib "github.com/meshplane/meshplane/libs/kube"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/revocation"
	revredis "github.com/meshplane/meshplane/libs/revocation/redis"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/translation/internal/adapters/connectrpc"
	"github.com/meshplane/meshplane/services/translation/internal/adapters/kube"
	"github.com/meshplane/meshplane/services/translation/internal/app"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
)

// Name is the service's name in its SPIFFE ID and metrics.
const Name = "translation"

// Config is everything the service reads at start.
type Config struct {
	snapstore.Config
	ClusterDomain string
	Debounce      time.Duration
	// SafeStartWindow is how long publishing may wait after a start for
	// every registered cluster to report; zero disables safe mode.
	SafeStartWindow time.Duration
	// ClustersNamespace, when set, is where registration mirrors its
	// cluster records (its --mirror-namespace): the registered clusters
	// there are the ones every output expects, and safe mode waits for
	// them even after a lost Redis. Empty: safe mode waits for the
	// clusters with outputs in the output store, and outputs are always
	// complete.
	ClustersNamespace string
	// ExpectedRefresh is how often the expected clusters are read again.
	ExpectedRefresh time.Duration
	// ExpectManagementCluster says that ingest reads the management
	// cluster's own Meshplane resources (its --watch-management-cluster)
	// as the input named Install: that input is then expected too, like a
	// registered cluster's. Needs ClustersNamespace.
	ExpectManagementCluster bool
	// RecordsNamespace is the namespace of the management cluster where
	// the last valid version of every resource is kept (ResourceRecords),
	// so that a restart of the plane and a lost Redis cannot lose them
	// together. Empty keeps them in memory only.
	RecordsNamespace string
	// Kubeconfig and KubeContext reach the management cluster; an empty
	// Kubeconfig means the in-cluster configuration.
	Kubeconfig, KubeContext string
	// EncodingCacheMiB bounds the encodings of the last published outputs
	// kept so that the next versions copy their unchanged objects instead
	// of encoding them again (app.Config.EncodingCacheBytes).
	EncodingCacheMiB int

	flags *platform.Flags
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Config:          snapstore.DefaultConfig(),
		ClusterDomain:   "cluster.local",
		Debounce:        100 * time.Millisecond,
		SafeStartWindow: 60 * time.Second,
		ExpectedRefresh: app.DefaultExpectedRefresh,
		// The reference estate (C=100) keeps about 1.5 GB.
		EncodingCacheMiB: 2048,
	}
}

// AddFlags registers the configuration's flags.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	c.flags = platform.NewFlags(fs, "")
	c.Config.AddFlags(fs, "install name, the value of the meshplane.dev/managed-by label")
	c.flags.String(&c.ClusterDomain, "cluster-domain", "DNS suffix of Services in workload clusters")
	c.flags.Duration(&c.Debounce, "debounce", "least time between two translations: a change is translated at once when none ran within it, else with the others of its burst at its end; 0 translates every change at once")
	c.flags.Duration(&c.SafeStartWindow, "safe-start-window", "after a start or a store loss, how long publishing may wait for every expected cluster to report, and for the last valid versions to be read (0 disables safe mode)")
	c.flags.String(&c.Kubeconfig, "kubeconfig", "kubeconfig of the management cluster, for --records-namespace and --clusters-namespace; empty means in-cluster")
	c.flags.String(&c.KubeContext, "kube-context", "kubeconfig context of the management cluster (default: the current one)")
	c.flags.String(&c.ClustersNamespace, "clusters-namespace", "namespace of the management cluster where registration mirrors cluster records as KubernetesClusters (its --mirror-namespace); the registered ones are the clusters every output expects, and safe mode waits for them even after Redis restarts empty. Empty: safe mode waits for the clusters with outputs in Redis")
	c.flags.Duration(&c.ExpectedRefresh, "expected-clusters-refresh", "how often the KubernetesClusters in --clusters-namespace are read again")
	c.flags.Bool(&c.ExpectManagementCluster, "expect-management-cluster", "ingest reads the management cluster's own Meshplane resources (its --watch-management-cluster): their input, named the install name, is expected like a registered cluster's, so safe mode waits for it after Redis restarts empty and outputs built without it are incomplete; needs --clusters-namespace")
	c.AddOwnFlags(c.flags)
}

// AddOwnFlags registers the flags that the all-in-one process takes from
// translation as they are (the management cluster's kubeconfig is
// registration's there).
func (c *Config) AddOwnFlags(f *platform.Flags) {
	f.Int(&c.EncodingCacheMiB, "encoding-cache-mib", "MiB of the last published outputs' encodings kept, so that an edit re-encodes only the objects it changed (about the sum of every cluster's output size; 0 keeps none and encodes every output whole)")
	f.String(&c.RecordsNamespace, "records-namespace", "namespace of the management cluster where the last valid version of every resource is kept, so that a restart and a lost Redis cannot lose them (empty: in memory only)")
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.flags != nil {
		errs = append(errs, c.flags.Err())
	}
	errs = append(errs, c.Config.Validate())
	if c.Debounce < 0 {
		errs = append(errs, errors.New("--debounce must not be negative"))
	}
	if c.EncodingCacheMiB < 0 {
		errs = append(errs, errors.New("--encoding-cache-mib must not be negative"))
	}
	if c.SafeStartWindow < 0 {
		errs = append(errs, errors.New("--safe-start-window must not be negative"))
	}
	if c.ExpectedRefresh <= 0 {
		errs = append(errs, errors.New("--expected-clusters-refresh must be positive"))
	}
	if c.ClustersNamespace != "" {
		if err := validation.IsDNS1123Label(c.ClustersNamespace); len(err) > 0 {
			errs = append(errs, fmt.Errorf("--clusters-namespace %q: %s", c.ClustersNamespace, strings.Join(err, "; ")))
		}
	} else if c.ExpectManagementCluster {
		errs = append(errs, errors.New("--expect-management-cluster needs --clusters-namespace: the management cluster's input is expected beside the registered clusters"))
	}
	return errors.Join(errs...)
}

// Option overrides a dependency, for the all-in-one process and tests.
type Option func(*deps)

type deps struct {
	log     *slog.Logger
	reg     prometheus.Registerer
	inputs  InputStore
	outputs OutputStore
	redis   redis.UniversalClient
	acks    snapshots.AckStore
	hook    func(cluster string, out *snapshotv1.OutputSnapshot)
	// expected overrides the source ClustersNamespace names.
	expected app.ExpectedClusters
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(d *deps) { d.log = l } }

// WithRegisterer sets where metrics are registered.
func WithRegisterer(r prometheus.Registerer) Option { return func(d *deps) { d.reg = r } }

// InputStore is where inputs are read: a store that returns them in the
// encoding ingest stored (snapstore.Redis, Memory and WriteThrough do).
type InputStore interface {
	snapshots.Store[*snapshotv1.InputSnapshot]
	snapshots.EncodedGetter[*snapshotv1.InputSnapshot]
}

// OutputStore is where outputs are published: a store that keeps them by
// the encoding translation made (snapstore.Redis, Memory and WriteThrough
// are).
type OutputStore interface {
	snapshots.Store[*snapshotv1.OutputSnapshot]
	snapshots.EncodedPutter[*snapshotv1.OutputSnapshot]
}

var (
	_ app.InputSource     = InputStore(nil)
	_ app.OutputPublisher = OutputStore(nil)
)

// WithStores sets the input and output stores instead of the ones the
// configuration names.
func WithStores(in InputStore, out OutputStore) Option {
	return func(d *deps) { d.inputs, d.outputs = in, out }
}

// WithAcks sets where the agents' acknowledgements are read, for the
// all-in-one process; with Redis, translation reads distribution's acks
// from it. Objects that an agent could not apply make the policies behind
// them FAILED.
func WithAcks(a snapshots.AckStore) Option { return func(d *deps) { d.acks = a } }

// WithExpectedClusters sets where the expected clusters are read, instead
// of the KubernetesClusters in --clusters-namespace.
func WithExpectedClusters(e app.ExpectedClusters) Option { return func(d *deps) { d.expected = e } }

// WithTestOutputHook is for tests only: fn may change each output after
// translation, before it is sealed and published, for example to inject an
// object that the API server rejects. No flag or configuration sets it.
func WithTestOutputHook(fn func(cluster string, out *snapshotv1.OutputSnapshot)) Option {
	return func(d *deps) { d.hook = fn }
}

// Service is a built translation service.
type Service struct {
	log        *slog.Logger
	translator *app.Translator
	handler    *connectrpc.Handler
	redis      redis.UniversalClient
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
	log := d.log.With("service", Name)
	if d.inputs == nil || d.outputs == nil {
		if cfg.Redis.Enabled() {
			client, err := cfg.Redis.NewClient(log)
			if err != nil {
				return nil, err
			}
			d.redis = client
			d.inputs = snapstore.NewRedis(client, cfg.Install, snapshots.Inputs, newInput)
			d.outputs = snapstore.NewRedis(client, cfg.Install, snapshots.Outputs, newOutput).WithDurability(cfg.Redis.Durability())
			if d.acks == nil {
				d.acks = snapstore.NewRedisAcks(client, cfg.Install).WithDurability(cfg.Redis.Durability())
			}
		} else {
			d.inputs = snapstore.NewMemory(newInput)
			d.outputs = snapstore.NewMemory(newOutput)
		}
	}
	metrics, err := newMetrics(d.reg)
	if err != nil {
		return nil, err
	}
	if d.expected == nil && cfg.ClustersNamespace != "" {
		client, err := managementClient(cfg)
		if err != nil {
			return nil, fmt.Errorf("translation: --clusters-namespace needs the management cluster: %w", err)
		}
		d.expected = kube.NewExpectedClusters(client, cfg.ClustersNamespace, cfg.Install)
		log.Info("expected clusters are the registered KubernetesClusters", "namespace", cfg.ClustersNamespace)
	}
	var management string
	if cfg.ExpectManagementCluster {
		// The domain reads the input named Install as the management
		// cluster's.
		management = cfg.Install
	}
	var topts []app.TranslatorOption
	if cfg.RecordsNamespace != "" {
		store, err := newRecordStore(cfg, log)
		if err != nil {
			return nil, err
		}
		topts = append(topts, app.WithLastGoodStore(store))
	}
	if d.acks != nil {
		// Apply failures the agents report mark their policies FAILED.
		topts = append(topts, app.WithApplyReports(d.acks))
	}
	t := app.NewTranslator(app.Config{
		Domain:             domain.Options{Install: cfg.Install, ClusterDomain: cfg.ClusterDomain},
		Debounce:           cfg.Debounce,
		SafeStartWindow:    cfg.SafeStartWindow,
		Expected:           d.expected,
		ExpectedRefresh:    cfg.ExpectedRefresh,
		ExpectedManagement: management,
		TestOutputHook:     d.hook,
		EncodingCacheBytes: int64(cfg.EncodingCacheMiB) << 20,
	}, d.inputs, d.outputs, metrics, log, topts...)
	svc := &Service{log: log, translator: t, handler: connectrpc.NewHandler(t), redis: d.redis}
	if d.redis != nil {
		svc.revoked = revocation.NewCache(revredis.NewSource(d.redis, cfg.Install), 0, log)
		_ = svc.revoked.Prime(primeTimeout)
	}
	return svc, nil
}

// newRecordStore keeps the last valid versions in ResourceRecords of the
// management cluster.
func newRecordStore(cfg Config, log *slog.Logger) (*kube.LastGood, error) {
	rc, err := kubelib.RESTConfigFromKubeconfig(cfg.Kubeconfig, cfg.KubeContext)
	if err != nil {
		return nil, fmt.Errorf("translation: --records-namespace needs the management cluster: %w", err)
	}
	// The first start after an upgrade writes one record per valid
	// resource; client-go's default of 5 writes a second is too slow.
	rc.QPS, rc.Burst = 100, 200
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("translation: client of the management cluster: %w", err)
	}
	return kube.NewLastGood(client, cfg.RecordsNamespace, cfg.Install, log), nil
}

// managementClient reaches the management cluster, for the expected
// clusters.
func managementClient(cfg Config) (dynamic.Interface, error) {
	rc, err := kubelib.RESTConfigFromKubeconfig(cfg.Kubeconfig, cfg.KubeContext)
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "meshplane-translation"
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("client of the management cluster: %w", err)
	}
	return client, nil
}

func newInput() *snapshotv1.InputSnapshot   { return &snapshotv1.InputSnapshot{} }
func newOutput() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} }

// Mount registers the service's handlers on srv. Only other management
// services may call it.
func (s *Service) Mount(srv *platform.Server) {
	srv.Handle(translationv1connect.NewTranslationServiceHandler(s.handler, srv.HandlerOptions()...))
	srv.Handle(s.handler.NotifyHandler(srv.HandlerOptions()...))
	srv.RegisterServices(translationv1connect.TranslationServiceName)
	srv.AddAccessPolicy(platform.AccessPolicy{"/" + translationv1connect.TranslationServiceName + "/": platform.AllowService})
}

// Run runs the translator until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	defer func() {
		if s.redis != nil {
			s.redis.Close()
		}
	}()
	if s.revoked == nil {
		return s.translator.Run(ctx)
	}
	return platform.RunAll(ctx, s.translator.Run, s.revoked.Run)
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

// Notify hands a cluster's new input, encoded, to the translator in
// process; the all-in-one process wires ingest to it directly.
func (s *Service) Notify(_ context.Context, cluster, _ string, snapshot []byte) error {
	in := &snapshotv1.InputSnapshot{}
	if err := proto.Unmarshal(snapshot, in); err != nil {
		return fmt.Errorf("translation: decode the snapshot of cluster %q: %w", cluster, err)
	}
	if err := s.translator.Submit(cluster, in); err != nil {
		return fmt.Errorf("translation: %w", err)
	}
	return nil
}

// primeTimeout bounds the first load of the revocation set before the
// service serves: a call it cannot check is refused, not admitted.
const primeTimeout = 5 * time.Second
