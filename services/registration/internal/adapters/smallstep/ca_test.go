package smallstep_test

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/smallstep"
)

func newCA(t testing.TB) (*pki.CA, *smallstep.CA) {
	t.Helper()
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	s, err := smallstep.New(ca)
	if err != nil {
		t.Fatal(err)
	}
	return ca, s
}

func csr(t testing.TB, tmpl *x509.CertificateRequest) *x509.CertificateRequest {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSign(t *testing.T) {
	ca, s := newCA(t)
	id := pki.ClusterID("test.local", "east")
	now := time.Now().Truncate(time.Second)
	// The template ignores everything in the request but its key: these
	// extra names must not reach the certificate.
	evil, _ := url.Parse("spiffe://test.local/service/translation")
	req := csr(t, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "root", Organization: []string{"evil"}},
		URIs:     []*url.URL{id.URL(), evil},
		DNSNames: []string{"example.com"},
	})
	chain, err := s.Sign(t.Context(), req, id, 2*time.Hour, now)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	if len(chain) != 2 || !chain[1].Equal(ca.Intermediate) {
		t.Fatalf("chain has %d certificates, want the leaf and the intermediate", len(chain))
	}
	leaf := chain[0]
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != id.String() {
		t.Errorf("URI SANs %v, want exactly %s", leaf.URIs, id)
	}
	if len(leaf.DNSNames)+len(leaf.IPAddresses)+len(leaf.EmailAddresses) != 0 {
		t.Errorf("leaf has other SANs: %v %v %v", leaf.DNSNames, leaf.IPAddresses, leaf.EmailAddresses)
	}
	if len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("EKU %v, want client auth only", leaf.ExtKeyUsage)
	}
	if leaf.IsCA || leaf.KeyUsage&x509.KeyUsageCertSign != 0 {
		t.Error("leaf is a CA")
	}
	if len(leaf.Subject.Organization) != 0 || leaf.Subject.CommonName != "east" {
		t.Errorf("subject %v, want CN=east and nothing from the request", leaf.Subject)
	}
	if !leaf.NotAfter.Equal(now.Add(2*time.Hour)) || !leaf.NotBefore.Equal(now.Add(-smallstep.Backdate)) {
		t.Errorf("validity %v to %v, want %v to %v", leaf.NotBefore, leaf.NotAfter, now.Add(-smallstep.Backdate), now.Add(2*time.Hour))
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), Intermediates: pool(ca.Intermediate), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: now}); err != nil {
		t.Errorf("leaf does not verify: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), Intermediates: pool(ca.Intermediate), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, CurrentTime: now}); err == nil {
		t.Error("leaf verifies for server auth")
	}
}

func TestSignCapsAtIntermediate(t *testing.T) {
	ca, s := newCA(t)
	chain, err := s.Sign(t.Context(), csr(t, &x509.CertificateRequest{}), pki.ClusterID("test.local", "east"), 100*365*24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if chain[0].NotAfter.After(ca.Intermediate.NotAfter) {
		t.Errorf("leaf outlives the intermediate: %v > %v", chain[0].NotAfter, ca.Intermediate.NotAfter)
	}
}

func TestSignRefusesBadSignature(t *testing.T) {
	_, s := newCA(t)
	req := csr(t, &x509.CertificateRequest{})
	req.Signature[len(req.Signature)-1] ^= 0xff
	if _, err := s.Sign(t.Context(), req, pki.ClusterID("test.local", "east"), time.Hour, time.Now()); err == nil {
		t.Fatal("signed a request with a bad signature")
	}
}

func pool(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// BenchmarkSign measures signings a second through the embedded authority:
// the CSR is parsed and checked, then signed (ECDSA P-256 intermediate).
// Run with -cpu 1 for the one-core figure.
func BenchmarkSign(b *testing.B) {
	_, s := newCA(b)
	id := pki.ClusterID("test.local", "east")
	req := csr(b, &x509.CertificateRequest{URIs: []*url.URL{id.URL()}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sign(b.Context(), req, id, time.Hour, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "signings/s")
}
