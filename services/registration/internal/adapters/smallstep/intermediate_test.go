package smallstep_test

import (
	"crypto/x509"
	"net/url"
	"testing"
	"time"

	"github.com/meshplane/meshplane/services/registration/internal/adapters/smallstep"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

func TestVirtualMeshCA(t *testing.T) {
	now := time.Now()
	vm := domain.VirtualMesh{Ref: domain.ObjectRef{Name: "shared", Namespace: "meshplane"}, Root: domain.RootSource{TTL: 48 * time.Hour}}
	root, err := smallstep.VirtualMeshCA{}.NewRoot(vm, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Check(now); err != nil {
		t.Fatal(err)
	}
	if !root.Cert.IsCA || root.Cert.MaxPathLen != 1 || root.Cert.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign ||
		root.Cert.CheckSignatureFrom(root.Cert) != nil || root.Cert.NotAfter.Sub(now.Truncate(time.Second)) != 48*time.Hour {
		t.Fatalf("root: CA %v pathlen %d usage %b, lives %v", root.Cert.IsCA, root.Cert.MaxPathLen, root.Cert.KeyUsage, root.Cert.NotAfter.Sub(now))
	}
	// Whatever the request asks for, only its key is used.
	req := csr(t, &x509.CertificateRequest{DNSNames: []string{"evil.example.com"}, URIs: []*url.URL{{Scheme: "spiffe", Host: "evil", Path: "/x"}}})
	mesh := domain.Mesh{Ref: domain.ObjectRef{Name: "istiod", Namespace: "istio-system"}, Cluster: "east", TrustDomain: "east.td"}
	spec, err := domain.NewIntermediateSpec("east", mesh, root.Cert, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := smallstep.VirtualMeshCA{}.SignIntermediate(root, req, spec)
	if err != nil {
		t.Fatal(err)
	}
	if cert.CheckSignatureFrom(root.Cert) != nil || !cert.IsCA || !cert.MaxPathLenZero || len(cert.DNSNames) != 0 ||
		len(cert.URIs) != 1 || cert.URIs[0].String() != "spiffe://east.td" || len(cert.SubjectKeyId) == 0 || len(cert.AuthorityKeyId) == 0 {
		t.Fatalf("intermediate: %+v", cert)
	}
	if _, err := (smallstep.VirtualMeshCA{}).SignIntermediate(domain.RootCA{}, req, spec); err == nil {
		t.Fatal("signed without a root")
	}
}

// BenchmarkSignIntermediate measures intermediate signings a second with
// an ECDSA P-256 VirtualMesh root (the CSR's signature is checked each
// time). Run with -cpu 1 for the one-core figure.
func BenchmarkSignIntermediate(b *testing.B) {
	now := time.Now()
	root, err := smallstep.VirtualMeshCA{}.NewRoot(domain.VirtualMesh{Ref: domain.ObjectRef{Name: "shared", Namespace: "meshplane"}}, now)
	if err != nil {
		b.Fatal(err)
	}
	req := csr(b, &x509.CertificateRequest{})
	mesh := domain.Mesh{Ref: domain.ObjectRef{Name: "istiod", Namespace: "istio-system"}, Cluster: "east", TrustDomain: "east.td"}
	spec, err := domain.NewIntermediateSpec("east", mesh, root.Cert, 365*24*time.Hour, now)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (smallstep.VirtualMeshCA{}).SignIntermediate(root, req, spec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "signings/s")
}
