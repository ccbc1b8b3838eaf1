package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Plane is a running management plane: four processes, or one all-in-one.
type Plane struct {
	PKI   *PKI
	Dir   string
	Procs []*Process
	// Addrs of registration, ingest and distribution for agents, and of
	// the other services for tests.
	Registration, Ingest, Translation, Distribution string
	TokensFile                                      string
	// allInOne says the plane is one all-in-one process.
	allInOne bool
	// specs are every process's spec and addresses, for RestartProcess:
	// its listeners are bound again on the same addresses.
	specs     map[string]*procSpec
	adminAddr string
	// Replicas are the RPC addresses of every replica of each service, by
	// service name (four processes only); the fields above name the first.
	Replicas map[string][]string
	// Admin is the all-in-one process's admin (metrics) address; empty
	// for four processes.
	Admin string
	// Admins are the four processes' admin addresses by service name;
	// empty for the all-in-one.
	Admins map[string]string
}

// AdminAddr is the all-in-one process's health and metrics address.
func (p *Plane) AdminAddr() string { return p.adminAddr }

// Tokens writes a bootstrap token for each cluster and returns them.
func writeTokens(path string, clusters []string) (map[string]string, error) {
	tokens := map[string]string{}
	var b strings.Builder
	for _, c := range clusters {
		tok := "token-" + c + "-" + randomHex(16)
		tokens[c] = tok
		fmt.Fprintf(&b, "%s %s\n", c, tok)
	}
	return tokens, os.WriteFile(path, []byte(b.String()), 0o600)
}

// PlaneOptions configure StartPlane.
type PlaneOptions struct {
	BinDir string
	Dir    string
	// RedisAddr is --redis-addrs: one address, the sentinels' with
	// RedisMasterName, or a cluster's nodes, comma-separated.
	RedisAddr       string
	RedisMasterName string
	// RedisWaitReplicas is the --redis-wait-replicas of every service, or
	// of those RedisWaitServices names when it names any.
	RedisWaitReplicas int
	RedisWaitServices []string
	Clusters          []string
	// AllInOne runs `meshplane all-in-one` instead of four processes.
	AllInOne bool
	// RegistrationRedis gives registration --redis-addrs too (not used
	// with AllInOne, which shares its stores): it then reads the input
	// snapshots that SignIntermediate needs, and keeps tokens, clusters and
	// revocations in Redis.
	RegistrationRedis bool
	// IngestArgs are added to the ingest process's flags (not used with
	// AllInOne), e.g. the management cluster's --kubeconfig.
	IngestArgs []string
	// ManagementKubeconfig gives the plane a management cluster.
	// Registration mirrors its cluster records there as KubernetesClusters
	// in MirrorNamespace, and re-seeds them from it when Redis loses them
	// (--kubeconfig, --mirror-namespace, and Redis for its records);
	// translation expects the registered ones (--kubeconfig,
	// --clusters-namespace), the management cluster's own input with them
	// (--expect-management-cluster), and keeps the last valid versions
	// there (--records-namespace); ingest (or the all-in-one) watches its
	// Meshplane resources, ScopeGrants included. All-in-one shares
	// registration's flags. The namespace must exist.
	ManagementKubeconfig string
	// MirrorNamespace is the namespace in the management cluster; empty
	// means "meshplane".
	MirrorNamespace string
	// SafeStartWindow, when not zero, is translation's --safe-start-window.
	SafeStartWindow time.Duration
	// TranslationDebounce, when not zero, is translation's --debounce
	// (not used with AllInOne); zero gives the tests' 50 ms.
	TranslationDebounce time.Duration
	// AllInOneArgs are added to the all-in-one process's flags.
	AllInOneArgs []string
	// Pprof starts every plane process with --pprof, so that benchmarks
	// can take profiles from Plane.Admins.
	Pprof bool
	// Replicas runs that many processes of each service (four processes
	// only); 0 means 1. The first of each keeps the service's name, the
	// others are named <service>-<n>.
	Replicas int
}

