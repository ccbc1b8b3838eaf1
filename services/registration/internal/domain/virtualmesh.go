package domain

import (
	"cmp"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
)

// Errors of SignIntermediate. ErrIntermediateDenied means the caller may
// not have this intermediate at all; ErrIntermediatePrecondition means the
// VirtualMesh is not (yet) in a state that allows one.
var (
	ErrIntermediateDenied       = errors.New("intermediate CA refused")
	ErrIntermediatePrecondition = errors.New("intermediate CA cannot be signed")
)

// Lifetimes of VirtualMesh CAs when the VirtualMesh does not set them.
const (
	DefaultRootTTL         = 365 * 24 * time.Hour
	DefaultIntermediateTTL = 365 * 24 * time.Hour
	// IstioDefaultTrustDomain is Istio's trust domain when the mesh config
	// names none.
	IstioDefaultTrustDomain = "cluster.local"
)

// ObjectRef names a namespaced object.
type ObjectRef struct {
	Name      string
	Namespace string
}

// String is "<name>.<namespace>", as VirtualMesh statuses name meshes.
func (r ObjectRef) String() string { return r.Name + "." + r.Namespace }

// TrustModel is a VirtualMesh's mtls_config.
type TrustModel int

const (
	// TrustNone: no mtls_config; the meshes keep their own CAs.
	TrustNone TrustModel = iota
	// TrustShared: one root signs an intermediate per mesh.
	TrustShared
	// TrustLimited: the meshes keep their own CAs.
	TrustLimited
)

func (m TrustModel) String() string {
	switch m {
	case TrustShared:
		return "shared"
	case TrustLimited:
		return "limited"
	default:
		return "none"
	}
}

// RootSourceKind says where a VirtualMesh's root comes from.
type RootSourceKind int

const (
	// RootGenerated: Meshplane makes the root on first use and keeps it.
	RootGenerated RootSourceKind = iota
	// RootSecret: the user's Secret in the management cluster holds it.
	RootSecret
)

// KeyAlgorithm is the key type of a generated root.
type KeyAlgorithm int

const (
	KeyECDSAP256 KeyAlgorithm = iota
	KeyRSA4096
)

func (a KeyAlgorithm) String() string {
	if a == KeyRSA4096 {
		return "RSA_4096"
	}
	return "ECDSA_P256"
}

// RootSource is a VirtualMesh's root_certificate_authority.
type RootSource struct {
	Kind RootSourceKind
	// TTL and KeyAlgorithm of a generated root; zero TTL means
	// DefaultRootTTL.
	TTL          time.Duration
	KeyAlgorithm KeyAlgorithm
	// Secret names the user's Secret (keys root-cert.pem and key.pem). An
	// empty namespace means the VirtualMesh's.
	Secret ObjectRef
}

// VirtualMesh is what SignIntermediate needs of a VirtualMesh.
type VirtualMesh struct {
	Ref ObjectRef
	// Cluster is the cluster whose input snapshot holds the VirtualMesh.
	Cluster         string
	CreatedAt       time.Time
	Meshes          []ObjectRef
	Trust           TrustModel
	Root            RootSource
	IntermediateTTL time.Duration
}

// Mesh is what SignIntermediate needs of a discovered mesh.
type Mesh struct {
	Ref ObjectRef
	// Cluster is the cluster whose agent discovered the mesh.
	Cluster     string
	TrustDomain string
}

// RootKey names a generated root in a RootStore. It changes when the root's
// configuration changes, so that a new TTL or key algorithm makes a new
// root (a rotation) instead of reusing the old one.
func (vm VirtualMesh) RootKey() string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d\x00%d", vm.Ref.Namespace, vm.Ref.Name, vm.Root.TTL, vm.Root.KeyAlgorithm))
	return "vm-" + hex.EncodeToString(h[:10])
}

// RootTTL is the lifetime of a generated root.
func (vm VirtualMesh) RootTTL() time.Duration {
	if vm.Root.TTL > 0 {
		return vm.Root.TTL
	}
	return DefaultRootTTL
}

// SecretRef is the user's root Secret, in the VirtualMesh's namespace when
// the reference names none.
func (vm VirtualMesh) SecretRef() ObjectRef {
	ref := vm.Root.Secret
	if ref.Namespace == "" {
		ref.Namespace = vm.Ref.Namespace
	}
	return ref
}

