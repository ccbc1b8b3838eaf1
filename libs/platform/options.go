package platform

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Defaults of NewServerOptions. Each service overrides Addr with its own port.
const (
	DefaultAddr              = ":9900"
	DefaultAdminAddr         = ":9988"
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultShutdownTimeout stays well inside Kubernetes' default 30 s
	// termination grace period, so the process exits on its own terms.
	DefaultShutdownTimeout = 15 * time.Second
	// DefaultMaxRecvBytes bounds one decoded message. Input snapshots of large
	// clusters are the biggest messages the services receive.
	DefaultMaxRecvBytes = 32 << 20
)

// ClientAuthMode says whether the server asks callers for a certificate.
// Empty means ClientAuthRequire.
type ClientAuthMode string

const (
	// ClientAuthNone asks for no client certificate: no caller has an identity.
	ClientAuthNone ClientAuthMode = "none"
	// ClientAuthOptional verifies a client certificate when one is sent, and
	// lets callers without one through to procedures that are public (the
	// registration service's Register, which an agent calls before it has a
	// certificate).
	ClientAuthOptional ClientAuthMode = "optional"
	// ClientAuthRequire refuses the TLS handshake without a valid client
	// certificate.
	ClientAuthRequire ClientAuthMode = "require"
)

// MarshalText implements encoding.TextMarshaler so the mode works with
// flag.TextVar.
func (m ClientAuthMode) MarshalText() ([]byte, error) { return []byte(m), nil }

// UnmarshalText implements encoding.TextUnmarshaler and accepts only the
// three known modes, so a typo fails at parse time instead of weakening TLS.
func (m *ClientAuthMode) UnmarshalText(b []byte) error {
	switch v := ClientAuthMode(strings.ToLower(string(b))); v {
	case ClientAuthNone, ClientAuthOptional, ClientAuthRequire:
		*m = v
		return nil
	default:
		return fmt.Errorf("unknown client auth mode %q (want none, optional or require)", b)
	}
}

func (m ClientAuthMode) tlsClientAuth() (tls.ClientAuthType, error) {
	switch m {
	case "":
		// A TLSOptions literal that forgot the mode gets the strict one.
		return tls.RequireAndVerifyClientCert, nil
	case ClientAuthNone:
		return tls.NoClientCert, nil
	case ClientAuthOptional:
		return tls.VerifyClientCertIfGiven, nil
	case ClientAuthRequire:
		return tls.RequireAndVerifyClientCert, nil
	default:
		return 0, fmt.Errorf("unknown client auth mode %q (want none, optional or require)", string(m))
	}
}

// TLSVersion is a minimum TLS version, "1.2" or "1.3". Empty means 1.3.
type TLSVersion string

const (
	TLS12 TLSVersion = "1.2"
	TLS13 TLSVersion = "1.3"
)

