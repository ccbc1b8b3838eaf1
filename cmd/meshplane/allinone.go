package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	console "github.com/meshplane/meshplane/services/console/service"
	distribution "github.com/meshplane/meshplane/services/distribution/service"
	ingest "github.com/meshplane/meshplane/services/ingest/service"
	registration "github.com/meshplane/meshplane/services/registration/service"
	translation "github.com/meshplane/meshplane/services/translation/service"
	"github.com/prometheus/client_golang/prometheus"
)

func version() string { return "meshplane " + platform.Version }

// settings are the flags of all-in-one: the union of the services' settings,
// each registered once.
type settings struct {
	trustDomain, clusterDomain string
	debounce                   time.Duration
	devPKIDir                  string
	// store is the install name and the Redis options, shared by the
	// four services.
	store snapstore.Config
	// reg holds registration's own settings (CA, tokens, certificate
	// lifetime); install, trust domain and Redis are set from the shared
	// ones.
	reg registration.Config
	// ing holds ingest's own settings (stale window, the management
	// cluster's resources, access-log buffers); install is set from the
	// shared one.
	ing ingest.Config
	// tr holds translation's own settings (where the last valid versions
	// are kept, the safe-start window); the management cluster is
	// registration's, and the expected clusters its mirrors.
	tr translation.Config
	// console is the operator console's settings; its Addr empty (the
	// default) leaves the console off. It dials this process's own front
	// door.
	console console.Config
}

func allInOne(args []string) int {
	fs := flag.NewFlagSet("meshplane all-in-one", flag.ExitOnError)
	srvOpts := platform.NewServerOptions()
	srvOpts.Addr = ":9900"
	srvOpts.AdminAddr = ":9990"
	srvOpts.TrustDomain = pki.DefaultTrustDomain
	// Register is called before an agent has a certificate.
	srvOpts.TLS.ClientAuth = platform.ClientAuthOptional
	srvOpts.AddFlags(fs, "")
	logOpts := platform.NewLogOptions()
	logOpts.AddFlags(fs, "")

	s := settings{
		store: snapstore.DefaultConfig(), trustDomain: pki.DefaultTrustDomain, clusterDomain: "cluster.local",
		debounce: 100 * time.Millisecond, reg: registration.DefaultConfig(),
		ing: ingest.DefaultConfig(), tr: translation.DefaultConfig(), console: console.DefaultConfig(),
	}
	s.console.Addr = ""
	// Empty means <dev-pki-dir>/ca, or registration's default without one.
	s.reg.CADir = ""
	f := platform.NewFlags(fs, "")
	s.store.AddFlags(fs, "install name, the value of the meshplane.dev/managed-by label")
	f.String(&s.clusterDomain, "cluster-domain", "DNS suffix of Services in workload clusters")
	f.Duration(&s.debounce, "debounce", "least time between two translations: a change is translated at once when none ran within it, else with the others of its burst at its end; 0 translates every change at once")
	s.reg.AddOwnFlags(f)
	s.ing.AddOwnFlags(f)
	s.tr.AddOwnFlags(f)
	f.Duration(&s.tr.SafeStartWindow, "safe-start-window", "after a start or a store loss, how long publishing may wait for every expected cluster to report (0 disables safe mode)")
	f.Duration(&s.tr.ExpectedRefresh, "expected-clusters-refresh", "how often the KubernetesClusters in --mirror-namespace are read again for the clusters every output expects")
	// --kubeconfig is registration's; ingest reads the same cluster.
	f.String(&s.ing.KubeContext, "kube-context", "kubeconfig context of the management cluster, for reading its Meshplane resources (default: the current one)")
	f.String(&s.devPKIDir, "dev-pki-dir", "create a development CA and a server certificate for localhost here, when no --tls-cert-file is given")
	s.console.AddServerFlags(fs, "console")
	cf := platform.NewFlags(fs, "console")
	cf.String(&s.console.Upstream.CertFile, "upstream-cert-file", "the console's service certificate (spiffe://<td>/service/console) for calling this process; issued from the dev CA with --dev-pki-dir")
	cf.String(&s.console.Upstream.KeyFile, "upstream-key-file", "private key of --console-upstream-cert-file")
	_ = fs.Parse(args)
	s.trustDomain = srvOpts.TrustDomain
	s.ing.Kubeconfig = s.reg.Kubeconfig
	s.tr.Kubeconfig, s.tr.KubeContext = s.reg.Kubeconfig, s.ing.KubeContext

	if s.devPKIDir != "" && srvOpts.TLS.CertFile == "" {
		if s.reg.CADir == "" {
			s.reg.CADir = filepath.Join(s.devPKIDir, "ca")
		}
		if err := devServerPKI(s.devPKIDir, s.reg.CADir, s.trustDomain, &srvOpts); err != nil {
			fmt.Fprintln(os.Stderr, "meshplane:", err)
			return 1
		}
	}
	if s.console.Addr != "" {
		if err := consoleSettings(&s, srvOpts); err != nil {
			fmt.Fprintln(os.Stderr, "meshplane:", err)
			return 1
		}
	}
	if err := errors.Join(f.Err(), cf.Err(), s.store.Validate()); err != nil {
		fmt.Fprintf(os.Stderr, "meshplane: invalid options:\n%v\n", err)
		return 2
	}
	// One server for the four services, so one revocation set guards them
	// all: a deregistered cluster is refused by ingest and distribution as
	// well as by registration.
	revocation := registration.NewRevocationChecker()
	srvOpts.Revocation = revocation
	return platform.RunMain("meshplane", srvOpts, logOpts, func(log *slog.Logger, reg *prometheus.Registry) (platform.Component, error) {
		return buildAll(s, revocation, log, reg)
	})
}

