package service_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/registration/service"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const meshNS = "istio-system"

func istioMesh(cluster, name, trustDomain string) *discoveryv1.Mesh {
	return &discoveryv1.Mesh{
		Metadata: &commonv1.ObjectMeta{Name: name, Namespace: meshNS, Cluster: cluster},
		Spec: &discoveryv1.MeshSpec{Type: &discoveryv1.MeshSpec_Istio_{Istio: &discoveryv1.MeshSpec_Istio{
			TrustDomain: trustDomain, Installation: &discoveryv1.MeshSpec_Installation{Namespace: meshNS, Cluster: cluster},
		}}},
	}
}

type mtlsKind int

const (
	sharedGenerated mtlsKind = iota
	sharedRSA
	limited
)

func virtualMesh(name string, kind mtlsKind, intermediateTTL time.Duration, meshes ...string) *networkingv1.VirtualMesh {
	var refs []*commonv1.ObjectRef
	for _, m := range meshes {
		refs = append(refs, &commonv1.ObjectRef{Name: m, Namespace: meshNS})
	}
	mtls := &networkingv1.VirtualMeshSpec_MTLSConfig{}
	switch kind {
	case limited:
		mtls.TrustModel = &networkingv1.VirtualMeshSpec_MTLSConfig_Limited{Limited: &networkingv1.VirtualMeshSpec_MTLSConfig_LimitedTrust{}}
	default:
		gen := &networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated{Ttl: durationpb.New(30 * 24 * time.Hour)}
		if kind == sharedRSA {
			gen.KeyAlgorithm = networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_RSA_4096
		}
		shared := &networkingv1.VirtualMeshSpec_MTLSConfig_SharedTrust{
			RootCertificateAuthority: &networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority{
				CaSource: &networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_{Generated: gen},
			},
		}
		if intermediateTTL > 0 {
			shared.IntermediateTtl = durationpb.New(intermediateTTL)
		}
		mtls.TrustModel = &networkingv1.VirtualMeshSpec_MTLSConfig_Shared{Shared: shared}
	}
	return &networkingv1.VirtualMesh{
		Metadata: &commonv1.ObjectMeta{Name: name, Namespace: "meshplane", Cluster: "mgmt", CreationTimestamp: timestamppb.New(time.Unix(1_800_000_000, 0))},
		Spec:     &networkingv1.VirtualMeshSpec{Meshes: refs, MtlsConfig: mtls},
	}
}

// putInputs writes input snapshots the way ingest does, into the store
// registration reads.
func putInputs(t *testing.T, client redis.UniversalClient, inputs ...*snapshotv1.InputSnapshot) {
	t.Helper()
	store := snapstore.NewRedis(client, snapshots.DefaultInstall, snapshots.Inputs, func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} })
	for _, in := range inputs {
		if err := store.Put(t.Context(), in.GetCluster(), snapshots.SealInput(in), in); err != nil {
			t.Fatal(err)
		}
	}
}

// intermediateCSR is a request for key that asks for everything it should
// not get: a CA with a long path, names of its own.
func intermediateCSR(t *testing.T, key crypto.Signer, edit func([]byte)) []byte {
	t.Helper()
	bc, err := asn1.Marshal(struct {
		IsCA       bool `asn1:"optional"`
		MaxPathLen int  `asn1:"optional,default:-1"`
	}{true, 5})
	if err != nil {
		t.Fatal(err)
	}
	return csrPEM(t, key, &x509.CertificateRequest{
		Subject:         pkix.Name{CommonName: "evil root", Organization: []string{"evil"}},
		DNSNames:        []string{"istiod.istio-system.svc"},
		URIs:            []*url.URL{mustURL(t, "spiffe://evil.local/ns/x/sa/y")},
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Critical: true, Value: bc}},
	}, edit)
}

type intermediateEnv struct {
	*env
	reg   *prometheus.Registry
	redis redis.UniversalClient
}

