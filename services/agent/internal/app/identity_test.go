package app

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
)

const trustDomain = "meshplane.test"

// memStore is a CredentialStore in memory.
type memStore struct {
	mu      sync.Mutex
	cred    *Credentials
	loadErr error
	saved   []Credentials
}

func (s *memStore) Load(context.Context) (Credentials, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loadErr != nil {
		return Credentials{}, s.loadErr
	}
	if s.cred == nil {
		return Credentials{}, ErrNoCredentials
	}
	return *s.cred, nil
}

func (s *memStore) Save(_ context.Context, c Credentials) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cred = &c
	s.saved = append(s.saved, c)
	return nil
}

// caRegistrar signs CSRs with a real CA, like the registration service.
type caRegistrar struct {
	ca *pki.CA

	mu     sync.Mutex
	calls  int
	tokens []string
	// failures fail the first calls.
	failures int
}

func (r *caRegistrar) Register(_ context.Context, cluster, token string, csrPEM []byte) ([]byte, []byte, error) {
	r.mu.Lock()
	r.calls++
	r.tokens = append(r.tokens, token)
	fail := r.calls <= r.failures
	r.mu.Unlock()
	if fail {
		return nil, nil, errors.New("registration unavailable")
	}
	csr, err := pki.ParseCSR(csrPEM)
	if err != nil {
		return nil, nil, err
	}
	if len(csr.URIs) != 1 {
		return nil, nil, errors.New("CSR must carry one URI SAN")
	}
	id, err := pki.ParseID(csr.URIs[0])
	if err != nil {
		return nil, nil, err
	}
	if id.Name != cluster {
		return nil, nil, errors.New("CSR names another cluster")
	}
	chain, err := r.ca.Sign(csr.PublicKey, pki.LeafOptions{ID: id, TTL: time.Hour})
	if err != nil {
		return nil, nil, err
	}
	return pki.EncodeCertificates(chain...), r.ca.TrustBundlePEM(), nil
}

func (r *caRegistrar) registrations() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// issued returns stored credentials signed by ca for cluster.
func issued(t *testing.T, ca *pki.CA, cluster string, now time.Time, ttl time.Duration) Credentials {
	t.Helper()
	certPEM, keyPEM, err := ca.IssueKeyPair(pki.LeafOptions{ID: pki.ClusterID(trustDomain, cluster), TTL: ttl, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCertificates(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return Credentials{CertPEM: certPEM, KeyPEM: keyPEM, BundlePEM: ca.TrustBundlePEM(), NotAfter: certs[0].NotAfter}
}

func TestIdentityEnsure(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	valid := issued(t, ca, "east", now, time.Hour)
	expired := issued(t, ca, "east", now.Add(-2*time.Hour), time.Hour)
	otherCluster := issued(t, ca, "west", now, time.Hour)
	mismatched := valid
	mismatched.KeyPEM = otherCluster.KeyPEM

	tests := []struct {
		name     string
		stored   *Credentials
		loadErr  error
		failures int

		wantRegistered bool
		wantCert       []byte // the certificate in use, when not registering
	}{
		{name: "valid stored credentials are used without registering", stored: &valid, wantCert: valid.CertPEM},
		{name: "none stored: registers", wantRegistered: true},
		{name: "expired: registers", stored: &expired, wantRegistered: true},
		{name: "stored for another cluster: registers", stored: &otherCluster, wantRegistered: true},
		{name: "stored key does not match the certificate: registers", stored: &mismatched, wantRegistered: true},
		{name: "unreadable store: registers", loadErr: errors.New("permission denied"), wantRegistered: true},
		{name: "registration fails at first: retries", failures: 1, wantRegistered: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &memStore{cred: tt.stored, loadErr: tt.loadErr}
			reg := &caRegistrar{ca: ca, failures: tt.failures}
			id := NewIdentity("east", trustDomain, func() (string, error) { return "bootstrap-token", nil }, store, reg, testLogger(t))

			if _, err := id.Certificate(); err == nil {
				t.Errorf("Certificate before Ensure: want an error")
			}
			if err := id.Ensure(t.Context()); err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			cert, err := id.Certificate()
			if err != nil {
				t.Fatalf("Certificate: %v", err)
			}
			leaf, err := x509.ParseCertificate(cert.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			if got, err := pki.IDFromCertificate(leaf); err != nil || got != pki.ClusterID(trustDomain, "east") {
				t.Errorf("certificate identity = %v, %v; want %v", got, err, pki.ClusterID(trustDomain, "east"))
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), Intermediates: intermediates(ca), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("certificate does not verify against the CA: %v", err)
			}

			if !tt.wantRegistered {
				if n := reg.registrations(); n != 0 {
					t.Errorf("registered %d times, want 0", n)
				}
				if len(store.saved) != 0 {
					t.Errorf("saved credentials without registering")
				}
				if want, _ := pki.ParseCertificates(tt.wantCert); !leaf.Equal(want[0]) {
					t.Errorf("not using the stored certificate")
				}
				return
			}
			if n := reg.registrations(); n != tt.failures+1 {
				t.Errorf("registered %d times, want %d", n, tt.failures+1)
			}
			if reg.tokens[0] != "bootstrap-token" {
				t.Errorf("registered with token %q", reg.tokens[0])
			}
			if len(store.saved) != 1 {
				t.Fatalf("saved %d times, want 1", len(store.saved))
			}
			saved := store.saved[0]
			if want := pki.EncodeCertificates(leaf); !bytes.HasPrefix(saved.CertPEM, want) {
				t.Errorf("saved certificate is not the one in use")
			}
			if !saved.NotAfter.Equal(leaf.NotAfter) || !saved.NotAfter.After(time.Now()) {
				t.Errorf("saved NotAfter = %v, leaf %v", saved.NotAfter, leaf.NotAfter)
			}
			if !bytes.Equal(saved.BundlePEM, ca.TrustBundlePEM()) {
				t.Errorf("saved bundle is not the CA's trust bundle")
			}
			if key, err := pki.ParseKey(saved.KeyPEM); err != nil || !key.Public().(comparableKey).Equal(leaf.PublicKey) {
				t.Errorf("saved key does not match the certificate: %v", err)
			}
			if tt.stored != nil && bytes.Equal(saved.CertPEM, tt.stored.CertPEM) {
				t.Errorf("saved the old certificate")
			}
		})
	}
}

func intermediates(ca *pki.CA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Intermediate)
	return p
}

func TestIdentityEnsureStopsWithContext(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	reads := 0
	token := func() (string, error) {
		reads++
		cancel()
		return "", errors.New("token file missing")
	}
	store := &memStore{}
	reg := &caRegistrar{ca: ca}
	id := NewIdentity("east", trustDomain, token, store, reg, testLogger(t))
	if err := id.Ensure(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Ensure = %v, want context.Canceled", err)
	}
	if reads != 1 || reg.registrations() != 0 || len(store.saved) != 0 {
		t.Errorf("token reads %d, registrations %d, saves %d; want 1, 0, 0", reads, reg.registrations(), len(store.saved))
	}
	if _, err := id.Certificate(); err == nil {
		t.Errorf("Certificate after a failed Ensure: want an error")
	}
}

// comparableKey is a public key that compares with another: every key
// type of the standard library is one (see crypto.PublicKey).
type comparableKey interface {
	Equal(crypto.PublicKey) bool
}
