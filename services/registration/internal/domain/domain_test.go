package domain_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

const td = "test.local"

var east = pki.ClusterID(td, "east")

// keys are generated once: RSA generation is slow and every case only needs
// some key of the right type.
var keys = sync.OnceValue(func() map[string]crypto.Signer {
	must := func(k crypto.Signer, err error) crypto.Signer {
		if err != nil {
			panic(err)
		}
		return k
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return map[string]crypto.Signer{
		"p224":    must(ecdsa.GenerateKey(elliptic.P224(), rand.Reader)),
		"p256":    must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)),
		"p384":    must(ecdsa.GenerateKey(elliptic.P384(), rand.Reader)),
		"p521":    must(ecdsa.GenerateKey(elliptic.P521(), rand.Reader)),
		"rsa1024": must(rsa.GenerateKey(rand.Reader, 1024)),
		"rsa2048": must(rsa.GenerateKey(rand.Reader, 2048)),
		"ed25519": ed,
	}
})

// csrDER signs a request with key; edit may change the template first.
func csrDER(t testing.TB, key crypto.Signer, edit func(*x509.CertificateRequest)) []byte {
	t.Helper()
	tmpl := &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "east"},
		URIs:    []*url.URL{east.URL()},
	}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatalf("create CSR: %v", err)
	}
	return der
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// basicConstraints builds the extension a CA request carries.
func basicConstraints(t testing.TB, isCA bool) pkix.Extension {
	t.Helper()
	v, err := asn1.Marshal(struct {
		IsCA bool `asn1:"optional"`
	}{isCA})
	if err != nil {
		t.Fatal(err)
	}
	return pkix.Extension{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Critical: true, Value: v}
}

func TestValidateCSR(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  string
		edit func(*x509.CertificateRequest)
		ok   bool
	}{
		{name: "ECDSA P-256", key: "p256", ok: true},
		{name: "ECDSA P-384", key: "p384", ok: true},
		{name: "ECDSA P-224 refused", key: "p224"},
		{name: "ECDSA P-521 refused", key: "p521"},
		{name: "RSA 1024 refused", key: "rsa1024"},
		{name: "RSA 2048", key: "rsa2048", ok: true},
		{name: "Ed25519", key: "ed25519", ok: true},
		{name: "extra DNS SAN refused", key: "p256", edit: func(r *x509.CertificateRequest) {
			r.DNSNames = []string{"east.example.com"}
		}},
		{name: "extra IP SAN refused", key: "p256", edit: func(r *x509.CertificateRequest) {
			r.IPAddresses = []net.IP{net.IPv4(10, 0, 0, 1)}
		}},
		{name: "extra e-mail SAN refused", key: "p256", edit: func(r *x509.CertificateRequest) {
			r.EmailAddresses = []string{"root@example.com"}
		}},
		{name: "URI SAN of another cluster refused", key: "p256", edit: func(r *x509.CertificateRequest) {
			r.URIs = []*url.URL{pki.ClusterID(td, "west").URL()}
		}},
		{name: "URI SAN of a service refused", key: "p256", edit: func(r *x509.CertificateRequest) {
			r.URIs = []*url.URL{pki.ServiceID(td, "east").URL()}
		}},
		{name: "URI SAN in another trust domain refused", key: "p256", edit: func(r *x509.CertificateRequest) {
			r.URIs = []*url.URL{pki.ClusterID("other.local", "east").URL()}
		}},
		{name: "two URI SANs refused", key: "p256", edit: func(r *x509.CertificateRequest) {
			r.URIs = []*url.URL{east.URL(), mustURL(t, "spiffe://test.local/cluster/west")}
		}},
		{name: "same URI SAN twice refused", key: "p256", edit: func(r *x509.CertificateRequest) {
			r.URIs = []*url.URL{east.URL(), east.URL()}
		}},
		{name: "no URI SAN refused", key: "p256", edit: func(r *x509.CertificateRequest) {
			r.URIs = nil
		}},
		{name: "CA request refused", key: "p256", edit: func(r *x509.CertificateRequest) {
			r.ExtraExtensions = []pkix.Extension{basicConstraints(t, true)}
		}},
		{name: "basic constraints without CA refused too", key: "p256", edit: func(r *x509.CertificateRequest) {
			r.ExtraExtensions = []pkix.Extension{basicConstraints(t, false)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			csr, err := x509.ParseCertificateRequest(csrDER(t, keys()[tc.key], tc.edit))
			if err != nil {
				t.Fatalf("parse CSR: %v", err)
			}
			err = domain.ValidateCSR(csr, east)
			if tc.ok && err != nil {
				t.Fatalf("ValidateCSR: %v, want success", err)
			}
			if !tc.ok {
				if err == nil {
					t.Fatal("ValidateCSR succeeded, want ErrInvalidCSR")
				}
				if !errors.Is(err, domain.ErrInvalidCSR) {
					t.Fatalf("ValidateCSR: %v, want it to wrap ErrInvalidCSR", err)
				}
			}
		})
	}
}

