package service

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

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
