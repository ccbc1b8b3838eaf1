package domain

import (
	"fmt"
	"maps"
	"regexp"
	"slices"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
)

// Names of the mesh-wide objects a VirtualMesh writes into each member
// mesh's root namespace.
const (
	// GlobalAccessPolicyName names the allow-nothing AuthorizationPolicy
	// that makes a mesh deny by default.
	GlobalAccessPolicyName = "global-access-policy"
	// GlobalMTLSName names the mesh-wide STRICT PeerAuthentication.
	GlobalMTLSName = "global-strict-mtls"
)

// virtualMesh is a VirtualMesh with what translation learns about it.
type virtualMesh struct {
	Key  ObjectKey
	Meta *commonv1.ObjectMeta
	Spec *networkingv1.VirtualMeshSpec
	// Errors found by validation of the spec in force: the VirtualMesh is
	// not translated at all.
	Errors []string
	// lastGood is set when the current version is invalid (rejected says
	// why) and the last valid version, now in Spec, is translated instead.
	lastGood *Kept[*networkingv1.VirtualMeshSpec]
	rejected []string
	// Per mesh ref key ("<name>.<namespace>").
	Meshes map[string]*commonv1.ApprovalStatus
	// The meshes this VirtualMesh holds: valid references, not claimed by a
	// VirtualMesh accepted earlier. Sorted by key.
	Members []*mesh
	// Destinations federated to at least one other mesh.
	federated []ObjectKey
}

func (vm *virtualMesh) globalAccess() bool {
	return vm.Spec.GetGlobalAccessPolicy() == networkingv1.VirtualMeshSpec_ENABLED
}

func (vm *virtualMesh) sharedMTLS() bool {
	return vm.Spec.GetMtlsConfig().GetShared() != nil
}

// virtualMeshes is the outcome of validating every VirtualMesh: which one
// holds each mesh.
type virtualMeshes struct {
	all    []*virtualMesh // in acceptance order
	byMesh map[ObjectKey]*virtualMesh
}

// vmOf returns the VirtualMesh that holds mesh k, or nil.
func (v *virtualMeshes) vmOf(k ObjectKey) *virtualMesh { return v.byMesh[k] }

var dnsLabels = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// ValidateVirtualMesh checks what can be checked of a VirtualMesh without
// looking at the estate.
func ValidateVirtualMesh(spec *networkingv1.VirtualMeshSpec) []string {
	v := &validator{}
	if len(spec.GetMeshes()) == 0 {
		v.add("spec.meshes", "must not be empty")
	}
	seen := map[[2]string]int{}
	for i, ref := range spec.GetMeshes() {
		p := fmt.Sprintf("spec.meshes[%d]", i)
		if ref.GetName() == "" {
			v.add(p+".name", "is required")
		}
		if ref.GetNamespace() == "" {
			v.add(p+".namespace", "is required")
		}
		k := [2]string{ref.GetNamespace(), ref.GetName()}
		if j, dup := seen[k]; dup {
			v.add(p, "mesh %s.%s is already listed at spec.meshes[%d]", ref.GetName(), ref.GetNamespace(), j)
		} else {
			seen[k] = i
		}
	}
	if sh := spec.GetMtlsConfig().GetShared(); sh != nil {
		p := "spec.mtlsConfig.shared"
		v.positiveDuration(p+".intermediateTtl", sh.GetIntermediateTtl())
		ca := sh.GetRootCertificateAuthority()
		v.positiveDuration(p+".rootCertificateAuthority.generated.ttl", ca.GetGenerated().GetTtl())
		if s := ca.GetSecret(); s != nil && s.GetName() == "" {
			v.add(p+".rootCertificateAuthority.secret.name", "is required")
		}
	}
	if f := spec.GetFederation(); f != nil {
		if f.GetMode() == nil {
			// Not defaulted: permissive would export every service to
			// every mesh unasked, and selective without selectors
			// exports nothing.
			v.add("spec.federation.mode", "one of permissive or selective is required; a federation without a mode would federate nothing (leave spec.federation out for no federation)")
		}
		if s := f.GetHostnameSuffix(); s != "" && (!dnsLabels.MatchString(s) || len(s) > 253) {
			v.add("spec.federation.hostnameSuffix", "%q is not a DNS name", s)
		}
		for i, sel := range f.GetSelective().GetSelectors() {
			for j, ds := range sel.GetDestinationSelectors() {
				for k, ref := range ds.GetKubeServiceRefs().GetServices() {
					if ref.GetName() == "" {
						v.add(fmt.Sprintf("spec.federation.selective.selectors[%d].destinationSelectors[%d].kubeServiceRefs.services[%d].name", i, j, k), "is required")
					}
				}
			}
			for j, ref := range sel.GetMeshes() {
				if _, ok := seen[[2]string{ref.GetNamespace(), ref.GetName()}]; !ok {
					v.add(fmt.Sprintf("spec.federation.selective.selectors[%d].meshes[%d]", i, j), "mesh %s.%s is not a mesh of this VirtualMesh", ref.GetName(), ref.GetNamespace())
				}
			}
		}
	}
	if g := spec.GetGlobalAccessPolicy(); networkingv1.VirtualMeshSpec_GlobalAccessPolicy_name[int32(g)] == "" {
		v.add("spec.globalAccessPolicy", "unknown value %d", g)
	}
	return v.errs
}

