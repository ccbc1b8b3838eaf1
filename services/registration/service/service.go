// Package service is the composition root of the registration service.
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	kubelib "github.com/meshplane/meshplane/libs/kube"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/connectrpc"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/files"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/inputs"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/kube"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/memory"
	redisstore "github.com/meshplane/meshplane/services/registration/internal/adapters/redis"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/smallstep"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Name is the service's name in its SPIFFE ID and metrics.
const Name = "registration"

// Option overrides a dependency, for the all-in-one process and tests.
type Option func(*deps)

type deps struct {
	log     *slog.Logger
	reg     prometheus.Registerer
	ca      *pki.CA
	redis   redis.UniversalClient
	checker *RevocationChecker
	inputs  snapshots.Store[*snapshotv1.InputSnapshot]
	now     func() time.Time
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(d *deps) { d.log = l } }

// WithRegisterer sets where metrics are registered.
func WithRegisterer(r prometheus.Registerer) Option { return func(d *deps) { d.reg = r } }

// WithCA sets the CA instead of loading it from the configuration.
func WithCA(ca *pki.CA) Option { return func(d *deps) { d.ca = ca } }

// WithRedis sets the Redis client instead of making one from cfg.Redis.
func WithRedis(c redis.UniversalClient) Option { return func(d *deps) { d.redis = c } }

// WithRevocationChecker makes rc answer from this service's revocation set.
// Create rc before the server (NewRevocationChecker) and put it in
// platform.ServerOptions.Revocation.
func WithRevocationChecker(rc *RevocationChecker) Option {
	return func(d *deps) { d.checker = rc }
}

// WithInputs sets the input snapshot store that SignIntermediate reads
// VirtualMeshes and meshes from, instead of the Redis one (the all-in-one
// process without Redis shares ingest's memory store this way).
func WithInputs(s snapshots.Store[*snapshotv1.InputSnapshot]) Option {
	return func(d *deps) { d.inputs = s }
}

// WithClock sets the clock, for tests of expiry.
func WithClock(now func() time.Time) Option { return func(d *deps) { d.now = now } }

// Service is a built registration service.
type Service struct {
	handler   *connectrpc.Handler
	clusters  *connectrpc.ClusterHandler
	tokens    *memory.Tokens
	revoked   *app.Revocations
	checker   *RevocationChecker
	mirroring *app.Mirroring
	ca        *pki.CA
	log       *slog.Logger
}

