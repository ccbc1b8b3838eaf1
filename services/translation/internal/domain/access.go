package domain

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
)

// accessPolicy is an AccessPolicy with what translation learns about it.
type accessPolicy struct {
	Key    ObjectKey
	Meta   *commonv1.ObjectMeta
	Spec   *networkingv1.AccessPolicySpec
	Errors []string
	Status *commonv1.ResourceStatus
	// lastGood is set when the current version failed validation and the
	// last valid version, now in Spec, is translated instead.
	lastGood *LastGoodAccess

	// anyIdentity is set when a source selector matches every identity:
	// the rule has no sources then.
	anyIdentity bool
	// principals and namespaces are the sources that are the same for
	// every destination.
	principals, namespaces []string
	// meshSAs are the service accounts named without a cluster: their
	// identities depend on the destination (trustGroup).
	meshSAs []meshServiceAccount
	// sources holds the rule's sources for each trust group of the
	// destinations, made when first asked for.
	sources map[trustGroup]*groupSources
	// Warnings about the sources, repeated for every destination.
	warnings []string
	// selected are the destinations the spec in force selects, in key
	// order.
	selected []ObjectKey

	src *networkingv1.AccessPolicy
}

// compareAccessAcceptance orders AccessPolicies for acceptance
// (compareOrder).
func compareAccessAcceptance(a, b *accessPolicy) int {
	return compareOrder(a.Meta, a.Key, b.Meta, b.Key)
}

// ValidateAccessPolicy checks what can be checked of an AccessPolicy
// without looking at the estate.
func ValidateAccessPolicy(spec *networkingv1.AccessPolicySpec) []string {
	v := &validator{}
	for i, sel := range spec.GetSourceSelector() {
		for j, ns := range sel.GetKubeIdentityMatcher().GetNamespaces() {
			v.namespace(fmt.Sprintf("spec.sourceSelector[%d].kubeIdentityMatcher.namespaces[%d]", i, j), ns)
		}
		refs := sel.GetKubeServiceAccountRefs()
		if refs == nil {
			continue
		}
		p := fmt.Sprintf("spec.sourceSelector[%d].kubeServiceAccountRefs.serviceAccounts", i)
		if len(refs.GetServiceAccounts()) == 0 {
			// An empty list would otherwise become a source that matches
			// every identity.
			v.add(p, "must not be empty")
		}
		for j, ref := range refs.GetServiceAccounts() {
			if ref.GetName() == "" {
				v.add(fmt.Sprintf("%s[%d].name", p, j), "is required")
			}
		}
	}
	for i, sel := range spec.GetDestinationSelector() {
		for j, ref := range sel.GetKubeServiceRefs().GetServices() {
			if ref.GetName() == "" {
				v.add(fmt.Sprintf("spec.destinationSelector[%d].kubeServiceRefs.services[%d].name", i, j), "is required")
			}
		}
	}
	for i, path := range spec.GetAllowedPaths() {
		p := fmt.Sprintf("spec.allowedPaths[%d]", i)
		switch {
		case path == "":
			v.add(p, "must not be empty")
		case strings.Contains(strings.Trim(path, "*"), "*") || path == "**":
			v.add(p, "%q: a wildcard (*) is only allowed at the start or the end of a path", path)
		case strings.ContainsAny(path, "{}"):
			v.add(p, "%q: braces are not allowed (Istio reads them as a path template)", path)
		}
	}
	for i, m := range spec.GetAllowedMethods() {
		if !httpMethods[m] {
			v.add(fmt.Sprintf("spec.allowedMethods[%d]", i), "%q is not an HTTP method", m)
		}
	}
	for i, port := range spec.GetAllowedPorts() {
		if port == 0 || port > 65535 {
			v.add(fmt.Sprintf("spec.allowedPorts[%d]", i), "must be between 1 and 65535, not %d", port)
		}
	}
	return v.errs
}

// accessTranslation applies valid AccessPolicies to destinations.
type accessTranslation struct {
	ix      *Index
	vms     *virtualMeshes
	applied map[ObjectKey][]*accessPolicy // by destination, in acceptance order
}