// procSpec is how a process is started again: its spec, without
// listeners, and the addresses to bind them on, in order.
type procSpec struct {
	spec  Spec
	addrs []string
}

func (o PlaneOptions) mirrorNamespace() string {
	if o.MirrorNamespace == "" {
		return "meshplane"
	}
	return o.MirrorNamespace
}

// watchArgs are ingest's flags that watch the management cluster's
// Meshplane resources.
func (o PlaneOptions) watchArgs() []string {
	if o.ManagementKubeconfig == "" {
		return nil
	}
	return []string{"--kubeconfig", o.ManagementKubeconfig, "--watch-management-cluster", "true", "--management-debounce", "50ms"}
}

// StartPlane starts the management plane and returns it with a bootstrap
// token per cluster.
func StartPlane(ctx context.Context, o PlaneOptions) (*Plane, map[string]string, error) {
	p := &Plane{Dir: o.Dir, TokensFile: filepath.Join(o.Dir, "tokens"), specs: map[string]*procSpec{}}
	var err error
	if p.PKI, err = NewPKI(filepath.Join(o.Dir, "pki"), "meshplane.local"); err != nil {
		return nil, nil, err
	}
	tokens, err := writeTokens(p.TokensFile, o.Clusters)
	if err != nil {
		return nil, nil, err
	}
	logs := filepath.Join(o.Dir, "logs")
	if o.AllInOne {
		return p, tokens, p.startAllInOne(o, logs)
	}

	type svc struct {
		name, pkg string
		extra     func(addr map[string]string) []string
	}
	replicas := max(o.Replicas, 1)
	lns := map[string][]*tcpPair{}
	for _, n := range []string{"registration", "ingest", "translation", "distribution"} {
		for range replicas {
			pair, err := newPair()
			if err != nil {
				return nil, nil, err
			}
			lns[n] = append(lns[n], pair)
		}
	}
	addr := map[string]string{}
	p.Admins, p.Replicas = map[string]string{}, map[string][]string{}
	for n, pairs := range lns {
		addr[n] = pairs[0].rpc.Addr().String()
		p.Admins[n] = pairs[0].admin.Addr().String()
		for _, pair := range pairs {
			p.Replicas[n] = append(p.Replicas[n], pair.rpc.Addr().String())
		}
	}
	redis := []string{"--redis-addrs", o.RedisAddr}
	if o.RedisMasterName != "" {
		redis = append(redis, "--redis-master-name", o.RedisMasterName)
	}
	// redisFor is redis with the wait for replicas when svc waits.
	redisFor := func(svc string) []string {
		if o.RedisWaitReplicas > 0 && (len(o.RedisWaitServices) == 0 || slices.Contains(o.RedisWaitServices, svc)) {
			return append(slices.Clone(redis), "--redis-wait-replicas", fmt.Sprint(o.RedisWaitReplicas), "--redis-wait-timeout", "2s")
		}
		return slices.Clone(redis)
	}
	services := []svc{
		{"registration", CmdRegistration, func(map[string]string) []string {
			args := []string{"--tls-client-auth", "optional", "--ca-dir", p.PKI.CADir, "--bootstrap-tokens-file", p.TokensFile, "--trust-domain", p.PKI.TrustDomain}
			if o.RegistrationRedis || o.ManagementKubeconfig != "" {
				args = append(args, redisFor("registration")...)
			}
			if o.ManagementKubeconfig != "" {
				args = append(args, "--kubeconfig", o.ManagementKubeconfig, "--mirror-namespace", o.mirrorNamespace())
			}
			return args
		}},
		{"translation", CmdTranslation, func(map[string]string) []string {
			debounce := 50 * time.Millisecond
			if o.TranslationDebounce != 0 {
				debounce = o.TranslationDebounce
			}
			args := append(redisFor("translation"), "--debounce", debounce.String())
			if o.ManagementKubeconfig != "" {
				// Ingest reads the management cluster's resources
				// (watchArgs): translation expects that input too.
				args = append(args, "--kubeconfig", o.ManagementKubeconfig, "--clusters-namespace", o.mirrorNamespace(), "--records-namespace", o.mirrorNamespace(), "--expect-management-cluster")
			}
			if o.SafeStartWindow != 0 {
				args = append(args, "--safe-start-window", o.SafeStartWindow.String())
			}
			return args
		}},
		{"distribution", CmdDistribution, func(map[string]string) []string { return redisFor("distribution") }},
		{"ingest", CmdIngest, func(a map[string]string) []string {
			cert, key := filepath.Join(p.PKI.Dir, "ingest.crt"), filepath.Join(p.PKI.Dir, "ingest.key")
			args := append(redisFor("ingest"), "--translation-addr", a["translation"], "--translation-ca-file", p.PKI.RootFile(),
				"--translation-cert-file", cert, "--translation-key-file", key, "--translation-server-name", "localhost")
			return append(append(args, o.watchArgs()...), o.IngestArgs...)
		}},
	}
	for _, s := range services {
		cert, key, err := p.PKI.ServiceCert(s.name)
		if err != nil {
			p.Stop()
			return nil, nil, err
		}
		args := []string{"--addr", "fd:3", "--admin-addr", "fd:4", "--tls-cert-file", cert, "--tls-key-file", key,
			"--tls-client-ca-file", p.PKI.RootFile(), "--trust-domain", p.PKI.TrustDomain}
		args = append(args, s.extra(addr)...)
		if o.Pprof {
			args = append(args, "--pprof")
		}
		for r, pair := range lns[s.name] {
			name := s.name
			if r > 0 {
				name = fmt.Sprintf("%s-%d", s.name, r)
			}
			if err := p.start(Spec{Name: name, Binary: Binary(o.BinDir, s.pkg), Args: args, LogDir: logs}, pair); err != nil {
				p.Stop()
				return nil, nil, err
			}
		}
	}
	p.Registration, p.Ingest, p.Translation, p.Distribution = addr["registration"], addr["ingest"], addr["translation"], addr["distribution"]
	return p, tokens, nil
}