func newIntermediateEnv(t *testing.T, edits ...func(*service.Config)) *intermediateEnv {
	t.Helper()
	srv := redistest.Start(t)
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()}})
	t.Cleanup(func() { _ = client.Close() })
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e := newEnvWithCA(t, ca, func(c *service.Config) {
		for _, edit := range edits {
			edit(c)
		}
	}, service.WithRedis(client), service.WithRegisterer(reg))
	putInputs(t, client,
		&snapshotv1.InputSnapshot{Cluster: "east", Meshes: []*discoveryv1.Mesh{
			istioMesh("east", "istiod-east", "east.td"), istioMesh("east", "istiod-canary", "east.td"), istioMesh("east", "istiod-orphan", ""),
		}},
		&snapshotv1.InputSnapshot{Cluster: "west", Meshes: []*discoveryv1.Mesh{istioMesh("west", "istiod-west", "")}},
		&snapshotv1.InputSnapshot{Cluster: "mgmt", VirtualMeshes: []*networkingv1.VirtualMesh{
			virtualMesh("shared", sharedGenerated, 48*time.Hour, "istiod-east", "istiod-west"),
			virtualMesh("canary", sharedGenerated, 0, "istiod-canary"),
			virtualMesh("limited", limited, 0, "istiod-east"),
		}},
	)
	return &intermediateEnv{env: e, reg: reg, redis: client}
}

func signReq(vm, mesh string, csr []byte, ttl time.Duration) *connect.Request[registrationv1.SignIntermediateRequest] {
	req := &registrationv1.SignIntermediateRequest{
		VirtualMesh: &commonv1.ObjectRef{Name: vm, Namespace: "meshplane"},
		Mesh:        &commonv1.ObjectRef{Name: mesh, Namespace: meshNS},
		CsrPem:      csr,
	}
	if ttl != 0 {
		req.Ttl = durationpb.New(ttl)
	}
	return connect.NewRequest(req)
}

// checkIntermediate asserts what Istio's plug-in CA needs, and that the
// intermediate really signs workload leaves but no further CA.
func checkIntermediate(t *testing.T, res *registrationv1.SignIntermediateResponse, key crypto.Signer, trustDomain, cluster, mesh string) (inter, root *x509.Certificate) {
	t.Helper()
	certs, err := pki.ParseCertificates(res.GetCertificatePem())
	if err != nil || len(certs) != 1 {
		t.Fatalf("ca-cert.pem: %d certificates, %v; want 1", len(certs), err)
	}
	inter = certs[0]
	roots, err := pki.ParseCertificates(res.GetRootCertificatePem())
	if err != nil || len(roots) != 1 {
		t.Fatalf("root-cert.pem: %d certificates, %v; want 1", len(roots), err)
	}
	root = roots[0]
	chain, err := pki.ParseCertificates(res.GetCertificateChainPem())
	if err != nil || len(chain) != 2 || !chain[0].Equal(inter) || !chain[1].Equal(root) {
		t.Fatalf("cert-chain.pem is not the intermediate then the root: %d certificates, %v", len(chain), err)
	}
	if !inter.IsCA || !inter.BasicConstraintsValid || inter.MaxPathLen != 0 || !inter.MaxPathLenZero {
		t.Fatalf("intermediate: CA %v, pathlen %d (zero %v); want CA:true pathlen 0", inter.IsCA, inter.MaxPathLen, inter.MaxPathLenZero)
	}
	if want := x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature; inter.KeyUsage != want {
		t.Fatalf("key usage %b, want %b", inter.KeyUsage, want)
	}
	if len(inter.URIs) != 1 || inter.URIs[0].String() != "spiffe://"+trustDomain {
		t.Fatalf("URI SANs %v, want only spiffe://%s", inter.URIs, trustDomain)
	}
	if len(inter.DNSNames)+len(inter.IPAddresses)+len(inter.EmailAddresses) != 0 {
		t.Fatalf("names from the CSR leaked in: %v %v %v", inter.DNSNames, inter.IPAddresses, inter.EmailAddresses)
	}
	if len(inter.Subject.Organization) != 1 || inter.Subject.Organization[0] != trustDomain ||
		!strings.Contains(inter.Subject.CommonName, mesh) || !strings.Contains(inter.Subject.CommonName, cluster) {
		t.Fatalf("subject %v, want O=%s and a CN naming %s and %s", inter.Subject, trustDomain, mesh, cluster)
	}
	if !key.Public().(comparableKey).Equal(inter.PublicKey) {
		t.Fatal("the intermediate is not for the CSR's key")
	}
	if !res.GetExpiresAt().AsTime().Equal(inter.NotAfter) {
		t.Fatalf("expires_at %v, certificate says %v", res.GetExpiresAt().AsTime(), inter.NotAfter)
	}
	pool := x509.NewCertPool()
	pool.AddCert(root)
	if _, err := inter.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("intermediate does not verify to the VirtualMesh root: %v", err)
	}
	// istiod signs a workload certificate with it: the chain verifies.
	leaf, _ := signWith(t, inter, key, false, "spiffe://"+trustDomain+"/ns/default/sa/reviews")
	inters := x509.NewCertPool()
	inters.AddCert(inter)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inters, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("a workload leaf signed by the intermediate does not verify: %v", err)
	}
	// A CA below it breaks path length 0.
	sub, subKey := signWith(t, inter, key, true, "")
	subLeaf, _ := signWith(t, sub, subKey, false, "spiffe://"+trustDomain+"/ns/default/sa/evil")
	inters.AddCert(sub)
	if _, err := subLeaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inters, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
		t.Fatal("a CA below the intermediate verified: path length 0 is not enforced")
	}
	return inter, root
}