func TestTokenHashMatches(t *testing.T) {
	stored := domain.HashToken("s3cret-token")
	for _, tc := range []struct {
		name  string
		hash  domain.TokenHash
		token string
		want  bool
	}{
		{"same token", stored, "s3cret-token", true},
		{"other token", stored, "other-token", false},
		{"prefix of the token", stored, "s3cret", false},
		{"token with a trailing newline", stored, "s3cret-token\n", false},
		{"empty token", stored, "", false},
		{"zero hash never matches the empty token", domain.TokenHash{}, "", false},
		{"zero hash never matches a token", domain.TokenHash{}, "s3cret-token", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.hash.Matches(tc.token); got != tc.want {
				t.Fatalf("Matches(%q) = %v, want %v", tc.token, got, tc.want)
			}
		})
	}
}

// FuzzValidateCSR feeds arbitrary DER to the parser and the rules. Whatever
// parses must never panic the rules, and whatever the rules accept must
// name exactly the wanted identity and nothing else.
func FuzzValidateCSR(f *testing.F) {
	k := keys()
	f.Add(csrDER(f, k["p256"], nil))
	f.Add(csrDER(f, k["ed25519"], nil))
	f.Add(csrDER(f, k["p224"], nil))
	f.Add(csrDER(f, k["p256"], func(r *x509.CertificateRequest) { r.DNSNames = []string{"x"} }))
	f.Add(csrDER(f, k["p256"], func(r *x509.CertificateRequest) {
		r.URIs = []*url.URL{east.URL(), pki.ClusterID(td, "west").URL()}
	}))
	f.Add(csrDER(f, k["p256"], func(r *x509.CertificateRequest) {
		r.ExtraExtensions = []pkix.Extension{basicConstraints(f, true)}
	}))
	// Intermediate requests: any names, a CA request, an RSA key.
	f.Add(csrDER(f, k["rsa2048"], func(r *x509.CertificateRequest) {
		r.URIs = []*url.URL{mustURL(f, "spiffe://cluster.local")}
		r.DNSNames = []string{"istiod.istio-system.svc"}
		r.ExtraExtensions = []pkix.Extension{basicConstraints(f, true)}
	}))
	f.Add(csrDER(f, k["rsa1024"], nil))
	f.Add([]byte{})
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, der []byte) {
		csr, err := x509.ParseCertificateRequest(der)
		if err != nil {
			return
		}
		if err := domain.ValidateIntermediateCSR(csr); err != nil {
			if !errors.Is(err, domain.ErrInvalidCSR) {
				t.Fatalf("ValidateIntermediateCSR error %v does not wrap ErrInvalidCSR", err)
			}
		}
		if err := domain.ValidateCSR(csr, east); err != nil {
			if !errors.Is(err, domain.ErrInvalidCSR) {
				t.Fatalf("ValidateCSR error %v does not wrap ErrInvalidCSR", err)
			}
			return
		}
		if len(csr.URIs) != 1 || csr.URIs[0].String() != east.String() {
			t.Fatalf("accepted a request with URI SANs %v", csr.URIs)
		}
		if len(csr.DNSNames)+len(csr.IPAddresses)+len(csr.EmailAddresses) != 0 {
			t.Fatalf("accepted a request with other SANs: %v %v %v", csr.DNSNames, csr.IPAddresses, csr.EmailAddresses)
		}
		for _, ext := range csr.Extensions {
			if ext.Id.Equal(asn1.ObjectIdentifier{2, 5, 29, 19}) {
				t.Fatal("accepted a request with basic constraints")
			}
		}
	})
}

// FuzzParseCSR feeds arbitrary bytes, PEM-wrapped or not, to the parser
// that runs first on every request: it must never panic, and whatever it
// accepts has a valid signature.
func FuzzParseCSR(f *testing.F) {
	k := keys()
	good := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csrDER(f, k["p256"], nil)})
	f.Add(good)
	f.Add(append(append([]byte{}, good...), good...))
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: data})} {
			csr, err := pki.ParseCSR(in)
			if err != nil {
				continue
			}
			if err := csr.CheckSignature(); err != nil {
				t.Fatalf("ParseCSR accepted a bad signature: %v", err)
			}
			_ = domain.ValidateCSR(csr, east)
		}
	})
}