// applyVirtualMeshes validates the VirtualMeshes in acceptance order and
// gives each mesh to the first valid one that claims it. A VirtualMesh
// whose current version is invalid, or names a mesh it cannot hold, keeps
// its last valid version in kept in force; one that never was valid (no
// last valid version) claims nothing and writes nothing.
func applyVirtualMeshes(ix *Index, vms []collected[*networkingv1.VirtualMesh], kept map[ObjectKey]Kept[*networkingv1.VirtualMeshSpec]) *virtualMeshes {
	out := &virtualMeshes{byMesh: map[ObjectKey]*virtualMesh{}}
	claims := map[ObjectKey]uint32{}
	for _, c := range vms {
		vm := &virtualMesh{Key: c.Key, Meta: c.Res.GetMetadata(), Spec: c.Res.GetSpec()}
		if vm.Spec == nil {
			vm.Spec = &networkingv1.VirtualMeshSpec{}
		}
		out.all = append(out.all, vm)
		errs := validateVersion(vm.Meta, vm.Spec, ValidateVirtualMesh)
		var meshes map[string]*commonv1.ApprovalStatus
		var members []*mesh
		if len(errs) == 0 {
			meshes, members = out.claim(ix, vm.Key.Cluster, vm.Spec, claims)
			errs = meshErrors(meshes)
		}
		if good, ok := lastOf(kept, vm.Key, vm.Meta); ok && len(errs) > 0 {
			// The last valid version stays in force, and stays the one
			// kept, even when some of its meshes do not resolve now (the
			// input of the cluster that holds them is missing, as after a
			// restart with that cluster down): the meshes that resolve stay
			// in it, the others come back with their cluster. Dropping it
			// instead would lose it for good once that cluster reports.
			gm, gmembers := out.claim(ix, vm.Key.Cluster, good.Spec, claims)
			vm.lastGood, vm.rejected, vm.Spec = &good, errs, good.Spec
			meshes, members = gm, gmembers
		}
		if vm.lastGood == nil && len(errs) > 0 {
			// Never valid: it claims no mesh and writes nothing, so a
			// valid VirtualMesh for the same meshes is accepted. Its
			// status lists the references that failed.
			vm.Errors, vm.Meshes = errs, failedRefs(meshes)
			continue
		}
		vm.Meshes, vm.Members = meshes, members
		for _, m := range members {
			claims[m.Key]++
			out.byMesh[m.Key] = vm
		}
	}
	return out
}

// goodVersion is the version to keep as the last valid one, if any.
func (vm *virtualMesh) goodVersion() (Kept[*networkingv1.VirtualMeshSpec], bool) {
	if vm.lastGood != nil {
		return *vm.lastGood, true
	}
	valid := len(vm.Errors) == 0 && len(meshErrors(vm.Meshes)) == 0
	return keptOf(vm.Meta, vm.Spec), valid
}

