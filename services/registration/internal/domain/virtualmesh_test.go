package domain_test

import (
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

func TestAuthorizeIntermediate(t *testing.T) {
	vmRef := domain.ObjectRef{Name: "shared", Namespace: "meshplane"}
	eastMesh := domain.ObjectRef{Name: "istiod", Namespace: "istio-system"}
	westMesh := domain.ObjectRef{Name: "istiod-west", Namespace: "istio-system"}
	shared := domain.VirtualMesh{Ref: vmRef, Cluster: "mgmt", Meshes: []domain.ObjectRef{eastMesh, westMesh}, Trust: domain.TrustShared}
	meshes := []domain.Mesh{
		{Ref: eastMesh, Cluster: "east", TrustDomain: "east.td"},
		{Ref: westMesh, Cluster: "west"},
	}
	with := func(edit func(*domain.VirtualMesh)) []domain.VirtualMesh {
		v := shared
		edit(&v)
		return []domain.VirtualMesh{v}
	}
	t0 := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		name    string
		cluster string
		mesh    domain.ObjectRef
		vms     []domain.VirtualMesh
		want    error
		word    string
		wantTD  string
		wantVMC string
	}{
		{name: "own mesh, shared trust", cluster: "east", mesh: eastMesh, vms: []domain.VirtualMesh{shared}, wantTD: "east.td", wantVMC: "mgmt"},
		{name: "no trust domain: Istio's default", cluster: "west", mesh: westMesh, vms: []domain.VirtualMesh{shared}, wantTD: "cluster.local", wantVMC: "mgmt"},
		{name: "mesh of another cluster", cluster: "east", mesh: westMesh, vms: []domain.VirtualMesh{shared}, want: domain.ErrIntermediateDenied, word: "discovered in cluster west, not in cluster east"},
		{name: "mesh nowhere", cluster: "east", mesh: domain.ObjectRef{Name: "x", Namespace: "y"}, vms: []domain.VirtualMesh{shared}, want: domain.ErrIntermediateDenied, word: "not discovered"},
		{name: "no VirtualMesh", cluster: "east", mesh: eastMesh, want: domain.ErrIntermediatePrecondition, word: "not found"},
		{name: "not listed", cluster: "east", mesh: eastMesh, vms: with(func(v *domain.VirtualMesh) { v.Meshes = []domain.ObjectRef{westMesh} }), want: domain.ErrIntermediateDenied, word: "does not list"},
		{name: "limited trust", cluster: "east", mesh: eastMesh, vms: with(func(v *domain.VirtualMesh) { v.Trust = domain.TrustLimited }), want: domain.ErrIntermediatePrecondition, word: "limited"},
		{name: "no mtls config", cluster: "east", mesh: eastMesh, vms: with(func(v *domain.VirtualMesh) { v.Trust = domain.TrustNone }), want: domain.ErrIntermediatePrecondition, word: "none"},
		{name: "in several clusters: the oldest wins", cluster: "east", mesh: eastMesh, vms: []domain.VirtualMesh{
			{Ref: vmRef, Cluster: "a-newer", CreatedAt: t0.Add(time.Hour), Meshes: shared.Meshes, Trust: domain.TrustLimited},
			{Ref: vmRef, Cluster: "z-older", CreatedAt: t0, Meshes: shared.Meshes, Trust: domain.TrustShared},
		}, wantTD: "east.td", wantVMC: "z-older"},
		{name: "in several clusters, same age: first cluster by name", cluster: "east", mesh: eastMesh, vms: []domain.VirtualMesh{
			{Ref: vmRef, Cluster: "b", CreatedAt: t0, Meshes: shared.Meshes, Trust: domain.TrustShared},
			{Ref: vmRef, Cluster: "a", CreatedAt: t0, Meshes: shared.Meshes, Trust: domain.TrustLimited},
		}, want: domain.ErrIntermediatePrecondition, word: "limited"},
		{name: "bad trust domain", cluster: "east", mesh: eastMesh, vms: []domain.VirtualMesh{shared}, want: domain.ErrIntermediatePrecondition, word: "trust domain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := meshes
			if tc.name == "bad trust domain" {
				ms = []domain.Mesh{{Ref: eastMesh, Cluster: "east", TrustDomain: "Bad/TD"}}
			}
			vm, m, err := domain.AuthorizeIntermediate(tc.cluster, vmRef, tc.mesh, tc.vms, ms)
			if tc.want != nil {
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.word) {
					t.Fatalf("err = %v, want %v saying %q", err, tc.want, tc.word)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.TrustDomain != tc.wantTD || m.Cluster != tc.cluster || vm.Cluster != tc.wantVMC {
				t.Fatalf("got mesh %+v of VirtualMesh in %s, want trust domain %s, VirtualMesh in %s", m, vm.Cluster, tc.wantTD, tc.wantVMC)
			}
		})
	}
}