func applyAccessPolicies(ix *Index, vms *virtualMeshes, list []collected[*networkingv1.AccessPolicy], lastGood map[ObjectKey]LastGoodAccess) (*accessTranslation, []*accessPolicy) {
	t := &accessTranslation{ix: ix, vms: vms, applied: map[ObjectKey][]*accessPolicy{}}
	policies := make([]*accessPolicy, 0, len(list))
	for _, c := range list {
		p := newAccessPolicy(c.Key, c.Res)
		policies = append(policies, p)
		t.prepare(p, lastGood)
		for _, k := range p.selected {
			t.applied[k] = append(t.applied[k], p)
		}
	}
	for _, d := range ix.destinations {
		t.setStatuses(d)
	}
	return t, policies
}

func newAccessPolicy(key ObjectKey, ap *networkingv1.AccessPolicy) *accessPolicy {
	p := &accessPolicy{Key: key, Meta: ap.GetMetadata(), Spec: ap.GetSpec(), src: ap}
	if p.Spec == nil {
		p.Spec = &networkingv1.AccessPolicySpec{}
	}
	return p
}

// prepare validates a policy, falls back to its last valid version when
// it is invalid, and resolves its sources and destinations.
func (t *accessTranslation) prepare(p *accessPolicy, lastGood map[ObjectKey]LastGoodAccess) {
	p.Status = &commonv1.ResourceStatus{ObservedGeneration: p.Meta.GetGeneration()}
	p.Errors = validateVersion(p.Meta, p.Spec, ValidateAccessPolicy)
	spec, held := inForce(p.Key, p.Meta, p.Spec, p.Errors, lastGood)
	if len(p.Errors) > 0 && held == nil {
		return
	}
	// An invalid edit is reported; the last valid version stays in force.
	p.lastGood, p.Spec = held, spec
	p.Status.Warnings = t.ix.missingServiceRefs(p.Spec.GetDestinationSelector(), p.Key)
	workloads := t.resolveSources(p)
	for _, d := range t.ix.selectDestinations(p.Spec.GetDestinationSelector(), p.Key) {
		if !t.ix.scope.allows(p.Key.Cluster, d.Key.Cluster, d.Key.Namespace) {
			// Not applied there; its status says why.
			if p.Status.Destinations == nil {
				p.Status.Destinations = map[string]*commonv1.ApprovalStatus{}
			}
			p.Status.Destinations[d.Key.String()] = &commonv1.ApprovalStatus{
				State:    commonv1.ApprovalState_INVALID,
				Errors:   []string{t.ix.scope.outOfScope("spec.destinationSelector", "destination "+d.Key.String(), p.Key.Cluster, d.Key.Cluster, d.Key.Namespace)},
				Warnings: []string{scopeWarning},
			}
			continue
		}
		p.selected = append(p.selected, d.Key)
		workloads = append(workloads, t.groupSources(p, d).workloads...)
	}
	slices.SortFunc(workloads, func(a, b *workload) int { return a.Key.compare(b.Key) })
	for _, w := range slices.Compact(workloads) {
		p.Status.Workloads = append(p.Status.Workloads, &commonv1.ClusterObjectRef{Name: w.Key.Name, Namespace: w.Key.Namespace, Cluster: w.Key.Cluster})
	}
}

// setStatuses writes the status of every policy applied to d for d.
func (t *accessTranslation) setStatuses(d *destination) {
	for i, p := range t.applied[d.Key] {
		if p.Status.Destinations == nil {
			p.Status.Destinations = map[string]*commonv1.ApprovalStatus{}
		}
		as := &commonv1.ApprovalStatus{AcceptanceOrder: uint32(i), State: commonv1.ApprovalState_ACCEPTED, Warnings: slices.Concat(p.warnings, t.groupSources(p, d).warnings)}
		if w := t.inactiveReason(d); w != "" {
			as.Warnings = append(as.Warnings, w)
		}
		p.Status.Destinations[d.Key.String()] = as
	}
}