// claim resolves the meshes spec names against the estate and the
// VirtualMeshes accepted before it, without taking them: it returns the
// status of each reference and the meshes the VirtualMesh would hold,
// sorted by key.
//
// A mesh outside the scope of cluster source, whose input carried the
// VirtualMesh, is not taken; its status says so, but does not count as an
// error of the spec (meshErrors).
func (out *virtualMeshes) claim(ix *Index, source string, spec *networkingv1.VirtualMeshSpec, claims map[ObjectKey]uint32) (map[string]*commonv1.ApprovalStatus, []*mesh) {
	meshes := map[string]*commonv1.ApprovalStatus{}
	var members []*mesh
	for i, ref := range spec.GetMeshes() {
		key := ref.GetName() + "." + ref.GetNamespace()
		as := &commonv1.ApprovalStatus{}
		meshes[key] = as
		found := ix.meshesByRef[[2]string{ref.GetNamespace(), ref.GetName()}]
		switch {
		case len(found) == 0:
			as.State = commonv1.ApprovalState_INVALID
			as.Errors = []string{fmt.Sprintf("spec.meshes[%d]: mesh %s not found in any cluster", i, key)}
			continue
		case len(found) > 1:
			var clusters []string
			for _, m := range found {
				clusters = append(clusters, m.Key.Cluster)
			}
			as.State = commonv1.ApprovalState_INVALID
			as.Errors = []string{fmt.Sprintf("spec.meshes[%d]: mesh %s is reported by several clusters %v; it cannot be told apart", i, key, clusters)}
			continue
		}
		m := found[0]
		if !ix.scope.allows(source, m.Key.Cluster, m.Namespace) {
			as.State = commonv1.ApprovalState_INVALID
			as.Errors = []string{ix.scope.outOfScope(fmt.Sprintf("spec.meshes[%d]", i), "mesh "+key, source, m.Key.Cluster, m.Namespace)}
			as.Warnings = []string{scopeWarning}
			continue
		}
		as.AcceptanceOrder = claims[m.Key]
		if owner := out.byMesh[m.Key]; owner != nil {
			as.State = commonv1.ApprovalState_INVALID
			as.Errors = []string{fmt.Sprintf("spec.meshes[%d]: mesh %s already belongs to VirtualMesh %s, accepted earlier; a mesh belongs to at most one VirtualMesh", i, key, owner.Key)}
			continue
		}
		as.State = commonv1.ApprovalState_ACCEPTED
		members = append(members, m)
	}
	slices.SortFunc(members, func(a, b *mesh) int { return a.Key.compare(b.Key) })
	return meshes, members
}

// failedRefs are the statuses of the mesh references that did not
// resolve, or were outside the scope; nil when there are none.
func failedRefs(meshes map[string]*commonv1.ApprovalStatus) map[string]*commonv1.ApprovalStatus {
	var out map[string]*commonv1.ApprovalStatus
	for key, as := range meshes {
		if as.GetState() == commonv1.ApprovalState_INVALID {
			if out == nil {
				out = map[string]*commonv1.ApprovalStatus{}
			}
			out[key] = as
		}
	}
	return out
}

// meshErrors are the errors of the mesh references that did not resolve,
// in field order.
func meshErrors(meshes map[string]*commonv1.ApprovalStatus) []string {
	var errs []string
	for _, key := range slices.Sorted(maps.Keys(meshes)) {
		if as := meshes[key]; as.State == commonv1.ApprovalState_INVALID && !outOfScope(as) {
			errs = append(errs, as.Errors...)
		}
	}
	return errs
}

// scopeErrors are the errors of the mesh references outside the scope.
func scopeErrors(meshes map[string]*commonv1.ApprovalStatus) []string {
	var errs []string
	for _, key := range slices.Sorted(maps.Keys(meshes)) {
		if as := meshes[key]; outOfScope(as) {
			errs = append(errs, as.Errors...)
		}
	}
	return errs
}