// MarshalText implements encoding.TextMarshaler.
func (v TLSVersion) MarshalText() ([]byte, error) { return []byte(v), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (v *TLSVersion) UnmarshalText(b []byte) error {
	switch s := TLSVersion(b); s {
	case TLS12, TLS13:
		*v = s
		return nil
	default:
		return fmt.Errorf("unsupported TLS version %q (want 1.2 or 1.3)", b)
	}
}

func (v TLSVersion) id() (uint16, error) {
	switch v {
	case "":
		return tls.VersionTLS13, nil
	case TLS12:
		return tls.VersionTLS12, nil
	case TLS13:
		return tls.VersionTLS13, nil
	default:
		return 0, fmt.Errorf("unsupported TLS version %q (want 1.2 or 1.3)", string(v))
	}
}

// TLSOptions configure the server side of TLS. Certificate and key files are
// re-read when they change on disk (see CertReloader), so a rotated
// Kubernetes Secret takes effect without a restart. The client CA bundle is
// read once.
type TLSOptions struct {
	CertFile     string
	KeyFile      string
	ClientCAFile string
	ClientAuth   ClientAuthMode
	MinVersion   TLSVersion
	// Plaintext serves unencrypted HTTP/2 (prior knowledge) and HTTP/1.1
	// instead of TLS. No caller can then prove an identity, so only public
	// procedures are reachable. Meant for local runs and tests.
	Plaintext bool
}

// RevocationChecker answers whether a client certificate, named by its
// serial number in decimal (x509.Certificate.SerialNumber.String(), the form
// smallstep uses), has been revoked. It runs on every call that presents a
// certificate, so implementations must answer from memory and refresh in the
// background; an error refuses the call with CodeUnavailable.
type RevocationChecker interface {
	IsRevoked(ctx context.Context, serial string) (bool, error)
}

// ServerOptions configure a Server. Build them with NewServerOptions, bind
// them with AddFlags and check them with Validate.
type ServerOptions struct {
	// Addr is where Run listens for Connect, gRPC and gRPC-Web.
	Addr string
	// AdminAddr is where Run serves /healthz, /readyz, /metrics and /debug/
	// over plain HTTP/1.1. Empty turns the admin server off.
	AdminAddr         string
	TLS               TLSOptions
	ReadHeaderTimeout time.Duration
	ShutdownTimeout   time.Duration
	// MaxRecvBytes bounds one received message; larger ones fail with
	// CodeResourceExhausted before they are decoded.
	MaxRecvBytes int
	// Pprof serves Go's profiles at /debug/pprof/ on the admin server.
	// Off by default: they show the process's internals, and taking one
	// costs CPU.
	Pprof bool
	// TrustDomain, when set, is the only SPIFFE trust domain whose
	// identities are accepted. A certificate naming another one gives the
	// caller no identity.
	TrustDomain string

	// Revocation, when set, is asked about every client certificate that
	// carries an identity. It is set by code, not by a flag.
	Revocation RevocationChecker
	// CertRecheckInterval is how often the calls in flight are checked
	// again: a stream whose certificate is revoked (per Revocation) or
	// expires while it is open is ended with CodeUnauthenticated. Zero means
	// DefaultRecheckInterval. It is set by code, not by a flag.
	CertRecheckInterval time.Duration

	flagPrefix string
	envErrs    []error
}

// NewServerOptions returns the defaults: TLS with client certificates
// required, TLS 1.3, and the Default* limits of this package.
func NewServerOptions() ServerOptions {
	return ServerOptions{
		Addr:      DefaultAddr,
		AdminAddr: DefaultAdminAddr,
		TLS: TLSOptions{
			ClientAuth: ClientAuthRequire,
			MinVersion: TLS13,
		},
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ShutdownTimeout:   DefaultShutdownTimeout,
		MaxRecvBytes:      DefaultMaxRecvBytes,
	}
}

// AddFlags binds the options to fs. Every flag is named prefix-name (or just
// name when prefix is empty) and can also be set through the environment
// variable MESHPLANE_<PREFIX>_<NAME>; the command line wins over the
// environment. Call it before fs.Parse and Validate after.
func (o *ServerOptions) AddFlags(fs *flag.FlagSet, prefix string) {
	o.flagPrefix = prefix
	b := envBinder{fs: fs, prefix: prefix, errs: &o.envErrs}
	str := func(p *string, name, usage string) {
		b.bind(name, usage, func(full, u string) { fs.StringVar(p, full, *p, u) })
	}
	dur := func(p *time.Duration, name, usage string) {
		b.bind(name, usage, func(full, u string) { fs.DurationVar(p, full, *p, u) })
	}
	str(&o.Addr, "addr", "address of the RPC server (Connect, gRPC and gRPC-Web on one port)")
	str(&o.AdminAddr, "admin-addr", "address of the admin HTTP server (/healthz, /readyz, /metrics); empty turns it off")
	b.bind("pprof", "serve Go's CPU, heap and goroutine profiles at /debug/pprof/ on the admin server",
		func(full, u string) { fs.BoolVar(&o.Pprof, full, o.Pprof, u) })
	str(&o.TLS.CertFile, "tls-cert-file", "PEM server certificate chain, re-read when it changes")
	str(&o.TLS.KeyFile, "tls-key-file", "PEM private key of the server certificate")
	str(&o.TLS.ClientCAFile, "tls-client-ca-file", "PEM bundle of CAs that client certificates must chain to")
	b.bind("tls-client-auth", "client certificates: none, optional (verified when sent) or require",
		func(full, u string) { fs.TextVar(&o.TLS.ClientAuth, full, o.TLS.ClientAuth, u) })
	b.bind("tls-min-version", "minimum TLS version: 1.2 or 1.3",
		func(full, u string) { fs.TextVar(&o.TLS.MinVersion, full, o.TLS.MinVersion, u) })
	b.bind("plaintext", "serve unencrypted HTTP/2 without TLS; only public procedures work (local runs and tests only)",
		func(full, u string) { fs.BoolVar(&o.TLS.Plaintext, full, o.TLS.Plaintext, u) })
	dur(&o.ReadHeaderTimeout, "read-header-timeout", "time allowed to read request headers")
	dur(&o.ShutdownTimeout, "shutdown-timeout", "time allowed for in-flight calls to finish on shutdown before connections are closed")
	b.bind("max-recv-bytes", "largest message the server accepts, in bytes",
		func(full, u string) { fs.IntVar(&o.MaxRecvBytes, full, o.MaxRecvBytes, u) })
	str(&o.TrustDomain, "trust-domain", "accept only SPIFFE identities of this trust domain; empty accepts any that the client CA signed")
}

// Validate reports every problem at once, naming the flags involved.
func (o *ServerOptions) Validate() error {
	p := o.flagPrefix
	f := func(name string) string { return flagRef(p, name) }
	errs := append([]error(nil), o.envErrs...)
	if err := validateHostPort(o.Addr); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", f("addr"), err))
	}
	if o.AdminAddr != "" {
		if err := validateHostPort(o.AdminAddr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f("admin-addr"), err))
		} else if o.AdminAddr == o.Addr && !strings.HasSuffix(o.Addr, ":0") {
			errs = append(errs, fmt.Errorf("%s and %s must differ, both are %q", f("addr"), f("admin-addr"), o.Addr))
		}
	}
	if o.ReadHeaderTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%s must be positive, got %s", f("read-header-timeout"), o.ReadHeaderTimeout))
	}
	if o.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%s must be positive, got %s", f("shutdown-timeout"), o.ShutdownTimeout))
	}
	if o.MaxRecvBytes <= 0 {
		errs = append(errs, fmt.Errorf("%s must be positive, got %d", f("max-recv-bytes"), o.MaxRecvBytes))
	}
	if o.TrustDomain != "" {
		if err := validateTrustDomain(o.TrustDomain); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f("trust-domain"), err))
		}
	}
	errs = append(errs, o.TLS.validate(p)...)
	return errors.Join(errs...)
}

