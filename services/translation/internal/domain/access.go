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

	// from is the rule's sources; nil allows every identity.
	from []*securityv1beta1.Rule_From
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
	t.resolveSources(p)
	p.Status.Warnings = t.ix.missingServiceRefs(p.Spec.GetDestinationSelector(), p.Key)
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
	}
}

// setStatuses writes the status of every policy applied to d for d.
func (t *accessTranslation) setStatuses(d *destination) {
	for i, p := range t.applied[d.Key] {
		if p.Status.Destinations == nil {
			p.Status.Destinations = map[string]*commonv1.ApprovalStatus{}
		}
		as := &commonv1.ApprovalStatus{AcceptanceOrder: uint32(i), State: commonv1.ApprovalState_ACCEPTED, Warnings: slices.Clone(p.warnings)}
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

// resolveSources turns the policy's identity selectors into the sources of
// an Istio rule. Selectors are ORed, so principals and namespaces go into
// separate sources (fields of one source are ANDed).
func (t *accessTranslation) resolveSources(p *accessPolicy) {
	var principals, namespaces []string
	var workloads []*workload
	for i, sel := range p.Spec.GetSourceSelector() {
		switch {
		case sel.GetKubeServiceAccountRefs() != nil:
			for j, ref := range sel.GetKubeServiceAccountRefs().GetServiceAccounts() {
				sa := resolveRef(ref, p.Key)
				tds, known := t.ix.serviceAccountTrustDomains(sa)
				if !known {
					p.warnings = append(p.warnings, fmt.Sprintf("spec.sourceSelector[%d].kubeServiceAccountRefs.serviceAccounts[%d]: no discovered workload in cluster %q runs as service account %s/%s", i, j, sa.Cluster, sa.Namespace, sa.Name))
				}
				for _, td := range tds {
					principals = append(principals, td+"/ns/"+sa.Namespace+"/sa/"+sa.Name)
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
							principals = append(principals, td+"/*")
						}
						for _, ns := range uniqueSorted(m.GetNamespaces()) {
							principals = append(principals, td+"/ns/"+ns+"/sa/*")
						}
					}
				}
			case len(m.GetNamespaces()) > 0:
				namespaces = append(namespaces, m.GetNamespaces()...)
			default:
				p.from = nil
				return // every identity
			}
			workloads = append(workloads, t.ix.workloadsIn(m.GetClusters(), m.GetNamespaces())...)
		default:
			p.from = nil
			return // an empty selector matches every identity
		}
	}
	if len(principals) > 0 {
		p.from = append(p.from, &securityv1beta1.Rule_From{Source: &securityv1beta1.Source{Principals: uniqueSorted(principals)}})
	}
	if len(namespaces) > 0 {
		p.from = append(p.from, &securityv1beta1.Rule_From{Source: &securityv1beta1.Source{Namespaces: uniqueSorted(namespaces)}})
	}
	slices.SortFunc(workloads, func(a, b *workload) int { return a.Key.compare(b.Key) })
	for _, w := range slices.Compact(workloads) {
		p.Status.Workloads = append(p.Status.Workloads, &commonv1.ClusterObjectRef{Name: w.Key.Name, Namespace: w.Key.Namespace, Cluster: w.Key.Cluster})
	}
}

// rule is the policy's Istio rule for destination d. Allowed ports are
// service ports; Istio matches the port the workload receives on, so
// each is mapped to its target port where discovery knows it.
func (p *accessPolicy) rule(d *destination) *securityv1beta1.Rule {
	r := &securityv1beta1.Rule{From: p.from}
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
		ap.Rules = append(ap.Rules, p.rule(d))
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
func accessPolicyStatus(p *accessPolicy) (*snapshotv1.ResourceStatus, error) {
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
	return resourceStatus(NetworkingV1, KindAccessPolicy, p.Key, p.Meta.GetGeneration(), s)
}
