package service

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"time"

	"github.com/meshplane/meshplane/libs/platform"
)

// Config is everything the console reads at start.
type Config struct {
	// Addr is the browser-facing HTTPS listener.
	Addr string
	// TLSCertFile and TLSKeyFile are its certificate, re-read when they
	// change.
	TLSCertFile, TLSKeyFile string
	// InsecurePlaintext serves plain HTTP, only on a loopback Addr: for an
	// OIDC or TLS-terminating proxy in the same pod.
	InsecurePlaintext bool
	// SessionTTL ends a session that long after sign-in, SessionIdle after
	// its last use.
	SessionTTL, SessionIdle time.Duration
	// SignInFailures is how many failed sign-ins a client IP may make per
	// minute.
	SignInFailures int
	// AuthzCacheTTL is how long a SubjectAccessReview answer is reused.
	AuthzCacheTTL time.Duration

	// Kubeconfig and KubeContext reach the management cluster, for
	// TokenReview and SubjectAccessReview; empty means in-cluster.
	Kubeconfig, KubeContext string

	// ManagementAddr is the management plane's front door; the per-service
	// addresses, when set, override it.
	ManagementAddr, IngestAddr, TranslationAddr, DistributionAddr, RegistrationAddr string
	// Upstream holds the TLS settings of the calls to the management
	// services: the CA, and the console's own service certificate. Its
	// Addr is not used.
	Upstream platform.ClientOptions

	// OutputVersions is how many output versions per cluster are kept for
	// diffs; TrafficWindow how much access-log traffic is counted for the
	// graph; PollInterval how often translation is asked for new versions.
	OutputVersions int
	TrafficWindow  time.Duration
	PollInterval   time.Duration

	flags []*platform.Flags
	// prefix is the server flags' prefix, for Validate's messages.
	prefix string
}

// Defaults.
const (
	DefaultAddr        = ":9443"
	DefaultSessionTTL  = 8 * time.Hour
	DefaultSessionIdle = 30 * time.Minute
)

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Addr: DefaultAddr, SessionTTL: DefaultSessionTTL, SessionIdle: DefaultSessionIdle,
		SignInFailures: 10, AuthzCacheTTL: 10 * time.Second,
		Upstream:       platform.NewClientOptions(),
		OutputVersions: 10, TrafficWindow: 5 * time.Minute, PollInterval: 5 * time.Second,
	}
}

// AddServerFlags registers the browser-facing settings, named
// "<prefix>-<name>": the all-in-one registers these with prefix "console"
// and sets the rest itself.
func (c *Config) AddServerFlags(fs *flag.FlagSet, prefix string) {
	f := platform.NewFlags(fs, prefix)
	c.flags, c.prefix = append(c.flags, f), prefix
	f.String(&c.Addr, "addr", "address of the console's browser-facing HTTPS listener")
	f.String(&c.TLSCertFile, "tls-cert-file", "PEM certificate chain of the console's HTTPS listener, re-read when it changes")
	f.String(&c.TLSKeyFile, "tls-key-file", "PEM private key of the console's certificate")
	f.Bool(&c.InsecurePlaintext, "insecure-plaintext", "serve plain HTTP; only with a loopback address, behind an OIDC or TLS-terminating proxy in the same pod")
	f.Duration(&c.SessionTTL, "session-ttl", "a session ends this long after sign-in")
	f.Duration(&c.SessionIdle, "session-idle", "a session ends this long after its last use")
}

