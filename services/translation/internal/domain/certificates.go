package domain

import (
	"crypto/sha256"
	"encoding/hex"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/proto"
)

// CACertsSecretName is the Secret istiod reads its plug-in CA from, in its
// own namespace.
const CACertsSecretName = "cacerts"

// RootGenerationPrefix starts every root_generation value.
const RootGenerationPrefix = "root-sha256:"

// emitIssuedCertificates asks, in the output of each member mesh's cluster,
// for an Istio intermediate CA signed by the VirtualMesh's root: one per
// mesh of every valid VirtualMesh with shared trust. A mesh is a member only
// when its entry is ACCEPTED (found in exactly one cluster, and not claimed
// by a VirtualMesh accepted earlier), the same rule as the mesh-wide STRICT
// PeerAuthentication, so that a mesh never enforces mTLS across meshes
// without the shared root that makes it work.
//
// Istio revisions installed in one namespace read one "cacerts" Secret, so
// there is one IssuedCertificate per Secret: the first mesh that asks for it
// (VirtualMeshes in acceptance order, their members by key) gets it. Outputs
// are sorted later, by SealOutput.
func emitIssuedCertificates(outputs map[string]*snapshotv1.OutputSnapshot, vms *virtualMeshes) {
	secrets := map[ObjectKey]bool{}
	for _, vm := range vms.all {
		if len(vm.Errors) > 0 || !vm.sharedMTLS() {
			continue
		}
		shared := vm.Spec.GetMtlsConfig().GetShared()
		gen := RootGeneration(vm.Key.Namespace, vm.Key.Name, shared.GetRootCertificateAuthority())
		for _, m := range vm.Members {
			out, ok := outputs[m.Key.Cluster]
			secret := ObjectKey{Cluster: m.Key.Cluster, Namespace: m.Namespace, Name: CACertsSecretName}
			if !ok || secrets[secret] {
				continue
			}
			secrets[secret] = true
			ic := &snapshotv1.IssuedCertificate{
				VirtualMesh:     &commonv1.ObjectRef{Name: vm.Key.Name, Namespace: vm.Key.Namespace},
				Mesh:            &commonv1.ObjectRef{Name: m.Key.Name, Namespace: m.Key.Namespace},
				TrustDomain:     m.TrustDomain,
				SecretNamespace: m.Namespace,
				SecretName:      CACertsSecretName,
				KeyAlgorithm:    shared.GetRootCertificateAuthority().GetGenerated().GetKeyAlgorithm(),
				RootGeneration:  gen,
				AutoRestartPods: vm.Spec.GetMtlsConfig().GetAutoRestartPods(),
			}
			if ttl := shared.GetIntermediateTtl(); ttl != nil {
				ic.Ttl = proto.CloneOf(ttl)
			}
			out.IssuedCertificates = append(out.IssuedCertificates, ic)
		}
	}
}

// RootGeneration is a stable hash of which root signs a VirtualMesh's
// intermediates: the VirtualMesh's namespace and name (registration keeps
// one root per VirtualMesh) and its root CA configuration. A change of
// either (another VirtualMesh, a generated root turned into a user-supplied
// one, another key algorithm) changes it, and the agents then ask for new
// intermediates at once. An absent configuration means a generated root
// with the defaults, so it hashes like an empty Generated.
func RootGeneration(vmNamespace, vmName string, ca *networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority) string {
	if ca.GetCaSource() == nil {
		ca = &networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority{
			CaSource: &networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_{
				Generated: &networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated{},
			},
		}
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(ca)
	if err != nil {
		// A valid in-memory message always marshals; hash the error so that
		// the value stays distinct from every real one.
		raw = []byte("marshal error: " + err.Error())
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(vmNamespace), []byte(vmName), raw} {
		// Length-prefixed, so that ("ab", "c") and ("a", "bc") differ.
		h.Write([]byte{byte(len(part) >> 24), byte(len(part) >> 16), byte(len(part) >> 8), byte(len(part))})
		h.Write(part)
	}
	return RootGenerationPrefix + hex.EncodeToString(h.Sum(nil)[:16])
}