// selfSigned is a user's own root for key.
func selfSigned(t *testing.T, key crypto.Signer) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "corp root", Organization: []string{"Corp"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		BasicConstraintsValid: true, IsCA: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// signWith signs a certificate for a new key with parent and its key.
func signWith(t *testing.T, parent *x509.Certificate, parentKey crypto.Signer, isCA bool, uri string) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "test " + serial.String()}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		BasicConstraintsValid: true, IsCA: isCA, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if isCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	if uri != "" {
		tmpl.URIs = []*url.URL{mustURL(t, uri)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func TestSignIntermediate(t *testing.T) {
	e := newIntermediateEnv(t)
	eastCert, _ := register(t, e.client(t, nil, nil), "east", "east-token")
	westCert, _ := register(t, e.client(t, nil, nil), "west", "west-token")
	issued := 0
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			east, west := e.client(t, eastCert, p.opts), e.client(t, westCert, p.opts)

			eastKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			res, err := east.SignIntermediate(t.Context(), signReq("shared", "istiod-east", intermediateCSR(t, eastKey, nil), 0))
			if err != nil {
				t.Fatalf("SignIntermediate(east): %v", err)
			}
			issued++
			eastInter, root := checkIntermediate(t, res.Msg, eastKey, "east.td", "east", "istiod-east")
			// The VirtualMesh's intermediate_ttl, 48h.
			if d := time.Until(eastInter.NotAfter); d < 47*time.Hour || d > 48*time.Hour {
				t.Errorf("intermediate lives %v, want the VirtualMesh's 48h", d)
			}

			// The other cluster of the VirtualMesh: another intermediate,
			// the same root; its mesh has Istio's default trust domain.
			westKey, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				t.Fatal(err)
			}
			res, err = west.SignIntermediate(t.Context(), signReq("shared", "istiod-west", intermediateCSR(t, westKey, nil), 0))
			if err != nil {
				t.Fatalf("SignIntermediate(west): %v", err)
			}
			issued++
			westInter, westRoot := checkIntermediate(t, res.Msg, westKey, "cluster.local", "west", "istiod-west")
			if !westRoot.Equal(root) {
				t.Fatal("two clusters of one VirtualMesh got different roots")
			}
			if westInter.SerialNumber.Cmp(eastInter.SerialNumber) == 0 {
				t.Fatal("two clusters got the same intermediate")
			}

			// A requested lifetime past the root is capped by the root.
			res, err = east.SignIntermediate(t.Context(), signReq("shared", "istiod-east", intermediateCSR(t, eastKey, nil), 10*365*24*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			issued++
			capped, _ := checkIntermediate(t, res.Msg, eastKey, "east.td", "east", "istiod-east")
			if !capped.NotAfter.Equal(root.NotAfter) {
				t.Errorf("intermediate ends %v, want the root's end %v", capped.NotAfter, root.NotAfter)
			}

			// Another VirtualMesh has another root.
			res, err = east.SignIntermediate(t.Context(), signReq("canary", "istiod-canary", intermediateCSR(t, eastKey, nil), 0))
			if err != nil {
				t.Fatal(err)
			}
			issued++
			_, canaryRoot := checkIntermediate(t, res.Msg, eastKey, "east.td", "east", "istiod-canary")
			if canaryRoot.Equal(root) {
				t.Fatal("two VirtualMeshes share a root")
			}
		})
	}
	if got := counter(t, e.reg, "meshplane_registration_certificates_issued_total", map[string]string{"call": "sign_intermediate"}); got != float64(issued) {
		t.Errorf("certificates_issued_total{call=sign_intermediate} = %v, want %d", got, issued)
	}
}