func TestIntermediateTTLAndSpec(t *testing.T) {
	vm := domain.VirtualMesh{IntermediateTTL: 48 * time.Hour}
	for _, tc := range []struct {
		req  time.Duration
		vm   domain.VirtualMesh
		want time.Duration
	}{
		{time.Hour, vm, time.Hour},
		{0, vm, 48 * time.Hour},
		{0, domain.VirtualMesh{}, 24 * time.Hour},
		{-time.Hour, domain.VirtualMesh{IntermediateTTL: -time.Hour}, 24 * time.Hour},
	} {
		if got := domain.IntermediateTTL(tc.req, tc.vm, 24*time.Hour); got != tc.want {
			t.Errorf("IntermediateTTL(%v, %v) = %v, want %v", tc.req, tc.vm.IntermediateTTL, got, tc.want)
		}
	}
	now := time.Unix(1_800_000_000, 0)
	root := &x509.Certificate{NotAfter: now.Add(10 * time.Hour)}
	mesh := domain.Mesh{Ref: domain.ObjectRef{Name: "istiod", Namespace: "istio-system"}, TrustDomain: "east.td"}
	spec, err := domain.NewIntermediateSpec("east", mesh, root, 48*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if !spec.NotAfter.Equal(root.NotAfter) || spec.URI.String() != "spiffe://east.td" || spec.Organization != "east.td" || spec.CommonName != "istiod.istio-system.east" {
		t.Fatalf("spec %+v: want capped by the root, spiffe://east.td, O=east.td", spec)
	}
	if spec, _ := domain.NewIntermediateSpec("east", mesh, root, time.Hour, now); !spec.NotAfter.Equal(now.Add(time.Hour)) || !spec.NotBefore.Before(now) {
		t.Fatalf("spec %v..%v, want from before now for an hour", spec.NotBefore, spec.NotAfter)
	}
	if _, err := domain.NewIntermediateSpec("east", mesh, root, 0, now); err == nil {
		t.Fatal("a zero lifetime was accepted")
	}
}

func TestRootKey(t *testing.T) {
	a := domain.VirtualMesh{Ref: domain.ObjectRef{Name: "shared", Namespace: "meshplane"}}
	b := a
	b.Root.KeyAlgorithm = domain.KeyRSA4096
	c := a
	c.Cluster, c.Meshes = "other", []domain.ObjectRef{{Name: "x", Namespace: "y"}}
	if a.RootKey() == b.RootKey() {
		t.Error("a new key algorithm keeps the root")
	}
	if a.RootKey() != c.RootKey() {
		t.Error("the root changed with the VirtualMesh's meshes or cluster")
	}
	if d := (domain.VirtualMesh{Ref: domain.ObjectRef{Name: "meshplane.shared", Namespace: ""}}); d.RootKey() == a.RootKey() {
		t.Error("two VirtualMeshes share a root key")
	}
}

func TestValidateIntermediateCSR(t *testing.T) {
	k := keys()
	for name, ok := range map[string]bool{"p256": true, "p384": true, "rsa2048": true, "p224": false, "p521": false, "rsa1024": false, "ed25519": false} {
		csr, err := x509.ParseCertificateRequest(csrDER(t, k[name], nil))
		if err != nil {
			t.Fatal(err)
		}
		err = domain.ValidateIntermediateCSR(csr)
		if (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", name, err, ok)
		}
		if err != nil && !errors.Is(err, domain.ErrInvalidCSR) {
			t.Errorf("%s: %v does not wrap ErrInvalidCSR", name, err)
		}
	}
}