func (p *Plane) startAllInOne(o PlaneOptions, logs string) error {
	pair, err := newPair()
	if err != nil {
		return err
	}
	defer pair.close()
	cert, key, err := p.PKI.ServiceCert("meshplane")
	if err != nil {
		return err
	}
	args := []string{"all-in-one", "--addr", "fd:3", "--admin-addr", "fd:4", "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-client-ca-file", p.PKI.RootFile(), "--ca-dir", p.PKI.CADir, "--bootstrap-tokens-file", p.TokensFile,
		"--trust-domain", p.PKI.TrustDomain, "--debounce", "50ms"}
	if o.RedisAddr != "" {
		args = append(args, "--redis-addrs", o.RedisAddr)
	}
	if o.ManagementKubeconfig != "" {
		args = append(args, "--kubeconfig", o.ManagementKubeconfig, "--mirror-namespace", o.mirrorNamespace(),
			"--records-namespace", o.mirrorNamespace(), "--watch-management-cluster", "true", "--management-debounce", "50ms")
	}
	if o.SafeStartWindow != 0 {
		args = append(args, "--safe-start-window", o.SafeStartWindow.String())
	}
	args = append(args, o.AllInOneArgs...)
	if err := p.start(Spec{Name: "meshplane", Binary: Binary(o.BinDir, CmdMeshplane), Args: args, LogDir: logs}, pair); err != nil {
		return err
	}
	p.allInOne = true
	a := pair.rpc.Addr().String()
	p.Registration, p.Ingest, p.Translation, p.Distribution = a, a, a, a
	p.adminAddr = pair.admin.Addr().String()
	p.Admin = p.adminAddr
	return nil
}

// start starts a process on pair's sockets and keeps what RestartProcess
// needs; the parent's copies of the sockets are closed.
func (p *Plane) start(spec Spec, pair *tcpPair) error {
	spec.Listeners = pair.both()
	proc, err := Start(spec)
	pair.close()
	if err != nil {
		return err
	}
	spec.Listeners = nil
	p.specs[spec.Name] = &procSpec{spec: spec, addrs: []string{pair.rpc.Addr().String(), pair.admin.Addr().String()}}
	p.Procs = append(p.Procs, proc)
	return nil
}

