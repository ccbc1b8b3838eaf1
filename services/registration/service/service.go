// Package service is the composition root of the registration service.
package service

import (
	"context"
	"errors"
	"flag"
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

// Config is everything the service reads at start.
type Config struct {
	TrustDomain string
	// Config is the install name, which scopes the Redis keys, and the
	// Redis options.
	snapstore.Config
	// CADir holds the CA (root.crt, intermediate.crt, intermediate.key). A
	// development CA is created there when it is empty and no CA files are
	// given.
	CADir string
	// CARootCertFile, CAIntermediateCertFile and CAIntermediateKeyFile
	// bring your own intermediate. CARootCertFile with CARootKeyFile brings
	// your own root: a new intermediate is made from it at every start.
	CARootCertFile         string
	CARootKeyFile          string
	CAIntermediateCertFile string
	CAIntermediateKeyFile  string
	// TokensFile lists "<cluster> <token>" or "<cluster> sha256:<hex>":
	// static tokens that may be used many times (demos, tests).
	TokensFile string
	// RelayTokenFile holds the shared relay identity token. Setting it turns
	// on the compatibility mode: any cluster may register with it and waits
	// for approval.
	RelayTokenFile string
	// CertTTL is the lifetime of cluster certificates.
	CertTTL time.Duration
	// TokenTTL is the default lifetime of a bootstrap token.
	TokenTTL time.Duration
	// AdvertiseAddr is the address agents dial, given back in the Helm
	// values of a new cluster.
	AdvertiseAddr string
	// RevocationRefresh is how often the shared revocation set is reloaded.
	RevocationRefresh time.Duration
	// IntermediateTTL is the default lifetime of the Istio intermediate CAs
	// that SignIntermediate signs for VirtualMeshes.
	IntermediateTTL time.Duration
	// VirtualMeshRootsDir keeps the generated VirtualMesh roots when no
	// Kubernetes Secret store is configured; empty means
	// <CADir>/virtualmesh-roots.
	VirtualMeshRootsDir string
	// Kubeconfig reaches the management cluster; empty means the in-cluster
	// configuration (or $KUBECONFIG) when a Kubernetes feature below is on.
	Kubeconfig string
	// CASecret ("<namespace>/<name>") keeps the CA in a Secret instead of
	// CADir: a development CA is made there on first start, or the Secret
	// holds your own intermediate or root.
	CASecret string
	// VirtualMeshRootsNamespace keeps the generated VirtualMesh roots as
	// Secrets in this namespace instead of VirtualMeshRootsDir.
	VirtualMeshRootsNamespace string
	// MirrorNamespace, when set, mirrors every cluster record as a
	// KubernetesCluster in this namespace.
	MirrorNamespace string
	// MirrorResync is how often every mirror is rewritten and stale ones
	// removed.
	MirrorResync time.Duration

	flags *platform.Flags
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		TrustDomain: pki.DefaultTrustDomain, Config: snapstore.DefaultConfig(), CADir: "/var/run/meshplane/ca",
		CertTTL: 24 * time.Hour, TokenTTL: 24 * time.Hour, RevocationRefresh: app.DefaultRevocationRefresh,
		IntermediateTTL: domain.DefaultIntermediateTTL, MirrorResync: app.DefaultMirrorResync,
	}
}

// AddFlags registers the configuration's flags: install, redis-* and
// AddOwnFlags. An all-in-one process, which registers install and redis-*
// once for every service, calls AddOwnFlags alone.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	c.flags = platform.NewFlags(fs, "")
	c.Config.AddFlags(fs, "install name; scopes the Redis keys")
	c.AddOwnFlags(c.flags)
}