// AuthorizeIntermediate decides whether cluster may have an intermediate
// CA for mesh, signed by the root of the VirtualMesh vm. vms are every
// VirtualMesh named vm (one per cluster that holds one) and meshes every
// mesh named mesh, in any cluster. The mesh must be discovered in the
// caller's own cluster and listed by a VirtualMesh with shared trust.
func AuthorizeIntermediate(cluster string, vm, mesh ObjectRef, vms []VirtualMesh, meshes []Mesh) (VirtualMesh, Mesh, error) {
	var found Mesh
	var elsewhere []string
	ok := false
	for _, m := range meshes {
		if m.Ref != mesh {
			continue
		}
		if m.Cluster == cluster {
			found, ok = m, true
		} else {
			elsewhere = append(elsewhere, m.Cluster)
		}
	}
	if !ok {
		if len(elsewhere) > 0 {
			slices.Sort(elsewhere)
			return VirtualMesh{}, Mesh{}, fmt.Errorf("%w: mesh %s is discovered in cluster %s, not in cluster %s: a cluster may ask only for its own meshes",
				ErrIntermediateDenied, mesh, strings.Join(elsewhere, ", "), cluster)
		}
		return VirtualMesh{}, Mesh{}, fmt.Errorf("%w: mesh %s is not discovered in cluster %s", ErrIntermediateDenied, mesh, cluster)
	}
	if found.TrustDomain == "" {
		found.TrustDomain = IstioDefaultTrustDomain
	}
	if err := pki.ValidateTrustDomain(found.TrustDomain); err != nil {
		return VirtualMesh{}, Mesh{}, fmt.Errorf("%w: mesh %s has trust domain %q: %w", ErrIntermediatePrecondition, mesh, found.TrustDomain, err)
	}

	var cands []VirtualMesh
	for _, v := range vms {
		if v.Ref == vm {
			cands = append(cands, v)
		}
	}
	if len(cands) == 0 {
		return VirtualMesh{}, Mesh{}, fmt.Errorf("%w: VirtualMesh %s is not found in any cluster", ErrIntermediatePrecondition, vm)
	}
	// The same VirtualMesh applied in several clusters: translation accepts
	// the oldest, then the first cluster by name.
	v := slices.MinFunc(cands, func(a, b VirtualMesh) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.Cluster, b.Cluster))
	})
	if !slices.Contains(v.Meshes, mesh) {
		return VirtualMesh{}, Mesh{}, fmt.Errorf("%w: VirtualMesh %s does not list mesh %s in spec.meshes", ErrIntermediateDenied, vm, mesh)
	}
	if v.Trust != TrustShared {
		return VirtualMesh{}, Mesh{}, fmt.Errorf("%w: VirtualMesh %s has %s trust, not shared: its meshes keep their own CAs", ErrIntermediatePrecondition, vm, v.Trust)
	}
	return v, found, nil
}

// IntermediateTTL is the lifetime to sign for: the request's, else the
// VirtualMesh's intermediate_ttl, else def. The root's end caps it when
// signing.
func IntermediateTTL(requested time.Duration, vm VirtualMesh, def time.Duration) time.Duration {
	switch {
	case requested > 0:
		return requested
	case vm.IntermediateTTL > 0:
		return vm.IntermediateTTL
	default:
		return def
	}
}

// ValidateIntermediateCSR checks the key of an intermediate's request:
// ECDSA P-256/P-384 or RSA of at least 2048 bits, the keys istiod signs
// with. The request's names and extensions are ignored, because the
// intermediate takes none of them. The signature is checked by
// pki.ParseCSR.
func ValidateIntermediateCSR(csr *x509.CertificateRequest) error {
	switch k := csr.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return fmt.Errorf("%w: ECDSA curve %s is not allowed; use P-256 or P-384", ErrInvalidCSR, k.Curve.Params().Name)
		}
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return fmt.Errorf("%w: RSA key of %d bits is too weak; use at least 2048", ErrInvalidCSR, k.N.BitLen())
		}
	default:
		return fmt.Errorf("%w: key type %T is not allowed for an Istio CA; use ECDSA or RSA", ErrInvalidCSR, csr.PublicKey)
	}
	return nil
}

// RootCA is a VirtualMesh's root and its key.
type RootCA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// PublicKey is a public key that compares with another: every key type of
// the standard library is one (see crypto.PublicKey).
type PublicKey interface {
	Equal(crypto.PublicKey) bool
}

// Check says whether the root can sign intermediates at now.
func (r RootCA) Check(now time.Time) error {
	if r.Cert == nil || r.Key == nil {
		return errors.New("root certificate or key missing")
	}
	if !r.Cert.IsCA || r.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return errors.New("root certificate is not a CA that may sign certificates")
	}
	pub, ok := r.Cert.PublicKey.(PublicKey)
	if !ok || !pub.Equal(r.Key.Public()) {
		return errors.New("root key does not match the root certificate")
	}
	if !now.Before(r.Cert.NotAfter) {
		return fmt.Errorf("root expired at %s", r.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// IntermediateSpec is everything an intermediate CA certificate says. It
// follows Istio's plug-in CA ("cacerts"): CA:true with path length 0 (istiod
// signs only workload leaves), cert-sign, CRL-sign and digital-signature
// key usages, subject O=<trust domain>, and, per the SPIFFE X.509-SVID
// rules for signing certificates, one URI SAN naming the trust domain with
// no path.
type IntermediateSpec struct {
	Organization string
	CommonName   string
	URI          *url.URL
	NotBefore    time.Time
	NotAfter     time.Time
}

// NewIntermediateSpec builds the intermediate of mesh in cluster, valid
// from a minute before now for ttl, never past the root.
func NewIntermediateSpec(cluster string, mesh Mesh, root *x509.Certificate, ttl time.Duration, now time.Time) (IntermediateSpec, error) {
	if ttl <= 0 {
		return IntermediateSpec{}, errors.New("intermediate lifetime must be positive")
	}
	notAfter := now.Add(ttl)
	if notAfter.After(root.NotAfter) {
		notAfter = root.NotAfter
	}
	return IntermediateSpec{
		Organization: mesh.TrustDomain,
		CommonName:   mesh.Ref.String() + "." + cluster,
		URI:          &url.URL{Scheme: "spiffe", Host: mesh.TrustDomain},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
	}, nil
}