// Restart stops the all-in-one process (kill: at once, as a crash), runs
// whileDown (nil: nothing), and starts the process again on the same
// addresses, as a restarted pod behind a Service, so that agents keep their
// addresses.
func (p *Plane) Restart(ctx context.Context, kill bool, whileDown func() error) error {
	if !p.allInOne || len(p.Procs) != 1 {
		return fmt.Errorf("restart: only an all-in-one plane can be restarted")
	}
	return p.RestartProcess(ctx, "meshplane", kill, whileDown)
}

// RestartProcess stops the named process (kill: SIGKILL, as a crash),
// runs whileDown (nil: nothing), and starts it again on the same
// addresses. Another socket may briefly hold a port, so binding is
// retried until ctx ends or 10 s pass.
func (p *Plane) RestartProcess(ctx context.Context, name string, kill bool, whileDown func() error) error {
	ps, i := p.specs[name], slices.IndexFunc(p.Procs, func(pr *Process) bool { return pr.Name == name })
	if ps == nil || i < 0 {
		return fmt.Errorf("restart: no process %q", name)
	}
	if kill {
		p.Procs[i].Kill()
	} else {
		p.Procs[i].Stop()
	}
	if whileDown != nil {
		if err := whileDown(); err != nil {
			return err
		}
	}
	var lns []*net.TCPListener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for _, addr := range ps.addrs {
		err := Wait(ctx, 10*time.Second, "bind "+addr, func(context.Context) (bool, error) {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return false, err
			}
			lns = append(lns, ln.(*net.TCPListener))
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	spec := ps.spec
	spec.Listeners = lns
	proc, err := Start(spec)
	if err != nil {
		return err
	}
	p.Procs[i] = proc
	return nil
}

func (p *Plane) Stop() {
	for _, proc := range p.Procs {
		proc.Stop()
	}
}

// Process returns the named process.
func (p *Plane) Process(name string) *Process {
	for _, proc := range p.Procs {
		if proc.Name == name {
			return proc
		}
	}
	return nil
}

// AgentOptions configure StartAgent.
type AgentOptions struct {
	BinDir     string
	Cluster    string
	Token      string
	Kubeconfig string
	LogDir     string
	StateDir   string
	// Envoy, when set, is the agent's --envoy-addr (Access Log Service,
	// Metrics Service, ECDS), so that a test can send what a sidecar
	// would. Nil gives a port nobody knows.
	Envoy *net.TCPListener
}

// StartAgent starts an agent for a cluster against the plane.
func (p *Plane) StartAgent(o AgentOptions) (*Process, error) {
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(o.StateDir, "token")
	if err := os.WriteFile(tokenFile, []byte(o.Token), 0o600); err != nil {
		return nil, err
	}
	admin, err := Listen()
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	envoy, listeners := "127.0.0.1:0", []*net.TCPListener{admin}
	if o.Envoy != nil {
		envoy, listeners = "fd:4", append(listeners, o.Envoy)
	}
	return Start(Spec{
		Name: "agent-" + o.Cluster, Binary: Binary(o.BinDir, CmdAgent), LogDir: o.LogDir,
		Args: []string{
			"--cluster", o.Cluster, "--kubeconfig", o.Kubeconfig,
			"--registration-addr", p.Registration, "--ingest-addr", p.Ingest, "--distribution-addr", p.Distribution,
			"--relay-ca-file", p.PKI.RootFile(), "--server-name", "localhost", "--trust-domain", p.PKI.TrustDomain,
			"--token-file", tokenFile, "--state-dir", o.StateDir, "--admin-addr", "fd:3", "--debounce", "50ms",
			// Several agents share this host: no fixed Envoy port.
			"--envoy-addr", envoy,
		},
		Listeners: listeners,
	})
}
