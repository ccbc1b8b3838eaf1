package service

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"k8s.io/apimachinery/pkg/labels"
)

// Config is everything the agent reads at start.
type Config struct {
	// Cluster is the name this cluster registers under.
	Cluster     string
	Install     string
	TrustDomain string
	// RelayAddr is the management plane's front door, used for every
	// service that has no address of its own.
	RelayAddr        string
	RegistrationAddr string
	IngestAddr       string
	DistributionAddr string
	// RelayCAFile holds the roots that sign the management plane's server
	// certificates (the trust bundle printed by `meshctl cluster register`).
	RelayCAFile string
	// ServerName overrides the name checked in server certificates.
	ServerName string
	// TokenFile holds the bootstrap token. It is read only when the agent
	// has no valid certificate.
	TokenFile string
	// StateDir keeps the agent's key and certificate.
	StateDir string
	// Kubeconfig and KubeContext select the cluster; both empty means
	// in-cluster configuration.
	Kubeconfig  string
	KubeContext string

	ClusterDomain string
	Debounce      time.Duration
	// GatewayDetectionWait bounds how long the first push after a restart
	// waits for the first output snapshot, whose gateway detector (from
	// the Settings in force) discovery uses.
	GatewayDetectionWait time.Duration
	// Deltas asks distribution for the changes from the version the agent
	// holds instead of whole snapshots.
	Deltas            bool
	IncludeNamespaces string
	ExcludeNamespaces string
	// NamespaceSelector is a label selector that namespaces must match to
	// be discovered; empty means all.
	NamespaceSelector string
	// IngressGatewayLabels and EastWestGatewayLabels select gateway pods,
	// as "key=value,key=value".
	IngressGatewayLabels  string
	EastWestGatewayLabels string
	// GatewayTLSPortName names the gateway Service port that takes mTLS.
	GatewayTLSPortName string
	AdminAddr          string
	Namespace          string
	// Replica names this replica: the pod name. It is the Raft server ID.
	Replica string
	Raft    RaftConfig
	// Envoy configures the 9977 servers every replica runs.
	Envoy EnvoyServersConfig
	// RestartPods lets the leader restart istiod, the gateways and the
	// workloads after a new Istio intermediate CA, when the output
	// snapshot asks for it; RestartNamespaces limits it (empty: all).
	RestartPods       bool
	RestartNamespaces string
	// ApplyWorkers is how many objects the agent writes at once.
	ApplyWorkers int
	// KubeQPS and KubeBurst bound the agent's requests to its cluster's
	// API server (client-go's rate limiter).
	KubeQPS   int
	KubeBurst int
	// MemoryLimitPercent sets the Go runtime's soft memory limit to this
	// percent of the container's memory limit (platform.SoftMemoryLimit),
	// unless GOMEMLIMIT is set; 0 leaves it unset.
	MemoryLimitPercent int

	flags *platform.Flags
}

// The API server budget by default: enough for the first apply of the
// reference estate's 21,000-object output in well under a minute
// (docs/operations.md), and spent only when much changes.
const (
	DefaultKubeQPS   = 500
	DefaultKubeBurst = 1000
	// DefaultMemoryLimitPercent leaves a tenth of the container's memory
	// limit for what the Go runtime does not count (the binary, stacks
	// beyond the heap's) before the kernel's limit.
	DefaultMemoryLimitPercent = 90
)

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Install:              snapshots.DefaultInstall,
		TrustDomain:          pki.DefaultTrustDomain,
		StateDir:             "/var/run/meshplane/agent",
		ClusterDomain:        "cluster.local",
		Debounce:             100 * time.Millisecond,
		GatewayDetectionWait: 10 * time.Second,
		Deltas:               true,

		IngressGatewayLabels:  "istio=ingressgateway",
		EastWestGatewayLabels: "istio=eastwestgateway",
		GatewayTLSPortName:    "tls",
		AdminAddr:             ":9988",
		Namespace:             os.Getenv("POD_NAMESPACE"),
		Replica:               cmp.Or(os.Getenv("POD_NAME"), host),
		Raft:                  defaultRaftConfig(),
		Envoy:                 defaultEnvoyServersConfig(),
		RestartPods:           true,
		ApplyWorkers:          app.DefaultApplyWorkers,
		KubeQPS:               DefaultKubeQPS,
		KubeBurst:             DefaultKubeBurst,
		MemoryLimitPercent:    DefaultMemoryLimitPercent,
	}
}

