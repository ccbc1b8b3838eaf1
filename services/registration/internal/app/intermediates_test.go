package app_test

import (
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/memory"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/smallstep"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

var (
	vmRef   = domain.ObjectRef{Name: "shared", Namespace: "meshplane"}
	meshRef = domain.ObjectRef{Name: "istiod", Namespace: "istio-system"}
)

type intermediateFixture struct {
	ints     *app.Intermediates
	vms      *memory.VirtualMeshes
	clusters *memory.Clusters
	clock    *clock
}

func newIntermediateFixture(t *testing.T, edit func(*app.IntermediateDeps), vm domain.VirtualMesh) *intermediateFixture {
	t.Helper()
	f := &intermediateFixture{vms: memory.NewVirtualMeshes(), clusters: memory.NewClusters(), clock: &clock{now: time.Now().Truncate(time.Second)}}
	f.vms.AddVirtualMesh(vm)
	f.vms.AddMesh(domain.Mesh{Ref: meshRef, Cluster: "east", TrustDomain: "east.td"})
	deps := app.IntermediateDeps{Clusters: f.clusters, VirtualMeshes: f.vms, Roots: memory.NewRoots(), CA: smallstep.VirtualMeshCA{}}
	if edit != nil {
		edit(&deps)
	}
	f.ints = app.NewIntermediates(deps, app.IntermediateOptions{DefaultTTL: 24 * time.Hour, Now: f.clock.Now})
	return f
}

func sharedVM(root domain.RootSource) domain.VirtualMesh {
	return domain.VirtualMesh{Ref: vmRef, Cluster: "mgmt", Meshes: []domain.ObjectRef{meshRef}, Trust: domain.TrustShared, Root: root}
}

func intermediateCSR(t *testing.T) []byte {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.NewCSR(key, pki.ClusterID(td, "anything"))
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

func TestIntermediatesRootLifecycle(t *testing.T) {
	f := newIntermediateFixture(t, nil, sharedVM(domain.RootSource{TTL: 10 * 24 * time.Hour}))
	req := app.IntermediateRequest{VirtualMesh: vmRef, Mesh: meshRef, CSRPEM: intermediateCSR(t)}
	a, err := f.ints.Sign(t.Context(), "east", req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.ints.Sign(t.Context(), "east", req)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.RootPEM) != string(b.RootPEM) || a.Serial == b.Serial {
		t.Fatal("two signings: want the same root and two intermediates")
	}
	if d := a.ExpiresAt.Sub(f.clock.Now()); d != 24*time.Hour {
		t.Fatalf("intermediate lives %v, want the default 24h", d)
	}
	// Past the root's end, nothing is signed.
	f.clock.Add(11 * 24 * time.Hour)
	if _, err := f.ints.Sign(t.Context(), "east", req); !errors.Is(err, domain.ErrIntermediatePrecondition) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("Sign with an expired root: %v, want a precondition error saying expired", err)
	}
}

func TestIntermediatesRefusals(t *testing.T) {
	t.Run("deregistered cluster", func(t *testing.T) {
		f := newIntermediateFixture(t, nil, sharedVM(domain.RootSource{}))
		if _, err := f.clusters.UpdateCluster(t.Context(), "east", func(c *domain.Cluster, _ bool) error {
			*c = domain.NewCluster("east", false, time.Now())
			c.Deregister(time.Now())
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		_, err := f.ints.Sign(t.Context(), "east", app.IntermediateRequest{VirtualMesh: vmRef, Mesh: meshRef, CSRPEM: intermediateCSR(t)})
		if !errors.Is(err, domain.ErrDeregistered) {
			t.Fatalf("Sign for a deregistered cluster: %v", err)
		}
	})
	t.Run("Secret root without a Kubernetes client", func(t *testing.T) {
		f := newIntermediateFixture(t, nil, sharedVM(domain.RootSource{Kind: domain.RootSecret, Secret: domain.ObjectRef{Name: "my-root"}}))
		_, err := f.ints.Sign(t.Context(), "east", app.IntermediateRequest{VirtualMesh: vmRef, Mesh: meshRef, CSRPEM: intermediateCSR(t)})
		if !errors.Is(err, domain.ErrIntermediatePrecondition) || !strings.Contains(err.Error(), "meshplane/my-root") || !strings.Contains(err.Error(), "Kubernetes client") {
			t.Fatalf("Sign: %v, want a precondition error naming the Secret and the missing client", err)
		}
	})
	t.Run("no input store", func(t *testing.T) {
		f := newIntermediateFixture(t, func(d *app.IntermediateDeps) { d.VirtualMeshes = nil }, sharedVM(domain.RootSource{}))
		_, err := f.ints.Sign(t.Context(), "east", app.IntermediateRequest{VirtualMesh: vmRef, Mesh: meshRef, CSRPEM: intermediateCSR(t)})
		if !errors.Is(err, domain.ErrIntermediatePrecondition) || !strings.Contains(err.Error(), "--redis-addrs") {
			t.Fatalf("Sign: %v", err)
		}
	})
	t.Run("bad requests", func(t *testing.T) {
		f := newIntermediateFixture(t, nil, sharedVM(domain.RootSource{}))
		for _, req := range []app.IntermediateRequest{
			{Mesh: meshRef, CSRPEM: intermediateCSR(t)},
			{VirtualMesh: vmRef, Mesh: domain.ObjectRef{Name: "Bad_Name", Namespace: "x"}, CSRPEM: intermediateCSR(t)},
			{VirtualMesh: vmRef, Mesh: meshRef, CSRPEM: intermediateCSR(t), TTL: -time.Hour},
		} {
			if _, err := f.ints.Sign(t.Context(), "east", req); !errors.Is(err, app.ErrInvalidArgument) {
				t.Errorf("Sign(%+v): %v, want ErrInvalidArgument", req, err)
			}
		}
	})
}

func TestIntermediatesRSARoot(t *testing.T) {
	f := newIntermediateFixture(t, nil, sharedVM(domain.RootSource{KeyAlgorithm: domain.KeyRSA4096}))
	out, err := f.ints.Sign(t.Context(), "east", app.IntermediateRequest{VirtualMesh: vmRef, Mesh: meshRef, CSRPEM: intermediateCSR(t)})
	if err != nil {
		t.Fatal(err)
	}
	roots, err := pki.ParseCertificates(out.RootPEM)
	if err != nil {
		t.Fatal(err)
	}
	k, ok := roots[0].PublicKey.(*rsa.PublicKey)
	if !ok || k.N.BitLen() != 4096 || roots[0].SignatureAlgorithm != x509.SHA256WithRSA {
		t.Fatalf("root key %T (%v), signature %v: want RSA 4096", roots[0].PublicKey, ok, roots[0].SignatureAlgorithm)
	}
	if d := roots[0].NotAfter.Sub(f.clock.Now()); d != domain.DefaultRootTTL {
		t.Fatalf("root lives %v, want the default %v", d, domain.DefaultRootTTL)
	}
}