// AddOwnFlags registers the flags that only registration has, on f.
func (c *Config) AddOwnFlags(f *platform.Flags) {
	f.String(&c.CADir, "ca-dir", "directory of the CA (root.crt, intermediate.crt, intermediate.key); a development CA is created when empty")
	f.String(&c.CARootCertFile, "ca-root-cert-file", "PEM root of your own PKI; with --ca-intermediate-*-file or --ca-root-key-file instead of --ca-dir")
	f.String(&c.CARootKeyFile, "ca-root-key-file", "PEM key of --ca-root-cert-file: a new intermediate is made from it at start")
	f.String(&c.CAIntermediateCertFile, "ca-intermediate-cert-file", "PEM intermediate of your own PKI, signed by --ca-root-cert-file")
	f.String(&c.CAIntermediateKeyFile, "ca-intermediate-key-file", "PEM key of --ca-intermediate-cert-file")
	f.String(&c.TokensFile, "bootstrap-tokens-file", "file of \"<cluster> <token>\" lines: static tokens that may be used many times (demos and tests)")
	f.String(&c.RelayTokenFile, "relay-identity-token-file", "file holding a shared relay identity token; any cluster may register with it and then waits for approval (compatibility mode)")
	f.Duration(&c.CertTTL, "cert-ttl", "lifetime of cluster certificates")
	f.Duration(&c.TokenTTL, "bootstrap-token-ttl", "default lifetime of a bootstrap token made by 'meshctl cluster register'")
	f.String(&c.AdvertiseAddr, "advertise-addr", "address (host:port) agents dial, put in the Helm values of new clusters")
	f.Duration(&c.RevocationRefresh, "revocation-refresh", "how often the shared revocation set is reloaded from the store")
	f.Duration(&c.IntermediateTTL, "virtual-mesh-intermediate-ttl", "default lifetime of the Istio intermediate CAs signed for VirtualMeshes with shared trust (capped by the root)")
	f.String(&c.VirtualMeshRootsDir, "virtual-mesh-roots-dir", "directory of the generated VirtualMesh roots when they are not kept in Secrets; empty means <ca-dir>/virtualmesh-roots")
	f.String(&c.Kubeconfig, "kubeconfig", "kubeconfig of the management cluster; empty means in-cluster (needed by --ca-secret, --virtual-mesh-roots-namespace, --mirror-namespace and VirtualMesh roots from Secrets)")
	f.String(&c.CASecret, "ca-secret", "<namespace>/<name> of a Secret that keeps the CA instead of --ca-dir: a development CA is made there on first start, or it holds your own root.crt with intermediate.crt and intermediate.key, or root.crt with root.key")
	f.String(&c.VirtualMeshRootsNamespace, "virtual-mesh-roots-namespace", "namespace whose Secrets keep the generated VirtualMesh roots (shared by replicas) instead of --virtual-mesh-roots-dir")
	f.String(&c.MirrorNamespace, "mirror-namespace", "namespace of the management cluster where every cluster record is mirrored as a KubernetesCluster; empty means no mirror")
	f.Duration(&c.MirrorResync, "mirror-resync", "how often every KubernetesCluster mirror is rewritten and mirrors of clusters without a record are removed")
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.flags != nil {
		errs = append(errs, c.flags.Err())
	}
	errs = append(errs, c.Config.Validate())
	if err := pki.ValidateTrustDomain(c.TrustDomain); err != nil {
		errs = append(errs, fmt.Errorf("--trust-domain: %w", err))
	}
	if c.CASecret != "" {
		if _, _, err := splitRef(c.CASecret); err != nil {
			errs = append(errs, fmt.Errorf("--ca-secret: %w", err))
		}
		if c.CARootCertFile != "" || c.CARootKeyFile != "" || c.CAIntermediateCertFile != "" || c.CAIntermediateKeyFile != "" {
			errs = append(errs, errors.New("--ca-secret cannot be combined with --ca-*-file: put your own root or intermediate in the Secret"))
		}
	}
	for flag, ns := range map[string]string{"--virtual-mesh-roots-namespace": c.VirtualMeshRootsNamespace, "--mirror-namespace": c.MirrorNamespace} {
		if ns != "" {
			if err := pki.ValidateName(ns); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", flag, err))
			}
		}
	}
	if c.MirrorResync <= 0 {
		errs = append(errs, errors.New("--mirror-resync must be positive"))
	}
	switch {
	case c.CASecret != "":
	case c.CAIntermediateCertFile != "" || c.CAIntermediateKeyFile != "":
		if c.CAIntermediateCertFile == "" || c.CAIntermediateKeyFile == "" || c.CARootCertFile == "" {
			errs = append(errs, errors.New("--ca-intermediate-cert-file, --ca-intermediate-key-file and --ca-root-cert-file go together"))
		}
		if c.CARootKeyFile != "" {
			errs = append(errs, errors.New("--ca-root-key-file cannot be combined with --ca-intermediate-*-file"))
		}
	case c.CARootKeyFile != "" || c.CARootCertFile != "":
		if c.CARootKeyFile == "" || c.CARootCertFile == "" {
			errs = append(errs, errors.New("--ca-root-cert-file needs --ca-root-key-file, or --ca-intermediate-cert-file and --ca-intermediate-key-file"))
		}
	case c.CADir == "":
		errs = append(errs, errors.New("--ca-dir must not be empty when no CA files are given"))
	}
	if c.CertTTL < time.Minute {
		errs = append(errs, errors.New("--cert-ttl must be at least 1m"))
	}
	if c.TokenTTL < time.Minute || c.TokenTTL > app.MaxTokenTTL {
		errs = append(errs, fmt.Errorf("--bootstrap-token-ttl must be between 1m and %s", app.MaxTokenTTL))
	}
	if c.RevocationRefresh <= 0 {
		errs = append(errs, errors.New("--revocation-refresh must be positive"))
	}
	if c.IntermediateTTL < time.Hour {
		errs = append(errs, errors.New("--virtual-mesh-intermediate-ttl must be at least 1h"))
	}
	return errors.Join(errs...)
}