// AddFlags registers the configuration's flags.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	f := platform.NewFlags(fs, "")
	c.flags = f
	f.String(&c.Cluster, "cluster", "name of this cluster (required)")
	f.String(&c.Install, "install", "install name of the management plane")
	f.String(&c.TrustDomain, "trust-domain", "SPIFFE trust domain of Meshplane identities")
	f.String(&c.RelayAddr, "relay-addr", "management plane address (host:port) for every service without its own")
	f.String(&c.RegistrationAddr, "registration-addr", "registration service address; default --relay-addr")
	f.String(&c.IngestAddr, "ingest-addr", "ingest service address, or a comma-separated list of replicas to fail over between; default --relay-addr")
	f.String(&c.DistributionAddr, "distribution-addr", "distribution service address, or a comma-separated list of replicas to fail over between; default --relay-addr")
	f.String(&c.RelayCAFile, "relay-ca-file", "roots that sign the management plane's certificates (required)")
	f.String(&c.ServerName, "server-name", "name to verify in the management plane's certificates; default the address host")
	f.String(&c.TokenFile, "token-file", "file holding the bootstrap token")
	f.String(&c.StateDir, "state-dir", "directory for the agent's key and certificate")
	f.String(&c.Kubeconfig, "kubeconfig", "kubeconfig of this cluster; empty means $KUBECONFIG, then ~/.kube/config, then in-cluster")
	f.String(&c.KubeContext, "kube-context", "kubeconfig context")
	f.String(&c.ClusterDomain, "cluster-domain", "DNS suffix of Services in this cluster")
	f.Duration(&c.Debounce, "debounce", "how long a burst of changes may settle before a snapshot is pushed")
	f.Duration(&c.GatewayDetectionWait, "gateway-detection-wait", "after a restart (the cluster holds objects Meshplane wrote), how long the first push waits for the first output snapshot, whose gateway detection from Settings discovery uses; 0 pushes at once with the flags' gateway labels")
	f.Bool(&c.Deltas, "deltas", "ask distribution for the changes from the version the agent holds instead of whole snapshots; each is checked against the new version's content hash")
	f.String(&c.IncludeNamespaces, "include-namespaces", "comma-separated namespaces to discover; empty means all")
	f.String(&c.ExcludeNamespaces, "exclude-namespaces", "comma-separated namespaces to leave out")
	f.String(&c.NamespaceSelector, "namespace-selector", "label selector that namespaces must match to be discovered; empty means all")
	f.String(&c.IngressGatewayLabels, "ingress-gateway-labels", "pod labels (key=value,...) that mark ingress gateways")
	f.String(&c.EastWestGatewayLabels, "east-west-gateway-labels", "pod labels (key=value,...) that mark east-west gateways")
	f.String(&c.GatewayTLSPortName, "gateway-tls-port-name", "name of the gateway Service port that accepts mTLS")
	f.String(&c.AdminAddr, "admin-addr", "address of /healthz, /readyz and /metrics")
	f.String(&c.Namespace, "namespace", "namespace the agent runs in")
	f.String(&c.Replica, "replica", "name of this replica (the pod name; default $POD_NAME, else the host name): its Raft server ID")
	f.Bool(&c.RestartPods, "restart-pods", "restart istiod, then the gateways, then the workloads after a new Istio intermediate CA when the VirtualMesh asks for it (autoRestartPods)")
	f.String(&c.RestartNamespaces, "restart-namespaces", "comma-separated namespaces whose pods --restart-pods may restart; empty means all")
	f.Int(&c.ApplyWorkers, "apply-workers", "how many objects the agent writes to its cluster at once")
	f.Int(&c.KubeQPS, "kube-qps", "requests a second the agent may send to its cluster's API server, sustained")
	f.Int(&c.KubeBurst, "kube-burst", "requests the agent may send to its cluster's API server in a burst above --kube-qps")
	f.Int(&c.MemoryLimitPercent, "memory-limit-percent", "set the Go runtime's soft memory limit to this percent of the container's memory limit (cgroup memory.max) unless GOMEMLIMIT is set; 0 turns it off")
	c.Raft.addFlags(f)
	c.Envoy.addFlags(f)
}