// devCA is the development CA of --dev-pki-dir, created on first use and
// reused after, which issues this machine's certificates into dir.
type devCA struct {
	ca          *pki.CA
	dir         string
	trustDomain string
}

func openDevCA(dir, caDir, trustDomain string) (*devCA, error) {
	ca, _, err := pki.LoadOrCreateCA(caDir, "Meshplane development")
	if err != nil {
		return nil, err
	}
	return &devCA{ca: ca, dir: dir, trustDomain: trustDomain}, nil
}

// issue writes name.crt and name.key: a 30-day certificate of service's
// identity, which as a server certificate is also valid for localhost,
// 127.0.0.1, ::1 and this host's name.
func (d *devCA) issue(name, service string, server bool) (cert, key string, err error) {
	opts := pki.LeafOptions{ID: pki.ServiceID(d.trustDomain, service), TTL: 30 * 24 * time.Hour}
	if server {
		host, _ := os.Hostname()
		opts.DNSNames = []string{"localhost", host}
		opts.IPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		opts.Server = true
	}
	certPEM, keyPEM, err := d.ca.IssueKeyPair(opts)
	if err != nil {
		return "", "", err
	}
	cert, key = filepath.Join(d.dir, name+".crt"), filepath.Join(d.dir, name+".key")
	if err := pki.WriteFileAtomic(cert, certPEM, 0o644); err != nil {
		return "", "", err
	}
	return cert, key, pki.WriteFileAtomic(key, keyPEM, 0o600)
}

// devServerPKI issues this process's server certificate and a client
// certificate for meshctl on this machine (`meshctl check --pki-dir
// <dir>`), and points the server at them.
func devServerPKI(dir, caDir, trustDomain string, o *platform.ServerOptions) error {
	d, err := openDevCA(dir, caDir, trustDomain)
	if err != nil {
		return err
	}
	if o.TLS.CertFile, o.TLS.KeyFile, err = d.issue("server", "meshplane", true); err != nil {
		return err
	}
	if _, _, err := d.issue("meshctl", "meshctl", false); err != nil {
		return err
	}
	o.TLS.ClientCAFile = filepath.Join(caDir, pki.RootCertFile)
	return nil
}