// inactiveReason says why AccessPolicies have no effect on d, or "" when
// they do. As in Gloo Mesh, they take effect only in the meshes of a
// VirtualMesh with global access ENABLED: elsewhere everything is allowed,
// and an ALLOW policy would deny whatever it does not name.
func (t *accessTranslation) inactiveReason(d *destination) string {
	m, ok := t.ix.meshByKey[d.Mesh]
	if !ok {
		return "the mesh of this destination is not known, so no AuthorizationPolicy is written for it"
	}
	vm := t.vms.vmOf(m.Key)
	switch {
	case vm == nil:
		return fmt.Sprintf("mesh %s is in no VirtualMesh; AccessPolicies take effect only where a VirtualMesh's globalAccessPolicy is ENABLED, so nothing is written for this destination", m.RefKey())
	case !vm.globalAccess():
		return fmt.Sprintf("VirtualMesh %s of mesh %s does not enable globalAccessPolicy; AccessPolicies take effect only where it is ENABLED, so nothing is written for this destination", vm.Key, m.RefKey())
	case len(d.Selector) == 0:
		return "the service has no pod selector, so no AuthorizationPolicy can select its workloads"
	}
	return ""
}

// resolveSources turns the policy's identity selectors into the sources
// that are the same for every destination, and returns the workloads they
// select. Selectors are ORed, so principals and namespaces go into separate
// sources (fields of one source are ANDed).
//
// A service account named with a cluster has identities in the trust
// domains of the meshes that run it there (the cluster's, when none does
// yet). One named without a cluster is the service account of that name
// in every mesh of the destination's VirtualMesh: see groupSources.
func (t *accessTranslation) resolveSources(p *accessPolicy) []*workload {
	p.anyIdentity, p.principals, p.namespaces, p.meshSAs, p.sources, p.warnings = false, nil, nil, nil, nil, nil
	var workloads []*workload
	for i, sel := range p.Spec.GetSourceSelector() {
		switch {
		case sel.GetKubeServiceAccountRefs() != nil:
			for j, ref := range sel.GetKubeServiceAccountRefs().GetServiceAccounts() {
				path := fmt.Sprintf("spec.sourceSelector[%d].kubeServiceAccountRefs.serviceAccounts[%d]", i, j)
				sa := resolveRef(ref, p.Key)
				if ref.GetCluster() == "" {
					p.meshSAs = append(p.meshSAs, meshServiceAccount{path: path, namespace: sa.Namespace, name: sa.Name})
					continue
				}
				tds, known := t.ix.serviceAccountTrustDomains(sa)
				if !known {
					p.warnings = append(p.warnings, fmt.Sprintf("%s: no discovered workload in cluster %q runs as service account %s/%s", path, sa.Cluster, sa.Namespace, sa.Name))
				}
				for _, td := range tds {
					p.principals = append(p.principals, td+"/ns/"+sa.Namespace+"/sa/"+sa.Name)
				}
				workloads = append(workloads, t.ix.workloadsBySA[sa]...)
			}
		case sel.GetKubeIdentityMatcher() != nil:
			m := sel.GetKubeIdentityMatcher()
			switch {
			case len(m.GetClusters()) > 0:
				for _, c := range uniqueSorted(m.GetClusters()) {
					if len(t.ix.meshesByCluster[c]) == 0 {
						p.warnings = append(p.warnings, fmt.Sprintf("spec.sourceSelector[%d].kubeIdentityMatcher.clusters: no mesh is known in cluster %q; its trust domain is taken to be %s", i, c, DefaultTrustDomain))
					}
					for _, td := range t.ix.clusterTrustDomains(c) {
						if len(m.GetNamespaces()) == 0 {
							p.principals = append(p.principals, td+"/*")
						}
						for _, ns := range uniqueSorted(m.GetNamespaces()) {
							p.principals = append(p.principals, td+"/ns/"+ns+"/sa/*")
						}
					}
				}
			case len(m.GetNamespaces()) > 0:
				p.namespaces = append(p.namespaces, m.GetNamespaces()...)
			default:
				return t.everyIdentity(p)
			}
			workloads = append(workloads, t.ix.workloadsIn(m.GetClusters(), m.GetNamespaces())...)
		default:
			// An empty selector matches every identity.
			return t.everyIdentity(p)
		}
	}
	p.principals, p.namespaces = uniqueSorted(p.principals), uniqueSorted(p.namespaces)
	return workloads
}