// New builds the service.
func New(cfg Config, opts ...Option) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := deps{log: slog.New(slog.NewTextHandler(io.Discard, nil)), reg: prometheus.NewRegistry(), now: time.Now}
	for _, o := range opts {
		o(&d)
	}
	log := d.log.With("service", Name)
	var kc *kubeClients
	if cfg.wantsKube() {
		var err error
		if kc, err = newKubeClients(cfg.Kubeconfig); err != nil {
			return nil, fmt.Errorf("registration: %w", err)
		}
	}
	if d.ca == nil {
		ca, err := loadCA(caSource(cfg, kc), log)
		if err != nil {
			return nil, fmt.Errorf("registration: %w", err)
		}
		d.ca = ca
	}
	signer, err := smallstep.New(d.ca)
	if err != nil {
		return nil, fmt.Errorf("registration: %w", err)
	}

	static := memory.NewTokens()
	if cfg.TokensFile != "" {
		if err := static.LoadFile(cfg.TokensFile); err != nil {
			return nil, fmt.Errorf("registration: %w", err)
		}
		log.Warn("static bootstrap tokens loaded: they may be used many times; use 'meshctl cluster register' outside demos and tests", "file", cfg.TokensFile)
	}
	var relay *domain.TokenHash
	if cfg.RelayTokenFile != "" {
		b, err := os.ReadFile(cfg.RelayTokenFile)
		if err != nil {
			return nil, fmt.Errorf("registration: read relay identity token: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if err := domain.ParseToken(tok); err != nil {
			return nil, fmt.Errorf("registration: relay identity token in %s is malformed", cfg.RelayTokenFile)
		}
		h := domain.HashToken(tok)
		relay = &h
		log.Info("shared relay identity token accepted: clusters that use it wait for approval")
	}

	stores := app.Stores{Static: static}
	if d.redis == nil && cfg.Redis.Enabled() {
		if d.redis, err = cfg.Redis.NewClient(log); err != nil {
			return nil, fmt.Errorf("registration: %w", err)
		}
	}
	if d.redis != nil {
		s := redisstore.New(d.redis, cfg.Install).WithDurability(cfg.Redis.Durability())
		stores.Tokens, stores.Clusters, stores.Revocations = s, s, s
	} else {
		stores.Tokens, stores.Clusters, stores.Revocations = memory.NewBootstrapTokens(), memory.NewClusters(), memory.NewRevocations()
	}
	revoked := app.NewRevocations(stores.Revocations, cfg.RevocationRefresh, log)
	_ = revoked.Prime(primeTimeout)
	if d.checker == nil {
		d.checker = NewRevocationChecker()
	}
	d.checker.set(revoked)
	var (
		mirroring *app.Mirroring
		reseed    *app.Reseeder
	)
	if cfg.MirrorNamespace != "" {
		// The mirrors are the durable copy of the records: what the store
		// loses is re-seeded from them, deregistered clusters revoked again.
		mirror := kube.NewMirror(kc.dynamic, cfg.MirrorNamespace, cfg.Install, d.reg)
		reseed = app.NewReseeder(stores.Clusters, mirror, app.NewRevoker(stores.Revocations, revoked), d.now, log)
		mirroring = app.NewMirroring(stores.Clusters, mirror, reseed, cfg.MirrorResync, log)
		log.Info("cluster records are mirrored as KubernetesClusters, and re-seeded from them", "namespace", cfg.MirrorNamespace)
		// Before serving: the revocations the mirrors hold are refused from
		// the first call, whatever the store lost.
		pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n, err := reseed.Preload(pctx)
		cancel()
		if err != nil {
			log.Warn("could not read the revocations kept in the KubernetesClusters before serving; the store's and the next resync's apply", "error", err)
		} else if n > 0 {
			log.Info("revocations read from the KubernetesClusters", "certificates", n)
		}
	}
	ropts := app.Options{
		TrustDomain: cfg.TrustDomain, CertTTL: cfg.CertTTL, TokenTTL: cfg.TokenTTL, RelayToken: relay, Log: log, Now: d.now,
		// Ingest keeps the management cluster's own input under the
		// install name (its --management-cluster-name default).
		Reserved: []string{cfg.Install},
		Reseed:   reseed,
	}
	if mirroring != nil {
		ropts.Changes = mirroring
	}
	r := app.NewRegistrar(stores, signer, revoked, ropts)
	if d.inputs == nil && d.redis != nil {
		d.inputs = snapstore.NewRedis(d.redis, cfg.Install, snapshots.Inputs, func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} })
	}
	ideps := app.IntermediateDeps{Clusters: stores.Clusters, CA: smallstep.VirtualMeshCA{}}
	if d.inputs != nil {
		ideps.VirtualMeshes = inputs.New(d.inputs)
	}
	if kc != nil {
		ideps.UserRoots = kube.NewUserRoots(kc.clientset)
	}
	if cfg.VirtualMeshRootsNamespace != "" {
		ideps.Roots = kube.NewRoots(kc.clientset, cfg.VirtualMeshRootsNamespace, cfg.Install)
	} else {
		rootsDir := cfg.VirtualMeshRootsDir
		if rootsDir == "" {
			rootsDir = filepath.Join(cfg.CADir, "virtualmesh-roots")
		}
		ideps.Roots = files.NewRoots(rootsDir)
	}
	ints := app.NewIntermediates(ideps, app.IntermediateOptions{DefaultTTL: cfg.IntermediateTTL, Log: log, Now: d.now})
	helm := map[string]string{
		"relayAddr":   cfg.AdvertiseAddr,
		"trustDomain": cfg.TrustDomain,
		"caBundle":    string(d.ca.TrustBundlePEM()),
	}
	return &Service{
		handler:   connectrpc.NewHandler(r, log, connectrpc.NewMetrics(d.reg), connectrpc.WithIntermediates(ints)),
		clusters:  connectrpc.NewClusterHandler(r, helm, log),
		tokens:    static,
		revoked:   revoked,
		checker:   d.checker,
		mirroring: mirroring,
		ca:        d.ca,
		log:       log,
	}, nil
}

// caName names the development CAs and the intermediates made from the
// operator's root.
const caName = "Meshplane"

// caSource is where the configuration says the CA comes from: a Secret,
// your own intermediate, your own root, or the directory (a development CA
// when it is empty). Validate has checked that the flags go together.
func caSource(cfg Config, kc *kubeClients) app.CASource {
	switch {
	case cfg.CASecret != "":
		ns, name, _ := splitRef(cfg.CASecret)
		return kube.NewCASecretSource(kc.clientset, ns, name, cfg.Install, caName)
	case cfg.CAIntermediateCertFile != "":
		return files.NewOwnIntermediate(cfg.CARootCertFile, cfg.CAIntermediateCertFile, cfg.CAIntermediateKeyFile)
	case cfg.CARootKeyFile != "":
		// A year, capped by the root: long enough that a replica never
		// outlives it.
		return files.NewOwnRoot(cfg.CARootCertFile, cfg.CARootKeyFile, caName, 365*24*time.Hour)
	default:
		return files.NewCADir(cfg.CADir, caName)
	}
}

