package platform

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
)

// DefaultClientTimeout bounds connecting and unary calls without a deadline
// of their own.
const DefaultClientTimeout = 30 * time.Second

// ClientOptions configure a connection to a management service.
type ClientOptions struct {
	// Addr is host:port of the server.
	Addr string
	// CAFile is the PEM bundle that the server's certificate must chain to;
	// empty uses the system roots.
	CAFile string
	// CertFile and KeyFile are the client certificate for mTLS, re-read when
	// they change. Leave both empty to call without a certificate (or set
	// CertificateSource).
	CertFile, KeyFile string
	// ServerName overrides the name checked in the server's certificate;
	// empty uses the host of Addr.
	ServerName string
	// Timeout bounds dialing plus the TLS handshake of each new connection,
	// and each unary call whose context has no deadline (with
	// DefaultClientOptions). Streams are bounded by their context only.
	Timeout time.Duration
	// Plaintext speaks unencrypted HTTP/2 with prior knowledge, to a server
	// with ServerOptions.TLS.Plaintext.
	Plaintext bool

	// CertificateSource, when set, is asked for the client certificate at
	// every TLS handshake, so an agent can rotate its certificate without
	// building a new client. Returning (nil, nil) sends no certificate, as
	// before registration. It is set by code, not by a flag, and excludes
	// CertFile and KeyFile.
	CertificateSource func() (*tls.Certificate, error)

	flagPrefix string
	envErrs    []error
}

// NewClientOptions returns TLS with system roots, no client certificate and
// DefaultClientTimeout.
func NewClientOptions() ClientOptions {
	return ClientOptions{Timeout: DefaultClientTimeout}
}

// AddFlags binds the options to fs with prefix and environment fallback, as
// ServerOptions.AddFlags does.
func (o *ClientOptions) AddFlags(fs *flag.FlagSet, prefix string) {
	o.flagPrefix = prefix
	b := envBinder{fs: fs, prefix: prefix, errs: &o.envErrs}
	str := func(p *string, name, usage string) {
		b.bind(name, usage, func(full, u string) { fs.StringVar(p, full, *p, u) })
	}
	str(&o.Addr, "addr", "host:port of the server")
	str(&o.CAFile, "ca-file", "PEM bundle the server certificate must chain to; empty uses the system roots")
	str(&o.CertFile, "cert-file", "PEM client certificate for mTLS, re-read when it changes")
	str(&o.KeyFile, "key-file", "PEM private key of the client certificate")
	str(&o.ServerName, "server-name", "name to verify in the server certificate; empty uses the host of the address")
	b.bind("timeout", "bound on connecting and on unary calls without a deadline",
		func(full, u string) { fs.DurationVar(&o.Timeout, full, o.Timeout, u) })
	b.bind("plaintext", "unencrypted HTTP/2 without TLS (local runs and tests only)",
		func(full, u string) { fs.BoolVar(&o.Plaintext, full, o.Plaintext, u) })
}

// Validate reports every problem at once, naming the flags involved.
func (o *ClientOptions) Validate() error {
	f := func(name string) string { return flagRef(o.flagPrefix, name) }
	errs := append([]error(nil), o.envErrs...)
	if err := validateHostPort(o.Addr); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", f("addr"), err))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%s must not be negative, got %s", f("timeout"), o.Timeout))
	}
	if o.Plaintext {
		if o.CAFile != "" || o.CertFile != "" || o.KeyFile != "" || o.ServerName != "" || o.CertificateSource != nil {
			errs = append(errs, fmt.Errorf("%s cannot be combined with TLS settings (%s, %s, %s, %s or a certificate source)",
				f("plaintext"), f("ca-file"), f("cert-file"), f("key-file"), f("server-name")))
		}
		return errors.Join(errs...)
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		errs = append(errs, fmt.Errorf("%s and %s go together; got only one", f("cert-file"), f("key-file")))
	}
	if o.CertFile != "" && o.CertificateSource != nil {
		errs = append(errs, fmt.Errorf("%s and a certificate source both give the client certificate; use one", f("cert-file")))
	}
	return errors.Join(errs...)
}

// BaseURL is the URL that generated NewXServiceClient constructors want:
// https://addr, or http://addr for Plaintext.
func BaseURL(o ClientOptions) string {
	if o.Plaintext {
		return "http://" + o.Addr
	}
	return "https://" + o.Addr
}

// NewClientTLSConfig builds the client side of TLS from o. It returns nil
// for Plaintext.
func NewClientTLSConfig(o ClientOptions, logger *slog.Logger) (*tls.Config, error) {
	if o.Plaintext {
		return nil, nil
	}
	cfg := &tls.Config{
		// Our servers default to 1.3; 1.2 is the floor for anything else.
		MinVersion: tls.VersionTLS12,
		ServerName: o.ServerName,
	}
	if o.CAFile != "" {
		pool, err := LoadCertPool(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("load server CA bundle: %w", err)
		}
		cfg.RootCAs = pool
	}
	switch {
	case o.CertificateSource != nil:
		src := o.CertificateSource
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := src()
			if err != nil {
				return nil, fmt.Errorf("get client certificate: %w", err)
			}
			if cert == nil {
				// An empty certificate tells crypto/tls to send none.
				return &tls.Certificate{}, nil
			}
			return cert, nil
		}
	case o.CertFile != "":
		certs, err := NewCertReloader(o.CertFile, o.KeyFile, logger)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		cfg.GetClientCertificate = certs.GetClientCertificate
	}
	return cfg, nil
}

// NewHTTPClient returns an HTTP/2 client for Connect, gRPC and gRPC-Web
// calls to one management service: TLS (with a client certificate if o has
// one) or, with Plaintext, unencrypted HTTP/2 with prior knowledge. It sets
// no overall request timeout, because that would cut long-lived streams; see
// DefaultClientOptions for unary calls.
func NewHTTPClient(o ClientOptions, logger *slog.Logger) (*http.Client, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("client options: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tlsConfig, err := NewClientTLSConfig(o, logger)
	if err != nil {
		return nil, err
	}
	protocols := new(http.Protocols)
	if o.Plaintext {
		// UnencryptedHTTP2 without HTTP1 makes the transport speak HTTP/2
		// to http:// URLs straight away.
		protocols.SetUnencryptedHTTP2(true)
	} else {
		protocols.SetHTTP2(true)
		protocols.SetHTTP1(true)
	}
	dialer := &net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         dialer.DialContext,
			TLSClientConfig:     tlsConfig,
			TLSHandshakeTimeout: o.Timeout,
			IdleConnTimeout:     90 * time.Second,
			Protocols:           protocols,
			HTTP2: &http.HTTP2Config{
				// An agent's watch stream may be silent for hours; pings
				// find a dead management replica so the agent reconnects to
				// another one.
				SendPingTimeout: 30 * time.Second,
				PingTimeout:     15 * time.Second,
			},
		},
	}, nil
}

// DefaultClientOptions are the options for generated NewXServiceClient
// constructors: a unary call whose context has no deadline gets o.Timeout.
func DefaultClientOptions(o ClientOptions) []connect.ClientOption {
	var opts []connect.ClientOption
	if o.Timeout > 0 {
		opts = append(opts, connect.WithInterceptors(unaryTimeout(o.Timeout)))
	}
	return opts
}

// unaryTimeout puts a deadline on unary calls that have none, so a lost
// response cannot hang a caller forever. Streams are left alone: they are
// meant to live long.
func unaryTimeout(d time.Duration) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if _, ok := ctx.Deadline(); ok || !req.Spec().IsClient {
				return next(ctx, req)
			}
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return next(ctx, req)
		}
	}
}