// everyIdentity makes the policy's rule allow every identity, as a
// selector that matches any does.
func (t *accessTranslation) everyIdentity(p *accessPolicy) []*workload {
	p.anyIdentity, p.principals, p.namespaces, p.meshSAs = true, nil, nil, nil
	return nil
}

// meshServiceAccount is a service account an AccessPolicy names without a
// cluster, at path.
type meshServiceAccount struct {
	path, namespace, name string
}

// trustGroup is the set of meshes whose identities a service account
// named without a cluster stands for, for one destination: the members
// of the destination's VirtualMesh; its own mesh when the mesh is in no
// VirtualMesh; the meshes of its cluster when its mesh is not known.
type trustGroup struct {
	vm      *virtualMesh
	mesh    ObjectKey
	cluster string
}

// groupSources is an AccessPolicy's rule sources in one trust group, the
// warnings that go with them and the workloads they select.
type groupSources struct {
	from      []*securityv1beta1.Rule_From
	warnings  []string
	workloads []*workload
}

// trustGroup is d's trust group and its meshes.
func (t *accessTranslation) trustGroup(d *destination) (trustGroup, []*mesh) {
	m, ok := t.ix.meshByKey[d.Mesh]
	switch {
	case !ok:
		return trustGroup{cluster: d.Key.Cluster}, t.ix.meshesByCluster[d.Key.Cluster]
	case t.vms.vmOf(m.Key) != nil:
		vm := t.vms.vmOf(m.Key)
		return trustGroup{vm: vm}, vm.Members
	}
	return trustGroup{mesh: m.Key}, []*mesh{m}
}

// groupSources is the policy's sources for destination d: those that are
// the same everywhere, plus each service account named without a cluster
// in every mesh of d's trust group, with that mesh's trust domain.
func (t *accessTranslation) groupSources(p *accessPolicy, d *destination) *groupSources {
	g, meshes := t.trustGroup(d)
	if gs := p.sources[g]; gs != nil {
		return gs
	}
	gs := &groupSources{}
	if p.sources == nil {
		p.sources = map[trustGroup]*groupSources{}
	}
	p.sources[g] = gs
	if p.anyIdentity {
		return gs
	}
	principals := slices.Clone(p.principals)
	for _, sa := range p.meshSAs {
		known := false
		for _, m := range meshes {
			principals = append(principals, m.TrustDomain+"/ns/"+sa.namespace+"/sa/"+sa.name)
			for _, w := range t.ix.workloadsBySA[ObjectKey{Cluster: m.Key.Cluster, Namespace: sa.namespace, Name: sa.name}] {
				if w.Mesh == m.Key {
					gs.workloads = append(gs.workloads, w)
					known = true
				}
			}
		}
		if len(meshes) == 0 {
			// No mesh is known in the destination's cluster: Istio's
			// default trust domain, as for a cluster without one.
			principals = append(principals, DefaultTrustDomain+"/ns/"+sa.namespace+"/sa/"+sa.name)
		}
		if !known {
			gs.warnings = append(gs.warnings, fmt.Sprintf("%s: no discovered workload in %s runs as service account %s/%s", sa.path, g.describe(), sa.namespace, sa.name))
		}
	}
	if len(principals) > 0 {
		gs.from = append(gs.from, &securityv1beta1.Rule_From{Source: &securityv1beta1.Source{Principals: uniqueSorted(principals)}})
	}
	if len(p.namespaces) > 0 {
		gs.from = append(gs.from, &securityv1beta1.Rule_From{Source: &securityv1beta1.Source{Namespaces: p.namespaces}})
	}
	return gs
}

// describe names the meshes of the group, for warnings.
func (g trustGroup) describe() string {
	switch {
	case g.vm != nil:
		return "the meshes of VirtualMesh " + g.vm.Key.String()
	case g.mesh != ObjectKey{}:
		return "mesh " + g.mesh.Name + "." + g.mesh.Namespace + " (in no VirtualMesh) of cluster " + strconv.Quote(g.mesh.Cluster)
	}
	return fmt.Sprintf("cluster %q", g.cluster)
}