// AddFlags registers every setting of the standalone console.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	c.AddServerFlags(fs, "")
	f := platform.NewFlags(fs, "")
	c.flags = append(c.flags, f)
	f.Int(&c.SignInFailures, "sign-in-failures", "failed sign-ins a client IP may make per minute")
	f.Duration(&c.AuthzCacheTTL, "authz-cache-ttl", "how long a SubjectAccessReview answer is reused for the same user and question")
	f.String(&c.Kubeconfig, "kubeconfig", "kubeconfig of the management cluster, for TokenReview and SubjectAccessReview; empty means in-cluster")
	f.String(&c.KubeContext, "kube-context", "kubeconfig context of the management cluster (default: the current one)")
	f.String(&c.ManagementAddr, "management-addr", "host:port of the management plane's front door")
	f.String(&c.IngestAddr, "ingest-addr", "host:port of ingest, when not at --management-addr")
	f.String(&c.TranslationAddr, "translation-addr", "host:port of translation, when not at --management-addr")
	f.String(&c.DistributionAddr, "distribution-addr", "host:port of distribution, when not at --management-addr")
	f.String(&c.RegistrationAddr, "registration-addr", "host:port of registration, when not at --management-addr")
	f.String(&c.Upstream.CAFile, "upstream-ca-file", "PEM bundle the management services' certificates must chain to")
	f.String(&c.Upstream.CertFile, "upstream-cert-file", "the console's service certificate (spiffe://<td>/service/console), for mTLS to the management services")
	f.String(&c.Upstream.KeyFile, "upstream-key-file", "private key of --upstream-cert-file")
	f.String(&c.Upstream.ServerName, "upstream-server-name", "name to verify in the management services' certificates; empty uses the host of each address")
	f.Int(&c.OutputVersions, "output-versions", "output versions kept per cluster for diffs")
	f.Duration(&c.TrafficWindow, "traffic-window", "longest window of access-log traffic counted for the graph")
	f.Duration(&c.PollInterval, "poll-interval", "how often translation is asked for new output versions")
}

// upstreamAddr is where one service is.
func (c *Config) upstreamAddr(override string) string {
	if override != "" {
		return override
	}
	return c.ManagementAddr
}

// flag names a server flag as the operator typed it.
func (c *Config) flag(name string) string {
	if c.prefix == "" {
		return "--" + name
	}
	return "--" + c.prefix + "-" + name
}

// Validate reports every problem at once, naming the flags.
func (c *Config) Validate() error {
	var errs []error
	for _, f := range c.flags {
		errs = append(errs, f.Err())
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s %q: %w", c.flag("addr"), c.Addr, err))
	}
	if c.InsecurePlaintext {
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			errs = append(errs, fmt.Errorf("%s needs a loopback %s (127.0.0.1:port, [::1]:port or localhost:port), got %q", c.flag("insecure-plaintext"), c.flag("addr"), c.Addr))
		}
		if c.TLSCertFile != "" || c.TLSKeyFile != "" {
			errs = append(errs, fmt.Errorf("%s cannot be combined with %s or %s", c.flag("insecure-plaintext"), c.flag("tls-cert-file"), c.flag("tls-key-file")))
		}
	} else if c.TLSCertFile == "" || c.TLSKeyFile == "" {
		errs = append(errs, fmt.Errorf("%s and %s are required (or %s on a loopback %s)", c.flag("tls-cert-file"), c.flag("tls-key-file"), c.flag("insecure-plaintext"), c.flag("addr")))
	}
	if c.SessionTTL <= 0 || c.SessionIdle <= 0 {
		errs = append(errs, fmt.Errorf("%s and %s must be positive, got %s and %s", c.flag("session-ttl"), c.flag("session-idle"), c.SessionTTL, c.SessionIdle))
	}
	if c.SignInFailures <= 0 {
		errs = append(errs, fmt.Errorf("--sign-in-failures must be positive, got %d", c.SignInFailures))
	}
	if c.AuthzCacheTTL < 0 {
		errs = append(errs, fmt.Errorf("--authz-cache-ttl must not be negative, got %s", c.AuthzCacheTTL))
	}
	for _, s := range []struct{ name, addr string }{{"ingest", c.IngestAddr}, {"translation", c.TranslationAddr}, {"distribution", c.DistributionAddr}, {"registration", c.RegistrationAddr}} {
		if c.upstreamAddr(s.addr) == "" {
			errs = append(errs, fmt.Errorf("--management-addr or --%s-addr is required", s.name))
		}
	}
	if c.OutputVersions <= 0 || c.TrafficWindow <= 0 || c.PollInterval <= 0 {
		errs = append(errs, fmt.Errorf("--output-versions, --traffic-window and --poll-interval must be positive, got %d, %s and %s", c.OutputVersions, c.TrafficWindow, c.PollInterval))
	}
	return errors.Join(errs...)
}