func (c *Config) addr(specific string) string {
	if specific != "" {
		return specific
	}
	return c.RelayAddr
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.flags != nil {
		errs = append(errs, c.flags.Err())
	}
	if err := pki.ValidateName(c.Cluster); err != nil {
		errs = append(errs, fmt.Errorf("--cluster: %w", err))
	}
	for name, v := range map[string]string{"registration": c.RegistrationAddr, "ingest": c.IngestAddr, "distribution": c.DistributionAddr} {
		if c.addr(v) == "" {
			errs = append(errs, fmt.Errorf("no address for %s: set --relay-addr or --%s-addr", name, name))
		}
	}
	if c.RelayCAFile == "" {
		errs = append(errs, errors.New("--relay-ca-file is required: the agent must verify the management plane"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("--state-dir must not be empty"))
	}
	if err := snapshots.ValidateInstall(c.Install); err != nil {
		errs = append(errs, err)
	}
	if c.TrustDomain == "" {
		errs = append(errs, errors.New("--trust-domain must not be empty"))
	}
	if _, err := labels.Parse(c.NamespaceSelector); err != nil {
		errs = append(errs, fmt.Errorf("--namespace-selector: %w", err))
	}
	for flag, v := range map[string]string{"ingress-gateway-labels": c.IngressGatewayLabels, "east-west-gateway-labels": c.EastWestGatewayLabels} {
		if m, err := labels.ConvertSelectorToLabelsMap(v); err != nil || len(m) == 0 {
			errs = append(errs, fmt.Errorf("--%s must be key=value pairs: %q", flag, v))
		}
	}
	if c.GatewayTLSPortName == "" {
		errs = append(errs, errors.New("--gateway-tls-port-name must not be empty"))
	}
	if c.ApplyWorkers < 1 || c.ApplyWorkers > 1024 {
		errs = append(errs, fmt.Errorf("--apply-workers must be between 1 and 1024, not %d", c.ApplyWorkers))
	}
	if c.KubeQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-qps must be positive, not %d", c.KubeQPS))
	}
	if c.KubeBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-burst must be at least 1, not %d", c.KubeBurst))
	}
	if c.MemoryLimitPercent < 0 || c.MemoryLimitPercent > 100 {
		errs = append(errs, fmt.Errorf("--memory-limit-percent must be between 0 and 100, not %d", c.MemoryLimitPercent))
	}
	if c.Debounce < 0 {
		errs = append(errs, errors.New("--debounce must not be negative"))
	}
	if c.GatewayDetectionWait < 0 {
		errs = append(errs, errors.New("--gateway-detection-wait must not be negative"))
	}
	if c.Raft.BindAddr != "" && c.Replica == "" {
		errs = append(errs, errors.New("--replica must not be empty with Raft: it is the server ID"))
	}
	errs = append(errs, c.Raft.validate())
	errs = append(errs, c.Envoy.validate())
	return errors.Join(errs...)
}

// discoveryOptions returns the gateway rules; Validate has checked them.
func (c *Config) discoveryOptions() domain.Options {
	in, _ := labels.ConvertSelectorToLabelsMap(c.IngressGatewayLabels)
	ew, _ := labels.ConvertSelectorToLabelsMap(c.EastWestGatewayLabels)
	return domain.Options{IngressGatewayLabels: in, EastWestGatewayLabels: ew, TLSPortName: c.GatewayTLSPortName}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
