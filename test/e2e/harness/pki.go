package harness

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
)

// PKI is the certificates of a test installation.
type PKI struct {
	Dir         string
	CADir       string
	TrustDomain string
	CA          *pki.CA
}

// NewPKI creates a CA in dir/ca.
func NewPKI(dir, trustDomain string) (*PKI, error) {
	caDir := filepath.Join(dir, "ca")
	ca, _, err := pki.LoadOrCreateCA(caDir, "Meshplane e2e")
	if err != nil {
		return nil, err
	}
	return &PKI{Dir: dir, CADir: caDir, TrustDomain: trustDomain, CA: ca}, nil
}

// RootFile is the trust bundle.
func (p *PKI) RootFile() string { return filepath.Join(p.CADir, pki.RootCertFile) }

// ServiceCert issues a server-and-client certificate for a management
// service, valid for localhost and 127.0.0.1.
func (p *PKI) ServiceCert(name string) (certFile, keyFile string, err error) {
	certPEM, keyPEM, err := p.CA.IssueKeyPair(pki.LeafOptions{
		ID: pki.ServiceID(p.TrustDomain, name), TTL: 24 * time.Hour, Server: true,
		DNSNames: []string{"localhost", name}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
	})
	if err != nil {
		return "", "", fmt.Errorf("issue %s certificate: %w", name, err)
	}
	certFile, keyFile = filepath.Join(p.Dir, name+".crt"), filepath.Join(p.Dir, name+".key")
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, keyPEM, 0o600)
}