func TestSignIntermediateRefusals(t *testing.T) {
	e := newIntermediateEnv(t)
	eastCert, _ := register(t, e.client(t, nil, nil), "east", "east-token")
	good, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			for _, tc := range []struct {
				name     string
				cert     *tls.Certificate
				vm, mesh string
				csr      []byte
				code     connect.Code
				word     string
			}{
				{"mesh of cluster west asked by east", eastCert, "shared", "istiod-west", intermediateCSR(t, good, nil), connect.CodePermissionDenied, "discovered in cluster west"},
				{"mesh in no VirtualMesh", eastCert, "shared", "istiod-orphan", intermediateCSR(t, good, nil), connect.CodePermissionDenied, "does not list"},
				{"mesh of another VirtualMesh", eastCert, "canary", "istiod-east", intermediateCSR(t, good, nil), connect.CodePermissionDenied, "does not list"},
				{"VirtualMesh with limited trust", eastCert, "limited", "istiod-east", intermediateCSR(t, good, nil), connect.CodeFailedPrecondition, "limited trust"},
				{"unknown VirtualMesh", eastCert, "nowhere", "istiod-east", intermediateCSR(t, good, nil), connect.CodeFailedPrecondition, "not found"},
				{"unknown mesh", eastCert, "shared", "istiod-gone", intermediateCSR(t, good, nil), connect.CodePermissionDenied, "not discovered in cluster east"},
				{"service identity", e.serviceCert(t, "translation"), "shared", "istiod-east", intermediateCSR(t, good, nil), connect.CodePermissionDenied, ""},
				{"no client certificate", nil, "shared", "istiod-east", intermediateCSR(t, good, nil), connect.CodeUnauthenticated, ""},
				{"weak key", eastCert, "shared", "istiod-east", intermediateCSR(t, weak, nil), connect.CodeInvalidArgument, "too weak"},
				{"bad signature", eastCert, "shared", "istiod-east", intermediateCSR(t, good, func(der []byte) { der[len(der)-3] ^= 0xff }), connect.CodeInvalidArgument, "signature"},
				{"not a CSR", eastCert, "shared", "istiod-east", []byte("hello"), connect.CodeInvalidArgument, "PEM"},
				{"no mesh namespace", eastCert, "shared", "", intermediateCSR(t, good, nil), connect.CodeInvalidArgument, "mesh"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					req := signReq(tc.vm, tc.mesh, tc.csr, 0)
					if tc.mesh == "" {
						req.Msg.Mesh = &commonv1.ObjectRef{Name: "istiod-east"}
					}
					res, err := e.client(t, tc.cert, p.opts).SignIntermediate(t.Context(), req)
					wantRefused(t, res, err, tc.code, tc.word)
				})
			}
		})
	}

	// A revoked cluster certificate is refused before the handler runs.
	admin := e.admin(t, e.serviceCert(t, "meshctl"), nil)
	if _, err := admin.DeregisterCluster(t.Context(), connect.NewRequest(&registrationv1.DeregisterClusterRequest{Name: "east"})); err != nil {
		t.Fatal(err)
	}
	for _, p := range protocols {
		res, err := e.client(t, eastCert, p.opts).SignIntermediate(t.Context(), signReq("shared", "istiod-east", intermediateCSR(t, good, nil), 0))
		wantRefused(t, res, err, connect.CodeUnauthenticated, "revoked")
	}
	if got := counter(t, e.reg, "meshplane_registration_certificates_issued_total", map[string]string{"call": "sign_intermediate"}); got != 0 {
		t.Errorf("%v intermediates were signed by refused calls", got)
	}
	for reason, want := range map[string]float64{"denied": 8, "precondition": 4, "invalid_request": 8} {
		if got := counter(t, e.reg, "meshplane_registration_refused_total", map[string]string{"call": "sign_intermediate", "reason": reason}); got != want {
			t.Errorf("refused_total{call=sign_intermediate,reason=%s} = %v, want %v", reason, got, want)
		}
	}
}
