package pki_test

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
)

// rootWithKey makes a self-signed root whose key we hold, as an operator's
// PKI would.
func rootWithKey(t *testing.T) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Corp Root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	root, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return root, key
}

func TestNewIntermediateCA(t *testing.T) {
	root, rootKey := rootWithKey(t)
	ca, err := pki.NewIntermediateCA(root, rootKey, "Meshplane", 365*24*time.Hour)
	if err != nil {
		t.Fatalf("NewIntermediateCA: %v", err)
	}
	if !ca.Intermediate.IsCA || ca.Intermediate.MaxPathLen != 0 || !ca.Intermediate.MaxPathLenZero {
		t.Errorf("intermediate: IsCA %v MaxPathLen %d", ca.Intermediate.IsCA, ca.Intermediate.MaxPathLen)
	}
	if ca.Intermediate.NotAfter.After(root.NotAfter) {
		t.Error("intermediate outlives the root")
	}
	chain, err := ca.Sign(ca.Signer().Public(), pki.LeafOptions{ID: pki.ClusterID("test.local", "east"), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	inter := x509.NewCertPool()
	inter.AddCert(ca.Intermediate)
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: ca.Pool(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("leaf does not chain to the operator's root: %v", err)
	}
	_, otherKey := rootWithKey(t)
	if _, err := pki.NewIntermediateCA(root, otherKey, "x", time.Hour); err == nil {
		t.Fatal("NewIntermediateCA accepted a key that is not the root's")
	}
}

func TestLoadCAFiles(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ca.Save(dir); err != nil {
		t.Fatal(err)
	}
	root, inter, key := filepath.Join(dir, pki.RootCertFile), filepath.Join(dir, pki.IntermediateCertFile), filepath.Join(dir, pki.IntermediateKeyFile)
	got, err := pki.LoadCAFiles(root, inter, key)
	if err != nil {
		t.Fatalf("LoadCAFiles: %v", err)
	}
	if !got.Root.Equal(ca.Root) || !got.Intermediate.Equal(ca.Intermediate) {
		t.Fatal("loaded CA differs")
	}
	other, err := pki.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	otherDir := t.TempDir()
	if err := other.Save(otherDir); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		root, inter, key string
		want             string
	}{
		{"root of another PKI", filepath.Join(otherDir, pki.RootCertFile), inter, key, "not signed by the root"},
		{"key of another intermediate", root, inter, filepath.Join(otherDir, pki.IntermediateKeyFile), "does not match"},
		{"leaf as intermediate", root, root, key, "does not match"},
		{"missing file", root, inter, filepath.Join(dir, "nope"), "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pki.LoadCAFiles(tc.root, tc.inter, tc.key)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadCAFiles: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestNewCALifetimes: a development CA kept in a directory must outlive a
// day (minica's 24 hours made the demo fail the day after).
func TestNewCALifetimes(t *testing.T) {
	ca, err := pki.NewCA("dev")
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(ca.Intermediate.NotAfter); d < pki.DevIntermediateTTL-time.Hour {
		t.Errorf("intermediate valid for %v, want about %v", d, pki.DevIntermediateTTL)
	}
	if d := time.Until(ca.Root.NotAfter); d < pki.DevRootTTL-time.Hour {
		t.Errorf("root valid for %v, want about %v", d, pki.DevRootTTL)
	}
	if !ca.Root.IsCA || !ca.Intermediate.IsCA || ca.Intermediate.MaxPathLen != 0 || !ca.Intermediate.MaxPathLenZero {
		t.Error("root and intermediate must be CAs, the intermediate with path length 0")
	}
	if err := ca.Intermediate.CheckSignatureFrom(ca.Root); err != nil {
		t.Fatal(err)
	}
}
