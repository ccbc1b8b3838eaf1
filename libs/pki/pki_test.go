package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"testing"
	"time"
)

func TestSignAndVerifyChain(t *testing.T) {
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csrPEM, err := NewCSR(key, ClusterID("td.local", "east"))
	if err != nil {
		t.Fatal(err)
	}
	csr, err := ParseCSR(csrPEM)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := ca.Sign(csr.PublicKey, LeafOptions{ID: ClusterID("td.local", "east"), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	inter := x509.NewCertPool()
	inter.AddCert(chain[1])
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: ca.Pool(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("verify leaf: %v", err)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: ca.Pool(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Fatal("a cluster certificate must not be valid for server auth")
	}
	id, err := IDFromCertificate(chain[0])
	if err != nil {
		t.Fatal(err)
	}
	if id != ClusterID("td.local", "east") {
		t.Fatalf("id = %+v", id)
	}
}

func TestSaveLoadCA(t *testing.T) {
	dir := t.TempDir()
	ca, created, err := LoadOrCreateCA(dir, "x")
	if err != nil || !created {
		t.Fatalf("create: %v created=%v", err, created)
	}
	again, created, err := LoadOrCreateCA(dir, "x")
	if err != nil || created {
		t.Fatalf("load: %v created=%v", err, created)
	}
	if !again.Root.Equal(ca.Root) || !again.Intermediate.Equal(ca.Intermediate) {
		t.Fatal("loaded CA differs from the saved one")
	}
	certPEM, keyPEM, err := again.IssueKeyPair(LeafOptions{ID: ServiceID("td", "ingest"), TTL: time.Hour, Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("issued pair does not load: %v", err)
	}
}

func TestParseID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		kind string
	}{
		{"spiffe://td/cluster/east", true, KindCluster},
		{"spiffe://td/service/ingest", true, KindService},
		{"spiffe://td/cluster/East", false, ""},
		{"spiffe://td/cluster/east/x", false, ""},
		{"spiffe://td/ns/default/sa/x", false, ""},
		{"https://td/cluster/east", false, ""},
		{"spiffe:///cluster/east", false, ""},
		{"spiffe://td/other/east", false, ""},
		{"spiffe://td/cluster/-east", false, ""},
		{"spiffe://td/cluster/east?x=1", false, ""},
	} {
		u, err := url.Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		id, err := ParseID(u)
		if (err == nil) != tc.ok {
			t.Errorf("ParseID(%q) err = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && id.Kind != tc.kind {
			t.Errorf("ParseID(%q).Kind = %q", tc.in, id.Kind)
		}
	}
}

func TestParseCSRRejectsGarbage(t *testing.T) {
	for _, in := range []string{"", "garbage", "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"} {
		if _, err := ParseCSR([]byte(in)); err == nil {
			t.Errorf("ParseCSR(%q) accepted garbage", in)
		}
	}
}

func FuzzParseCSR(f *testing.F) {
	key, _ := NewKey()
	good, _ := NewCSR(key, ClusterID("td", "east"))
	f.Add(good)
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\n-----END CERTIFICATE REQUEST-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		csr, err := ParseCSR(data)
		if err == nil && csr == nil {
			t.Fatal("nil CSR without error")
		}
	})
}
