package platform

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// NewServerTLSConfig builds the server side of TLS from o: the certificate is
// re-read from disk when it changes, client certificates are verified against
// ClientCAFile as ClientAuth says. It returns nil for Plaintext.
func NewServerTLSConfig(o TLSOptions, logger *slog.Logger) (*tls.Config, error) {
	if o.Plaintext {
		return nil, nil
	}
	minVersion, err := o.MinVersion.id()
	if err != nil {
		return nil, err
	}
	clientAuth, err := o.ClientAuth.tlsClientAuth()
	if err != nil {
		return nil, err
	}
	certs, err := NewCertReloader(o.CertFile, o.KeyFile, logger)
	if err != nil {
		return nil, fmt.Errorf("load server certificate: %w", err)
	}
	cfg := &tls.Config{
		MinVersion:     minVersion,
		GetCertificate: certs.GetCertificate,
		ClientAuth:     clientAuth,
		// h2 first: gRPC needs HTTP/2; http/1.1 stays for Connect unary and
		// gRPC-Web from browsers and curl.
		NextProtos: []string{"h2", "http/1.1"},
	}
	if clientAuth != tls.NoClientCert {
		if cfg.ClientCAs, err = LoadCertPool(o.ClientCAFile); err != nil {
			return nil, fmt.Errorf("load client CA bundle: %w", err)
		}
	}
	return cfg, nil
}

// LoadCertPool reads a PEM bundle of CA certificates. A file with no
// certificate in it is an error, since an empty pool would trust nobody and
// fail every handshake with a confusing message.
func LoadCertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", file)
	}
	return pool, nil
}

// CertReloader serves a certificate and key from files and reloads them
// when either file changes (by modification time or size), so a rotated
// Kubernetes Secret or cert-manager renewal takes effect on the next
// handshake. If a reload fails, for example because the key has been written
// but the certificate not yet, it keeps serving the last good pair and
// tries again on the next handshake.
type CertReloader struct {
	certFile, keyFile string
	logger            *slog.Logger

	mu     sync.Mutex
	cert   *tls.Certificate
	loaded fileStamp
	failed fileStamp // last stamp that failed, to log each failure once
}

type fileStamp struct {
	certMod, keyMod   time.Time
	certSize, keySize int64
}

// NewCertReloader loads the pair once and fails if it cannot.
func NewCertReloader(certFile, keyFile string, logger *slog.Logger) (*CertReloader, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("certificate and key files are both required")
	}
	r := &CertReloader{certFile: certFile, keyFile: keyFile, logger: logger}
	stamp, err := r.stamp()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load key pair %s, %s: %w", certFile, keyFile, err)
	}
	r.cert, r.loaded = &cert, stamp
	return r, nil
}

func (r *CertReloader) stamp() (fileStamp, error) {
	ci, err := os.Stat(r.certFile)
	if err != nil {
		return fileStamp{}, fmt.Errorf("stat certificate: %w", err)
	}
	ki, err := os.Stat(r.keyFile)
	if err != nil {
		return fileStamp{}, fmt.Errorf("stat key: %w", err)
	}
	return fileStamp{certMod: ci.ModTime(), keyMod: ki.ModTime(), certSize: ci.Size(), keySize: ki.Size()}, nil
}

// Certificate returns the current pair, reloading it first if the files
// changed. It never returns an error once the first load succeeded.
func (r *CertReloader) Certificate() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamp, err := r.stamp()
	if err != nil || stamp == r.loaded {
		// A missing file is usually a Secret update in progress: keep
		// serving what was loaded.
		return r.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		if stamp != r.failed {
			r.failed = stamp
			r.logger.Warn("certificate changed on disk but does not load; keeping the previous one",
				"cert_file", r.certFile, "key_file", r.keyFile, "error", err)
		}
		return r.cert, nil
	}
	r.cert, r.loaded = &cert, stamp
	r.logger.Info("reloaded certificate", "cert_file", r.certFile, "not_after", cert.Leaf.NotAfter)
	return r.cert, nil
}

// GetCertificate fits tls.Config.GetCertificate.
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.Certificate()
}

// GetClientCertificate fits tls.Config.GetClientCertificate.
func (r *CertReloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.Certificate()
}