// loadCA loads the CA from src, warning when a development CA was made.
func loadCA(src app.CASource, log *slog.Logger) (*pki.CA, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca, created, err := src.LoadCA(ctx)
	if err != nil {
		return nil, err
	}
	if created {
		log.Warn("created a development CA; supply your own for production", "source", src.String())
	}
	return ca, nil
}

// AddBootstrapToken registers a static token for a cluster; only its hash
// is kept. Like the tokens file, it may be used many times.
func (s *Service) AddBootstrapToken(cluster, token string) { s.tokens.Set(cluster, token) }

// TrustBundlePEM returns the root of the CA that signs cluster
// certificates.
func (s *Service) TrustBundlePEM() []byte { return s.ca.TrustBundlePEM() }

// Revocations returns the service's revocation set as the platform asks for
// it.
func (s *Service) Revocations() platform.RevocationChecker { return s.revoked }

// RevocationChecker answers from this service's revocation set (the one
// WithRevocationChecker gave, or its own), for the server in front of it.
func (s *Service) RevocationChecker() platform.RevocationChecker { return s.checker }

var _ platform.Component = (*Service)(nil)

// Mount registers the service's handlers on srv. Register and
// GetTrustBundle need no client certificate; Renew needs the cluster's;
// ClusterService admits only management service identities (meshctl
// presents one), never an agent.
func (s *Service) Mount(srv *platform.Server) {
	srv.Handle(registrationv1connect.NewRegistrationServiceHandler(s.handler, srv.HandlerOptions()...))
	srv.Handle(registrationv1connect.NewClusterServiceHandler(s.clusters, srv.HandlerOptions()...))
	srv.RegisterServices(registrationv1connect.RegistrationServiceName, registrationv1connect.ClusterServiceName)
	srv.AddAccessPolicy(platform.AccessPolicy{
		registrationv1connect.RegistrationServiceRegisterProcedure:       platform.AllowPublic,
		registrationv1connect.RegistrationServiceGetTrustBundleProcedure: platform.AllowPublic,
		registrationv1connect.RegistrationServiceRenewProcedure:          platform.AllowCluster,
		// The caller's cluster, from its certificate, is the only cluster
		// it may ask for; services never hold Istio CAs.
		registrationv1connect.RegistrationServiceSignIntermediateProcedure: platform.AllowCluster,
		"/" + registrationv1connect.ClusterServiceName + "/":               platform.AllowService,
	})
}

// Run reloads the shared revocation set, and keeps the KubernetesCluster
// mirror when one is configured, until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	if s.mirroring == nil {
		return s.revoked.Run(ctx)
	}
	return platform.RunAll(ctx, s.revoked.Run, s.mirroring.Run)
}

// kubeClients reach the management cluster.
type kubeClients struct {
	clientset kubernetes.Interface
	dynamic   dynamic.Interface
}

func newKubeClients(kubeconfig string) (*kubeClients, error) {
	rc, err := kubelib.RESTConfigFromKubeconfig(kubeconfig, "")
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "meshplane-registration"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &kubeClients{clientset: cs, dynamic: dyn}, nil
}

// RevocationChecker is a platform.RevocationChecker that exists before the
// service does, because the server's options are fixed before the service
// is built. Until New attaches the service's set it refuses every call
// that presents a certificate (CodeUnavailable); New runs before the server
// serves, so in practice it never does.
type RevocationChecker struct {
	p atomic.Pointer[app.Revocations]
}

var _ platform.RevocationChecker = (*RevocationChecker)(nil)

// NewRevocationChecker returns a checker to pass to WithRevocationChecker.
func NewRevocationChecker() *RevocationChecker { return &RevocationChecker{} }

func (c *RevocationChecker) set(r *app.Revocations) { c.p.Store(r) }

// IsRevoked implements platform.RevocationChecker.
func (c *RevocationChecker) IsRevoked(ctx context.Context, serial string) (bool, error) {
	r := c.p.Load()
	if r == nil {
		return false, connect.NewError(connect.CodeUnavailable, errors.New("revocation set not loaded yet"))
	}
	return r.IsRevoked(ctx, serial)
}

// primeTimeout bounds the first load of the revocation set before the
// service serves: a call it cannot check is refused, not admitted.
const primeTimeout = 5 * time.Second