// emitMeshWide adds the mesh-wide objects of every VirtualMesh: in each
// member mesh's root namespace, the deny-by-default AuthorizationPolicy and
// allow policies for its gateways when global access is ENABLED, and a
// STRICT PeerAuthentication when the meshes share a root of trust.
//
// A TrafficPolicy that sets tlsMode DISABLE for a destination in such a mesh
// only changes clients (its DestinationRule); no PERMISSIVE
// PeerAuthentication is written for the destination, because relaxing a
// server's mTLS is a security decision that a client-side routing policy
// should not make. The destination's status warns instead.
func emitMeshWide(e *emitter, vms *virtualMeshes) {
	for _, vm := range vms.all {
		if len(vm.Errors) > 0 {
			continue
		}
		vmParent := ParentRef{Kind: parentKindVirtualMesh, Name: vm.Key.Name, Namespace: vm.Key.Namespace, Cluster: vm.Key.Cluster}
		for _, m := range vm.Members {
			parents := []ParentRef{vmParent, {Kind: parentKindMesh, Name: m.Key.Name, Namespace: m.Key.Namespace, Cluster: m.Key.Cluster}}
			if vm.globalAccess() {
				e.add(SecurityV1, KindAuthorizationPolicy, ObjectKey{Cluster: m.Key.Cluster, Namespace: m.Namespace, Name: GlobalAccessPolicyName}, parents, &securityv1beta1.AuthorizationPolicy{})
				for _, g := range slices.Concat(m.Ingress, m.EastWest) {
					if len(g.GetWorkloadLabels()) == 0 {
						continue // it would select every workload of the namespace
					}
					ns := g.GetService().GetNamespace()
					if ns == "" {
						ns = m.Namespace
					}
					name := g.GetService().GetName()
					if name == "" {
						name = SubsetName(g.GetWorkloadLabels())
					}
					e.add(SecurityV1, KindAuthorizationPolicy, ObjectKey{Cluster: m.Key.Cluster, Namespace: ns, Name: GlobalAccessPolicyName + "-" + name}, parents,
						&securityv1beta1.AuthorizationPolicy{
							Selector: &typev1beta1.WorkloadSelector{MatchLabels: maps.Clone(g.GetWorkloadLabels())},
							Action:   securityv1beta1.AuthorizationPolicy_ALLOW,
							Rules:    []*securityv1beta1.Rule{{}},
						})
				}
			}
			if vm.sharedMTLS() {
				e.add(SecurityV1, KindPeerAuthentication, ObjectKey{Cluster: m.Key.Cluster, Namespace: m.Namespace, Name: GlobalMTLSName}, parents,
					&securityv1beta1.PeerAuthentication{Mtls: &securityv1beta1.PeerAuthentication_MutualTLS{Mode: securityv1beta1.PeerAuthentication_MutualTLS_STRICT}})
			}
		}
	}
}

// virtualMeshStatus is the status written back to a VirtualMesh.
func virtualMeshStatus(enc encode.Encoder, vm *virtualMesh) (*snapshotv1.ResourceStatus, error) {
	s := &networkingv1.VirtualMeshStatus{
		ObservedGeneration: vm.Meta.GetGeneration(),
		State:              commonv1.ApprovalState_ACCEPTED,
		Errors:             slices.Clone(vm.Errors),
	}
	if len(vm.Meshes) > 0 {
		s.Meshes = vm.Meshes
	}
	s.Destinations = vm.federatedDestinations()
	if vm.lastGood != nil {
		// The errors of the current version; the meshes are the last valid
		// version's.
		s.Errors = append(slices.Clone(vm.rejected), lastGoodMessage(vm.lastGood.Generation))
		s.LastKnownGood = true
	} else if len(vm.Errors) == 0 {
		// Each error starts with the field path that names the mesh. (A
		// VirtualMesh that never was valid has them in vm.Errors.)
		s.Errors = append(s.Errors, meshErrors(vm.Meshes)...)
	}
	s.Errors = append(s.Errors, scopeErrors(vm.Meshes)...)
	if len(s.Errors) > 0 {
		s.State = commonv1.ApprovalState_INVALID
	}
	return resourceStatus(enc, NetworkingV1, KindVirtualMesh, vm.Key, vm.Meta.GetGeneration(), s)
}
