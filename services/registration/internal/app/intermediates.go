package app

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// VirtualMeshes reads the VirtualMeshes and the discovered meshes of every
// cluster's input snapshot (the management cluster's included).
type VirtualMeshes interface {
	// Lookup returns every VirtualMesh named vm and every mesh named mesh,
	// in any cluster.
	Lookup(ctx context.Context, vm, mesh domain.ObjectRef) ([]domain.VirtualMesh, []domain.Mesh, error)
}

// RootStore keeps the roots that Meshplane generates for VirtualMeshes.
type RootStore interface {
	// LoadOrCreateRoot returns the root kept under key. When there is none,
	// it stores the one create makes, unless another caller (another
	// replica) stored one first, in which case it returns that one: every
	// caller ends with the same root. created says this call stored it.
	LoadOrCreateRoot(ctx context.Context, key string, create func() (domain.RootCA, error)) (root domain.RootCA, created bool, err error)
}

// UserRoots reads the roots that users supply for VirtualMeshes.
type UserRoots interface {
	// UserRoot returns the root in the Secret ref, or ErrNotFound.
	UserRoot(ctx context.Context, ref domain.ObjectRef) (domain.RootCA, error)
}

// IntermediateCA makes VirtualMesh roots and signs intermediates with them.
type IntermediateCA interface {
	// NewRoot makes a self-signed root for vm, of its key algorithm and
	// lifetime.
	NewRoot(vm domain.VirtualMesh, now time.Time) (domain.RootCA, error)
	// SignIntermediate signs csr's public key with root; every other field
	// comes from spec.
	SignIntermediate(root domain.RootCA, csr *x509.CertificateRequest, spec domain.IntermediateSpec) (*x509.Certificate, error)
}

// IntermediateDeps are the ports SignIntermediate uses. VirtualMeshes nil
// means no input store is configured; UserRoots nil means no Kubernetes
// client: both are refused with a clear error when they are needed.
type IntermediateDeps struct {
	Clusters      ClusterStore
	VirtualMeshes VirtualMeshes
	Roots         RootStore
	UserRoots     UserRoots
	CA            IntermediateCA
}