func (t *TLSOptions) validate(p string) []error {
	f := func(name string) string { return flagRef(p, name) }
	var errs []error
	if t.Plaintext {
		if t.CertFile != "" || t.KeyFile != "" || t.ClientCAFile != "" {
			errs = append(errs, fmt.Errorf("%s cannot be combined with %s, %s or %s",
				f("plaintext"), f("tls-cert-file"), f("tls-key-file"), f("tls-client-ca-file")))
		}
		return errs
	}
	if t.CertFile == "" {
		errs = append(errs, fmt.Errorf("%s is required (or set %s for a local run)", f("tls-cert-file"), f("plaintext")))
	}
	if t.KeyFile == "" {
		errs = append(errs, fmt.Errorf("%s is required (or set %s for a local run)", f("tls-key-file"), f("plaintext")))
	}
	if _, err := t.MinVersion.id(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", f("tls-min-version"), err))
	}
	if _, err := t.ClientAuth.tlsClientAuth(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", f("tls-client-auth"), err))
		return errs
	}
	switch {
	case t.ClientAuth != ClientAuthNone && t.ClientCAFile == "":
		mode := t.ClientAuth
		if mode == "" {
			mode = ClientAuthRequire
		}
		errs = append(errs, fmt.Errorf("%s is required when %s is %s", f("tls-client-ca-file"), f("tls-client-auth"), mode))
	case t.ClientAuth == ClientAuthNone && t.ClientCAFile != "":
		// Almost certainly a mistake: the operator meant to authenticate
		// clients, but with "none" no certificate is even requested.
		errs = append(errs, fmt.Errorf("%s is set but %s is none, so client certificates would be ignored", f("tls-client-ca-file"), f("tls-client-auth")))
	}
	return errs
}

func validateHostPort(addr string) error {
	if addr == "" {
		return errors.New("address is empty, want host:port")
	}
	if _, ok := inheritedFD(addr); ok {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q is not host:port: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("address %q has port %q, want a number from 0 to 65535", addr, port)
	}
	return nil
}