// splitRef parses "<namespace>/<name>".
func splitRef(s string) (namespace, name string, err error) {
	ns, n, ok := strings.Cut(s, "/")
	if !ok {
		return "", "", fmt.Errorf("%q is not <namespace>/<name>", s)
	}
	if err := pki.ValidateName(ns); err != nil {
		return "", "", fmt.Errorf("namespace: %w", err)
	}
	if err := pki.ValidateName(n); err != nil {
		return "", "", fmt.Errorf("name: %w", err)
	}
	return ns, n, nil
}

// wantsKube says whether a Kubernetes feature is on.
func (c *Config) wantsKube() bool {
	return c.Kubeconfig != "" || c.CASecret != "" || c.VirtualMeshRootsNamespace != "" || c.MirrorNamespace != ""
}

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
		var ca *pki.CA
		var err error
		if cfg.CASecret != "" {
			ca, err = loadCASecret(cfg, kc, log)
		} else {
			ca, err = loadCA(cfg, log)
		}
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
	if d.checker != nil {
		d.checker.set(revoked)
	}
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
		handler:   connectrpc.NewHandler(r, log, connectrpc.NewMetrics(d.reg)).WithIntermediates(ints),
		clusters:  connectrpc.NewClusterHandler(r, helm, log),
		tokens:    static,
		revoked:   revoked,
		mirroring: mirroring,
		ca:        d.ca,
		log:       log,
	}, nil
}

// loadCA picks the CA the configuration names: your own intermediate, your
// own root, or the directory (a development CA when it is empty).
func loadCA(cfg Config, log *slog.Logger) (*pki.CA, error) {
	switch {
	case cfg.CAIntermediateCertFile != "":
		return pki.LoadCAFiles(cfg.CARootCertFile, cfg.CAIntermediateCertFile, cfg.CAIntermediateKeyFile)
	case cfg.CARootKeyFile != "":
		root, err := os.ReadFile(cfg.CARootCertFile)
		if err != nil {
			return nil, fmt.Errorf("read CA root: %w", err)
		}
		roots, err := pki.ParseCertificates(root)
		if err != nil {
			return nil, fmt.Errorf("CA root %s: %w", cfg.CARootCertFile, err)
		}
		keyPEM, err := os.ReadFile(cfg.CARootKeyFile)
		if err != nil {
			return nil, fmt.Errorf("read CA root key: %w", err)
		}
		key, err := pki.ParseKey(keyPEM)
		if err != nil {
			return nil, fmt.Errorf("CA root key %s: %w", cfg.CARootKeyFile, err)
		}
		// A year, capped by the root: long enough that a replica never
		// outlives it.
		return pki.NewIntermediateCA(roots[0], key, "Meshplane", 365*24*time.Hour)
	default:
		ca, created, err := pki.LoadOrCreateCA(cfg.CADir, "Meshplane")
		if err != nil {
			return nil, err
		}
		if created {
			log.Warn("created a development CA; supply your own for production", "dir", cfg.CADir)
		}
		return ca, nil
	}
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

// loadCASecret loads the CA from --ca-secret, making a development CA
// there when the Secret does not exist.
func loadCASecret(cfg Config, kc *kubeClients, log *slog.Logger) (*pki.CA, error) {
	ns, name, err := splitRef(cfg.CASecret)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca, created, err := kube.NewCASecret(kc.clientset, ns, name, cfg.Install).LoadOrCreate(ctx, func() (*pki.CA, error) { return pki.NewCA("Meshplane") })
	if err != nil {
		return nil, err
	}
	if created {
		log.Warn("created a development CA in a Secret; supply your own for production", "secret", cfg.CASecret)
	}
	return ca, nil
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