// consoleSettings points the console at this process's front door with
// the management cluster's kubeconfig, and with --dev-pki-dir issues its
// server and client certificates from the dev CA.
func consoleSettings(s *settings, srvOpts platform.ServerOptions) error {
	c := &s.console
	// --addr fd:N (a socket the parent passed, as the demo's harness
	// does) names no host and port: ask the socket.
	addr, err := platform.ListenAddr(srvOpts.Addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", srvOpts.Addr, err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", srvOpts.Addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	c.ManagementAddr = net.JoinHostPort(host, port)
	c.Kubeconfig, c.KubeContext = s.reg.Kubeconfig, s.ing.KubeContext
	if srvOpts.TLS.Plaintext {
		c.Upstream.Plaintext = true
		return nil
	}
	c.Upstream.CAFile = srvOpts.TLS.ClientCAFile
	if s.devPKIDir != "" {
		if err := devConsolePKI(s.devPKIDir, s.reg.CADir, s.trustDomain, c); err != nil {
			return err
		}
	}
	if c.Upstream.CertFile == "" {
		return errors.New("--console-addr needs the console's service certificate: --console-upstream-cert-file and --console-upstream-key-file, or --dev-pki-dir")
	}
	return nil
}

// devConsolePKI issues the console's service certificate and its HTTPS
// certificate (localhost) from the dev CA, unless given.
func devConsolePKI(dir, caDir, trustDomain string, c *console.Config) error {
	if caDir == "" {
		caDir = filepath.Join(dir, "ca")
	}
	d, err := openDevCA(dir, caDir, trustDomain)
	if err != nil {
		return err
	}
	if c.Upstream.CertFile == "" {
		if c.Upstream.CertFile, c.Upstream.KeyFile, err = d.issue("console-client", console.Name, false); err != nil {
			return err
		}
	}
	if c.Upstream.CAFile == "" {
		c.Upstream.CAFile = filepath.Join(caDir, pki.RootCertFile)
	}
	if c.TLSCertFile == "" && !c.InsecurePlaintext {
		c.TLSCertFile, c.TLSKeyFile, err = d.issue("console-server", console.Name, true)
	}
	return err
}

// all is the four services (and the console, when on) as one component.
type all struct {
	reg     *registration.Service
	ing     *ingest.Service
	tr      *translation.Service
	dist    *distribution.Service
	console *console.Service
}

func buildAll(s settings, revocation *registration.RevocationChecker, log *slog.Logger, promReg *prometheus.Registry) (*all, error) {
	newInput := func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} }
	newOutput := func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} }
	var (
		inputs translation.InputStore
		// ingestInputs is how ingest writes the inputs: to the Redis
		// store the others read, through memory while Redis is away.
		ingestInputs ingest.Option
		outputs      translation.OutputStore
		// acks are written by distribution and read by translation, which
		// reports what agents could not apply in policy statuses.
		acks     snapshots.AckStore
		regOpts  = []registration.Option{registration.WithLogger(log), registration.WithRegisterer(promReg), registration.WithRevocationChecker(revocation)}
		distOpts = []distribution.Option{distribution.WithLogger(log), distribution.WithRegisterer(promReg)}
		ingOpts  []ingest.Option
	)
	if s.store.Redis.Enabled() {
		client, err := s.store.Redis.NewClient(log)
		if err != nil {
			return nil, err
		}
		regOpts = append(regOpts, registration.WithRedis(client))
		// Acknowledgements in Redis too, so that a restart keeps them.
		distOpts = append(distOpts, distribution.WithRedis(client))
		// Access logs shared with the other replicas over Redis pub/sub.
		ingOpts = append(ingOpts, ingest.WithRedis(client))
		shared := snapstore.NewRedis(client, s.store.Install, snapshots.Inputs, newInput).WithDurability(s.store.Redis.Durability())
		inputs, ingestInputs = shared, ingest.WithSharedInputs(shared)
		outputs = snapstore.NewRedis(client, s.store.Install, snapshots.Outputs, newOutput).WithDurability(s.store.Redis.Durability())
		acks = snapstore.NewRedisAcks(client, s.store.Install).WithDurability(s.store.Redis.Durability())
	} else {
		mem := snapstore.NewMemory(newInput)
		inputs, ingestInputs = mem, ingest.WithInputs(mem)
		outputs = snapstore.NewMemory(newOutput)
		acks = snapstore.NewMemoryAcks()
		distOpts = append(distOpts, distribution.WithAcks(acks))
	}

	rcfg := s.reg
	rcfg.TrustDomain, rcfg.Config = s.trustDomain, s.store
	if rcfg.CADir == "" {
		rcfg.CADir = registration.DefaultConfig().CADir
	}
	// SignIntermediate reads VirtualMeshes and meshes from the inputs.
	reg, err := registration.New(rcfg, append(regOpts, registration.WithInputs(inputs))...)
	if err != nil {
		return nil, err
	}

	tcfg := s.tr
	tcfg.Install, tcfg.ClusterDomain, tcfg.Debounce = s.store.Install, s.clusterDomain, s.debounce
	// The clusters registration mirrors are the ones every output expects:
	// safe mode waits for them even after Redis restarts empty.
	tcfg.ClustersNamespace = s.reg.MirrorNamespace
	// Ingest reads the management cluster's own resources as one more
	// input: it is expected too, so that a restart with Redis lost does
	// not publish outputs without them. Translation reads the input named
	// the install name as the management cluster's.
	icfg := s.ing
	icfg.Install = s.store.Install
	tcfg.ExpectManagementCluster = tcfg.ClustersNamespace != "" && icfg.WatchesManagement() && icfg.ManagementClusterName() == s.store.Install
	tr, err := translation.New(tcfg, translation.WithLogger(log), translation.WithRegisterer(promReg), translation.WithStores(inputs, outputs), translation.WithAcks(acks))
	if err != nil {
		return nil, err
	}

	ing, err := ingest.New(icfg, append(ingOpts, ingest.WithLogger(log), ingest.WithRegisterer(promReg), ingestInputs, ingest.WithOutputs(outputs), ingest.WithNotifier(tr))...)
	if err != nil {
		return nil, err
	}

	dcfg := distribution.DefaultConfig()
	dcfg.Install = s.store.Install
	dist, err := distribution.New(dcfg, append(distOpts, distribution.WithOutputs(outputs))...)
	if err != nil {
		return nil, err
	}
	a := &all{reg: reg, ing: ing, tr: tr, dist: dist}
	if s.console.Addr != "" {
		if a.console, err = console.New(s.console, console.WithLogger(log), console.WithRegisterer(promReg)); err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
	}
	return a, nil
}

func (a *all) Mount(srv *platform.Server) {
	a.reg.Mount(srv)
	a.ing.Mount(srv)
	a.tr.Mount(srv)
	a.dist.Mount(srv)
}

// RevocationChecker is registration's revocation set, which guards the
// one server of the four services.
func (a *all) RevocationChecker() platform.RevocationChecker { return a.reg.RevocationChecker() }

func (a *all) Run(ctx context.Context) error {
	runs := []func(context.Context) error{a.reg.Run, a.ing.Run, a.tr.Run, a.dist.Run}
	if a.console != nil {
		runs = append(runs, a.console.Run)
	}
	return platform.RunAll(ctx, runs...)
}