// IntermediateOptions are SignIntermediate's settings.
type IntermediateOptions struct {
	// DefaultTTL is the intermediate's lifetime when neither the request
	// nor the VirtualMesh sets one.
	DefaultTTL time.Duration
	Log        *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Intermediates signs Istio intermediate CAs for the meshes of VirtualMeshes
// with shared trust.
type Intermediates struct {
	deps IntermediateDeps
	ttl  time.Duration
	log  *slog.Logger
	now  func() time.Time
}

// NewIntermediates returns the use case.
func NewIntermediates(deps IntermediateDeps, opts IntermediateOptions) *Intermediates {
	s := &Intermediates{deps: deps, ttl: opts.DefaultTTL, log: opts.Log, now: opts.Now}
	if s.ttl <= 0 {
		s.ttl = domain.DefaultIntermediateTTL
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// IntermediateRequest is what an agent asks for.
type IntermediateRequest struct {
	VirtualMesh domain.ObjectRef
	Mesh        domain.ObjectRef
	CSRPEM      []byte
	// TTL zero means the VirtualMesh's intermediate_ttl or the default.
	TTL time.Duration
}

// IssuedIntermediate is a signed intermediate, in the forms Istio's
// "cacerts" Secret holds.
type IssuedIntermediate struct {
	// CertPEM is ca-cert.pem; ChainPEM (cert-chain.pem) is it followed by
	// the root; RootPEM is root-cert.pem.
	CertPEM   []byte
	ChainPEM  []byte
	RootPEM   []byte
	ExpiresAt time.Time
	Serial    string
}

// Sign signs an intermediate for the caller's cluster, named by its
// verified certificate. Nothing is signed unless the cluster may register,
// the CSR's key is acceptable, the mesh is discovered in the caller's
// cluster and the VirtualMesh lists it with shared trust.
func (s *Intermediates) Sign(ctx context.Context, cluster string, req IntermediateRequest) (IssuedIntermediate, error) {
	out, err := s.sign(ctx, cluster, req)
	if err != nil {
		s.log.WarnContext(ctx, "intermediate CA refused", "cluster", cluster, "virtual_mesh", req.VirtualMesh.String(), "mesh", req.Mesh.String(), "error", err)
		return IssuedIntermediate{}, err
	}
	s.log.InfoContext(ctx, "intermediate CA signed", "cluster", cluster, "virtual_mesh", req.VirtualMesh.String(), "mesh", req.Mesh.String(),
		"serial", out.Serial, "expires", out.ExpiresAt)
	return out, nil
}

func (s *Intermediates) sign(ctx context.Context, cluster string, req IntermediateRequest) (IssuedIntermediate, error) {
	if err := validRef("virtual_mesh", req.VirtualMesh); err != nil {
		return IssuedIntermediate{}, err
	}
	if err := validRef("mesh", req.Mesh); err != nil {
		return IssuedIntermediate{}, err
	}
	if req.TTL < 0 {
		return IssuedIntermediate{}, fmt.Errorf("%w: ttl %s is negative", ErrInvalidArgument, req.TTL)
	}
	csr, err := pki.ParseCSR(req.CSRPEM)
	if err != nil {
		return IssuedIntermediate{}, fmt.Errorf("%w: %w", domain.ErrInvalidCSR, err)
	}
	if err := domain.ValidateIntermediateCSR(csr); err != nil {
		return IssuedIntermediate{}, err
	}
	c, err := s.deps.Clusters.Cluster(ctx, cluster)
	switch {
	case errors.Is(err, ErrNotFound):
		// An in-memory store that restarted: the certificate is the proof.
	case err != nil:
		return IssuedIntermediate{}, fmt.Errorf("look up cluster: %w", err)
	default:
		if err := c.MayRegister(); err != nil {
			return IssuedIntermediate{}, err
		}
	}
	if s.deps.VirtualMeshes == nil {
		return IssuedIntermediate{}, fmt.Errorf("%w: registration reads VirtualMeshes from the input snapshots in Redis, and no store is configured (--redis-addrs)", domain.ErrIntermediatePrecondition)
	}
	vms, meshes, err := s.deps.VirtualMeshes.Lookup(ctx, req.VirtualMesh, req.Mesh)
	if err != nil {
		return IssuedIntermediate{}, fmt.Errorf("read input snapshots: %w", err)
	}
	vm, mesh, err := domain.AuthorizeIntermediate(cluster, req.VirtualMesh, req.Mesh, vms, meshes)
	if err != nil {
		return IssuedIntermediate{}, err
	}
	now := s.now()
	root, err := s.root(ctx, vm, now)
	if err != nil {
		return IssuedIntermediate{}, err
	}
	spec, err := domain.NewIntermediateSpec(cluster, mesh, root.Cert, domain.IntermediateTTL(req.TTL, vm, s.ttl), now)
	if err != nil {
		return IssuedIntermediate{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	cert, err := s.deps.CA.SignIntermediate(root, csr, spec)
	if err != nil {
		return IssuedIntermediate{}, fmt.Errorf("sign intermediate: %w", err)
	}
	return IssuedIntermediate{
		CertPEM:   pki.EncodeCertificates(cert),
		ChainPEM:  pki.EncodeCertificates(cert, root.Cert),
		RootPEM:   pki.EncodeCertificates(root.Cert),
		ExpiresAt: cert.NotAfter,
		Serial:    cert.SerialNumber.String(),
	}, nil
}

// root returns the VirtualMesh's root: the user's Secret, or the generated
// one, made on first use.
func (s *Intermediates) root(ctx context.Context, vm domain.VirtualMesh, now time.Time) (domain.RootCA, error) {
	var root domain.RootCA
	switch vm.Root.Kind {
	case domain.RootSecret:
		ref := vm.SecretRef()
		if s.deps.UserRoots == nil {
			return domain.RootCA{}, fmt.Errorf("%w: VirtualMesh %s takes its root from Secret %s/%s, and registration has no Kubernetes client (--kubeconfig, or run in the management cluster)",
				domain.ErrIntermediatePrecondition, vm.Ref, ref.Namespace, ref.Name)
		}
		var err error
		root, err = s.deps.UserRoots.UserRoot(ctx, ref)
		if errors.Is(err, ErrNotFound) {
			return domain.RootCA{}, fmt.Errorf("%w: VirtualMesh %s: root Secret %s/%s not found in the management cluster", domain.ErrIntermediatePrecondition, vm.Ref, ref.Namespace, ref.Name)
		}
		if err != nil {
			return domain.RootCA{}, fmt.Errorf("%w: VirtualMesh %s: root Secret %s/%s: %w", domain.ErrIntermediatePrecondition, vm.Ref, ref.Namespace, ref.Name, err)
		}
	default:
		if s.deps.Roots == nil {
			return domain.RootCA{}, fmt.Errorf("%w: no store is configured for generated VirtualMesh roots", domain.ErrIntermediatePrecondition)
		}
		r, created, err := s.deps.Roots.LoadOrCreateRoot(ctx, vm.RootKey(), func() (domain.RootCA, error) { return s.deps.CA.NewRoot(vm, now) })
		if err != nil {
			return domain.RootCA{}, fmt.Errorf("VirtualMesh %s root: %w", vm.Ref, err)
		}
		if created {
			s.log.InfoContext(ctx, "VirtualMesh root created", "virtual_mesh", vm.Ref.String(), "key_algorithm", vm.Root.KeyAlgorithm.String(),
				"expires", r.Cert.NotAfter, "root_key", vm.RootKey())
		}
		root = r
	}
	if err := root.Check(now); err != nil {
		return domain.RootCA{}, fmt.Errorf("%w: VirtualMesh %s: %w", domain.ErrIntermediatePrecondition, vm.Ref, err)
	}
	return root, nil
}

// validRef checks a reference before it reaches a store or a message: a
// Kubernetes name and namespace.
func validRef(field string, r domain.ObjectRef) error {
	if r.Name == "" || r.Namespace == "" {
		return fmt.Errorf("%w: %s needs a name and a namespace", ErrInvalidArgument, field)
	}
	if err := validSubdomain(r.Name); err != nil {
		return fmt.Errorf("%w: %s name: %w", ErrInvalidArgument, field, err)
	}
	if err := pki.ValidateName(r.Namespace); err != nil {
		return fmt.Errorf("%w: %s namespace: %w", ErrInvalidArgument, field, err)
	}
	return nil
}

// validSubdomain accepts a DNS-1123 subdomain, what Kubernetes allows in
// object names.
func validSubdomain(s string) error {
	if len(s) > 253 {
		return fmt.Errorf("%d characters is more than 253", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		inner := (c == '-' || c == '.') && i > 0 && i < len(s)-1
		if !alnum && !inner {
			return fmt.Errorf("%q is not a DNS-1123 subdomain", s)
		}
	}
	return nil
}