// rule is the policy's Istio rule for destination d. Allowed ports are
// service ports; Istio matches the port the workload receives on, so
// each is mapped to its target port where discovery knows it.
func (t *accessTranslation) rule(p *accessPolicy, d *destination) *securityv1beta1.Rule {
	r := &securityv1beta1.Rule{From: t.groupSources(p, d).from}
	op := &securityv1beta1.Operation{
		Paths:   uniqueSorted(p.Spec.GetAllowedPaths()),
		Methods: uniqueSorted(p.Spec.GetAllowedMethods()),
	}
	var ports []string
	for _, port := range p.Spec.GetAllowedPorts() {
		if tp, ok := d.TargetPorts[port]; ok {
			port = tp
		}
		ports = append(ports, strconv.FormatUint(uint64(port), 10))
	}
	op.Ports = uniqueSorted(ports)
	if len(op.Paths) > 0 || len(op.Methods) > 0 || len(op.Ports) > 0 {
		r.To = []*securityv1beta1.Rule_To{{Operation: op}}
	}
	return r
}

// emitAccess adds one ALLOW AuthorizationPolicy per destination that has
// applied AccessPolicies and is in a mesh with global access ENABLED: one
// rule per policy, in acceptance order.
func (t *accessTranslation) emit(e *emitter) {
	for _, d := range t.ix.destinations {
		if ap, parents := t.policy(d); ap != nil {
			e.add(SecurityV1, KindAuthorizationPolicy, d.Key, parents, ap)
		}
	}
}

// policy is d's AuthorizationPolicy and its parents, or nil.
func (t *accessTranslation) policy(d *destination) (*securityv1beta1.AuthorizationPolicy, []ParentRef) {
	applied := t.applied[d.Key]
	if len(applied) == 0 || t.inactiveReason(d) != "" {
		return nil, nil
	}
	ap := &securityv1beta1.AuthorizationPolicy{
		Selector: &typev1beta1.WorkloadSelector{MatchLabels: maps.Clone(d.Selector)},
		Action:   securityv1beta1.AuthorizationPolicy_ALLOW,
	}
	parents := []ParentRef{{Kind: parentKindDestination, Name: d.Key.Name, Namespace: d.Key.Namespace, Cluster: d.Key.Cluster}}
	for _, p := range applied {
		ap.Rules = append(ap.Rules, t.rule(p, d))
		parents = append(parents, ParentRef{Kind: parentKindAccess, Name: p.Key.Name, Namespace: p.Key.Namespace, Cluster: p.Key.Cluster})
	}
	return ap, parents
}

// goodVersion is the version of the policy to keep as its last valid one.
// Call it after accessPolicyStatus.
func (p *accessPolicy) goodVersion() (LastGoodAccess, bool) {
	if p.lastGood != nil {
		return *p.lastGood, true
	}
	// A policy INVALID only for destinations outside its cluster's scope
	// is still a valid one.
	if len(p.Errors) > 0 {
		return LastGoodAccess{}, false
	}
	return keptOf(p.Meta, p.Spec), true
}

// accessPolicyStatus is the status written back to an AccessPolicy.
func accessPolicyStatus(enc encode.Encoder, p *accessPolicy) (*snapshotv1.ResourceStatus, error) {
	s := p.Status
	s.State = commonv1.ApprovalState_ACCEPTED
	s.Errors = slices.Clone(p.Errors)
	if len(p.Errors) > 0 {
		s.State = commonv1.ApprovalState_INVALID
	}
	for _, key := range slices.Sorted(maps.Keys(s.Destinations)) {
		if as := s.Destinations[key]; as.GetState() == commonv1.ApprovalState_INVALID {
			s.State = commonv1.ApprovalState_INVALID
			for _, e := range as.GetErrors() {
				s.Errors = append(s.Errors, "destination "+key+": "+e)
			}
		}
	}
	if p.lastGood != nil {
		s.LastKnownGood = true
		s.Errors = append(s.Errors, lastGoodMessage(p.lastGood.Generation))
	}
	return resourceStatus(enc, NetworkingV1, KindAccessPolicy, p.Key, p.Meta.GetGeneration(), s)
}
