package service_test

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/service"
)

// TestBringYourOwnPKI builds the service from an operator's files: an
// intermediate with its key, or a root with its key.
func TestBringYourOwnPKI(t *testing.T) {
	ca, err := pki.NewCA("corp")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ca.Save(dir); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, pki.RootCertFile)
	corpRoot, corpRootKey := writeRoot(t, dir)
	inter, interKey := filepath.Join(dir, pki.IntermediateCertFile), filepath.Join(dir, pki.IntermediateKeyFile)
	for _, tc := range []struct {
		name    string
		edit    func(c *service.Config)
		wantErr string
	}{
		{name: "own intermediate", edit: func(c *service.Config) {
			c.CARootCertFile, c.CAIntermediateCertFile, c.CAIntermediateKeyFile = root, inter, interKey
		}},
		{name: "own root", edit: func(c *service.Config) {
			c.CARootCertFile, c.CARootKeyFile = corpRoot, corpRootKey
		}},
		{name: "intermediate without its root", wantErr: "go together", edit: func(c *service.Config) {
			c.CAIntermediateCertFile, c.CAIntermediateKeyFile = inter, interKey
		}},
		{name: "root without its key", wantErr: "--ca-root-key-file", edit: func(c *service.Config) {
			c.CARootCertFile = root
		}},
		{name: "root key with an intermediate", wantErr: "cannot be combined", edit: func(c *service.Config) {
			c.CARootCertFile, c.CARootKeyFile, c.CAIntermediateCertFile, c.CAIntermediateKeyFile = root, interKey, inter, interKey
		}},
		{name: "key of another certificate", wantErr: "does not match", edit: func(c *service.Config) {
			c.CARootCertFile, c.CARootKeyFile = root, interKey
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := service.DefaultConfig()
			cfg.CADir = filepath.Join(t.TempDir(), "unused")
			tc.edit(&cfg)
			svc, err := service.New(cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if svc == nil {
				t.Fatal("no service")
			}
		})
	}
}

// writeRoot writes a self-signed root and its key, as an operator's PKI
// would hand them over.
func writeRoot(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "Corp Root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "corp-root.crt"), filepath.Join(dir, "corp-root.key")
	writeFile(t, certFile, pki.EncodeCertificates(cert))
	writeFile(t, keyFile, keyPEM)
	return certFile, keyFile
}
