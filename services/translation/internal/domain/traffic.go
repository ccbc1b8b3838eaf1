package domain

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

// trafficTranslation applies valid TrafficPolicies to destinations, in
// acceptance order, with field ownership.
type trafficTranslation struct {
	ix     *Index
	vds    *virtualDestinations
	states map[ObjectKey]*destState
	// lastGood holds the last valid version of each policy, used when the
	// current one fails validation.
	lastGood map[ObjectKey]LastGoodTraffic
	byKey    map[ObjectKey]*trafficPolicy
	backing  *backingWorkloads
	// fed tells which destinations are federated to which meshes, and by
	// which host; nil when nothing is.
	fed *federationLookup
}

// policy returns the policy with key k, or nil.
func (t *trafficTranslation) policy(k ObjectKey) *trafficPolicy { return t.byKey[k] }

// destState is what the policies applied to one destination make of its
// VirtualService and DestinationRule.
type destState struct {
	dst *destination
	// Valid policies that select the destination, in acceptance order.
	applied []*trafficPolicy

	routes     map[string]*routeGroup // by matchKey
	destOwners map[string]*trafficPolicy
	outlier    *networkingv1.OutlierDetection
	tlsMode    networkingv1.TrafficPolicySpec_Policy_MTLS_Istio_TLSmode
	vsParents  []ObjectKey
	drParents  []ObjectKey
	// contrib holds the subsets that policies applied to other
	// destinations (the key) add to this one's DestinationRule.
	contrib map[ObjectKey][]subsetRef
	// targets are the destinations this one's policies added subsets to.
	targets []ObjectKey
	// inForce are the policies applied here, in acceptance order, each
	// with the version in force: what the VirtualServices of the
	// destination's clients in other clusters are made of.
	inForce []inForceSpec
}

// inForceSpec is a policy applied to a destination and the version of it
// in force there.
type inForceSpec struct {
	p    *trafficPolicy
	spec *networkingv1.TrafficPolicySpec
	// targets are the services and VirtualDestinations the version's
	// shift and mirror go to, which decide how clients elsewhere reach
	// them (clientKey).
	targets []*destination
	vds     []*virtualDestination
}

// routeView is where a destination's routes are made for: the clients in
// one cluster, of one mesh, which reach the destination as host. The
// destination's own cluster is its home view; a mesh it is federated to is
// a client view.
type routeView struct {
	cluster string
	mesh    ObjectKey
	host    string
	home    bool
}

func homeView(d *destination) routeView {
	return routeView{cluster: d.Key.Cluster, mesh: d.Mesh, host: d.Host, home: true}
}

// reset forgets what the policies applied to the destination made of it,
// and the subsets they added to other destinations; the subsets others
// added to it stay. It returns the destinations that lost subsets.
func (st *destState) reset(states map[ObjectKey]*destState) []ObjectKey {
	targets := st.targets
	for _, k := range targets {
		delete(states[k].contrib, st.dst.Key)
	}
	*st = destState{dst: st.dst, applied: st.applied, contrib: st.contrib}
	return targets
}

// subsets are the DestinationRule subsets by name.
func (st *destState) subsets() map[string]map[string]string {
	if len(st.contrib) == 0 {
		return nil
	}
	out := map[string]map[string]string{}
	for _, refs := range st.contrib {
		for _, r := range refs {
			out[r.name] = r.labels
		}
	}
	return out
}

// allDRParents are the policies behind the DestinationRule: those that set
// its fields and those that added subsets.
func (st *destState) allDRParents() []ObjectKey {
	if len(st.contrib) == 0 {
		return st.drParents
	}
	out := slices.Clone(st.drParents)
	for _, refs := range st.contrib {
		for _, r := range refs {
			out = append(out, r.policy)
		}
	}
	return out
}

// routeGroup is one route of a VirtualService: every policy with the same
// sources and request matchers for a destination contributes to it.
type routeGroup struct {
	route  *istiov1alpha3.HTTPRoute
	owners map[string]*trafficPolicy // field -> policy that set it
}

func newTrafficTranslation(ix *Index) *trafficTranslation {
	t := &trafficTranslation{ix: ix, states: make(map[ObjectKey]*destState, len(ix.destinations)), backing: &backingWorkloads{ix: ix}}
	for _, d := range ix.destinations {
		t.states[d.Key] = &destState{dst: d}
	}
	return t
}

// apply validates every policy, then translates the valid ones destination
// by destination. policies must be in acceptance order.
func (t *trafficTranslation) apply(policies []*trafficPolicy) {
	t.byKey = make(map[ObjectKey]*trafficPolicy, len(policies))
	for _, p := range policies {
		t.byKey[p.Key] = p
		t.prepare(p)
		for _, k := range p.selected {
			st := t.states[k]
			st.applied = append(st.applied, p)
		}
	}
	for _, d := range t.ix.destinations {
		t.applyAll(t.states[d.Key])
	}
}

// prepare validates a policy, falls back to its last valid version when
// it is invalid, and finds the workloads and destinations it selects.
func (t *trafficTranslation) prepare(p *trafficPolicy) {
	p.Status = &commonv1.ResourceStatus{ObservedGeneration: p.Meta.GetGeneration()}
	p.prior, p.priorSelects, p.heldOn = nil, nil, nil
	p.Errors = validateVersion(p.Meta, p.Spec, ValidateTrafficPolicy)
	spec, held := inForce(p.Key, p.Meta, p.Spec, p.Errors, t.lastGood)
	if len(p.Errors) > 0 && held == nil {
		p.selectWorkloads(t.ix)
		return
	}
	// An invalid edit is reported; the last valid version stays in force.
	p.lastGood, p.Spec = held, spec
	if held == nil {
		p.findPrior(t.lastGood)
	}
	p.selectWorkloads(t.ix)
	for _, d := range t.ix.selectDestinations(p.Spec.GetDestinationSelector(), p.Key) {
		p.selected = append(p.selected, d.Key)
	}
	p.Status.Warnings = t.ix.missingServiceRefs(p.Spec.GetDestinationSelector(), p.Key)
}

// findPrior sets the policy's prior version: its last valid version in
// kept when that is of another generation than the current one, which is
// valid (a held version is not a prior one).
func (p *trafficPolicy) findPrior(kept map[ObjectKey]LastGoodTraffic) {
	p.prior = nil
	if good, ok := lastOf(kept, p.Key, p.Meta); ok && good.Generation != p.Meta.GetGeneration() {
		p.prior = &good
	}
}

// refreshPrior is findPrior for a policy that was not prepared again,
// forgetting what the old prior version selected when it is another.
func (p *trafficPolicy) refreshPrior(kept map[ObjectKey]LastGoodTraffic) {
	old := p.prior
	p.findPrior(kept)
	if old == nil || p.prior == nil || old.Generation != p.prior.Generation {
		p.priorSelects = nil
	}
}

// priorSelected says whether the policy's prior version selected d.
func (t *trafficTranslation) priorSelected(p *trafficPolicy, d ObjectKey) bool {
	if p.priorSelects == nil {
		p.priorSelects = map[ObjectKey]bool{}
		for _, dst := range t.ix.selectDestinations(p.prior.Spec.GetDestinationSelector(), p.Key) {
			p.priorSelects[dst.Key] = true
		}
	}
	return p.priorSelects[d]
}

// applyAll applies the destination's policies in acceptance order.
func (t *trafficTranslation) applyAll(st *destState) {
	for i, p := range st.applied {
		as := &commonv1.ApprovalStatus{AcceptanceOrder: uint32(i)}
		if p.Status.Destinations == nil {
			p.Status.Destinations = map[string]*commonv1.ApprovalStatus{}
		}
		p.Status.Destinations[st.dst.Key.String()] = as
		delete(p.heldOn, st.dst.Key)
		t.applyTo(st, p, as)
	}
}

// selectWorkloads records in the status the workloads that the source
// selectors of the spec in force select.
func (p *trafficPolicy) selectWorkloads(ix *Index) {
	if len(p.Spec.GetSourceSelector()) == 0 {
		return
	}
	for _, w := range ix.selectWorkloads(p.Spec.GetSourceSelector()) {
		p.Status.Workloads = append(p.Status.Workloads, &commonv1.ClusterObjectRef{Name: w.Key.Name, Namespace: w.Key.Namespace, Cluster: w.Key.Cluster})
	}
}

// goodVersion is the version of the policy to keep as its last valid one:
// the current version when it was ACCEPTED, the last valid version again
// when that one was kept in force. Call it after trafficPolicyStatus.
func (p *trafficPolicy) goodVersion() (LastGoodTraffic, bool) {
	if p.lastGood != nil {
		return *p.lastGood, true
	}
	if len(p.heldOn) > 0 {
		return *p.prior, true
	}
	// FAILED means valid, but some output was blocked (by a user's own
	// Istio object): the spec is still a good one. So is one that is
	// INVALID only for destinations outside its cluster's scope.
	if len(p.Errors) > 0 {
		return LastGoodTraffic{}, false
	}
	applied := false
	for _, as := range p.Status.GetDestinations() {
		switch {
		case as.GetState() == commonv1.ApprovalState_INVALID && !outOfScope(as):
			// Not a valid version. The last valid one stays kept even
			// when it is in force nowhere now (it fails too, say because
			// a cluster's input is missing): it comes back with that
			// cluster.
			if p.prior != nil {
				return *p.prior, true
			}
			return LastGoodTraffic{}, false
		case as.GetState() == commonv1.ApprovalState_ACCEPTED || as.GetState() == commonv1.ApprovalState_FAILED:
			applied = true
		}
	}
	if p.prior != nil && !applied {
		// A new version that reached no destination has not shown it is
		// good: its destinations may be in a cluster whose input is
		// missing (after a restart with that cluster down), where it may
		// well fail. The version that was applied stays the last valid
		// one until this one is.
		return *p.prior, true
	}
	return keptOf(p.Meta, p.Spec), true
}

// applyTo applies one valid policy to one destination, or reports why it
// cannot: a reference that does not resolve for this destination, or a
// field that a policy accepted earlier already owns. When the policy's
// current version fails there and an older version was valid, that one
// stays in force for the destination: its status is INVALID with the
// errors, and says so.
func (t *trafficTranslation) applyTo(st *destState, p *trafficPolicy, as *commonv1.ApprovalStatus) {
	if d := st.dst; !t.ix.scope.allows(p.Key.Cluster, d.Key.Cluster, d.Key.Namespace) {
		as.State, as.Errors = commonv1.ApprovalState_INVALID, []string{t.ix.scope.outOfScope("spec.destinationSelector", "destination "+d.Key.String(), p.Key.Cluster, d.Key.Cluster, d.Key.Namespace)}
		as.Warnings = []string{scopeWarning}
		return
	}
	errs := t.applySpec(st, p, p.Spec, as)
	if len(errs) == 0 {
		as.State = commonv1.ApprovalState_ACCEPTED
		return
	}
	as.State, as.Errors = commonv1.ApprovalState_INVALID, errs
	if p.prior == nil || !t.priorSelected(p, st.dst.Key) {
		return
	}
	warnings := as.Warnings
	as.Warnings = nil
	if perrs := t.applySpec(st, p, p.prior.Spec, as); len(perrs) > 0 {
		// The last valid version fails here too (what it named is gone).
		as.Warnings = warnings
		return
	}
	if p.heldOn == nil {
		p.heldOn = map[ObjectKey]bool{}
	}
	p.heldOn[st.dst.Key] = true
	as.Errors = append(as.Errors, heldMessage(p.prior.Generation))
}

// applySpec applies one version of a policy to one destination and returns
// nothing, or the errors that kept it from changing anything there.
func (t *trafficTranslation) applySpec(st *destState, p *trafficPolicy, spec *networkingv1.TrafficPolicySpec, as *commonv1.ApprovalStatus) []string {
	d := st.dst
	pol := spec.GetPolicy()
	shift, subsets, mirror, errs := t.resolveTargets(d, pol, p.Key.Cluster, homeView(d))
	if len(errs) > 0 {
		return errs
	}
	as.Warnings = append(as.Warnings, deprecationWarnings(pol)...)

	rfields := routeFields(pol)
	var group *routeGroup
	var key string
	var matches []*istiov1alpha3.HTTPMatchRequest
	if len(rfields) > 0 {
		sources, ok := sourceConditions(spec.GetSourceSelector(), d.Key.Cluster)
		if !ok {
			as.Warnings = append(as.Warnings, fmt.Sprintf("no source selector matches clients in cluster %q; the route settings are not translated there", d.Key.Cluster))
			rfields = nil
		} else {
			matches = combine(requestConditions(spec.GetHttpRequestMatchers()), sources)
			key = matchKey(matches)
			group = st.routes[key]
		}
	}
	dfields := destinationFields(pol)

	for _, f := range rfields {
		if group != nil && group.owners[f] != nil {
			errs = append(errs, fmt.Sprintf("spec.policy.%s: conflicts with TrafficPolicy %s, accepted earlier, which sets %s for the same destination, sources and request matchers", f, group.owners[f].Key, f))
		}
	}
	for _, f := range dfields {
		if o := st.destOwners[f]; o != nil {
			errs = append(errs, fmt.Sprintf("spec.policy.%s: conflicts with TrafficPolicy %s, accepted earlier, which sets %s for the same destination", f, o.Key, f))
		}
	}
	if len(errs) > 0 {
		return errs
	}

	if len(rfields) > 0 {
		if group == nil {
			group = &routeGroup{
				route: &istiov1alpha3.HTTPRoute{
					Match: matches,
					Route: []*istiov1alpha3.HTTPRouteDestination{{Destination: &istiov1alpha3.Destination{Host: d.Host}}},
				},
				owners: map[string]*trafficPolicy{},
			}
			if st.routes == nil {
				st.routes = map[string]*routeGroup{}
			}
			st.routes[key] = group
		}
		for _, f := range rfields {
			setRouteField(group.route, f, pol, shift, mirror)
			group.owners[f] = p
		}
		st.vsParents = append(st.vsParents, p.Key)
	}
	for _, f := range dfields {
		if st.destOwners == nil {
			st.destOwners = map[string]*trafficPolicy{}
		}
		st.destOwners[f] = p
		switch f {
		case fieldOutlierDetection:
			st.outlier = pol.GetOutlierDetection()
		case fieldMTLS:
			st.tlsMode = pol.GetMtls().GetIstio().GetTlsMode()
		}
	}
	if len(dfields) > 0 {
		st.drParents = append(st.drParents, p.Key)
	}
	for _, s := range subsets {
		ts := t.states[s.target]
		if ts.contrib == nil {
			ts.contrib = map[ObjectKey][]subsetRef{}
		}
		s.policy = p.Key
		ts.contrib[d.Key] = append(ts.contrib[d.Key], s)
		if !slices.Contains(st.targets, s.target) {
			st.targets = append(st.targets, s.target)
		}
	}
	a := inForceSpec{p: p, spec: spec}
	if len(routeFields(pol)) > 0 {
		a.targets, a.vds = t.targetsOf(d, pol)
	}
	st.inForce = append(st.inForce, a)
	return nil
}

// targetsOf are the services and VirtualDestinations that the shift and
// mirror of pol go to from destination d, which resolveTargets resolved
// already.
func (t *trafficTranslation) targetsOf(d *destination, pol *networkingv1.TrafficPolicySpec_Policy) (dests []*destination, vds []*virtualDestination) {
	add := func(name, namespace, cluster string) {
		if target, ok := t.ix.destination(ObjectKey{Cluster: cmp.Or(cluster, d.Key.Cluster), Namespace: cmp.Or(namespace, d.Key.Namespace), Name: name}); ok {
			dests = append(dests, target)
		}
	}
	for _, wd := range pol.GetTrafficShift().GetDestinations() {
		if ref := wd.GetVirtualDestination(); ref != nil {
			if t.vds != nil {
				if vd := t.vds.lookup(cmp.Or(ref.GetNamespace(), d.Key.Namespace), ref.GetName(), d.Key.Cluster); vd != nil {
					vds = append(vds, vd)
				}
			}
			continue
		}
		ks := wd.GetKubeService()
		cluster, _ := kubeDestinationCluster(ks)
		add(ks.GetName(), ks.GetNamespace(), cluster)
	}
	if ref := pol.GetMirror().GetKubeService(); ref != nil {
		add(ref.GetName(), ref.GetNamespace(), ref.GetCluster())
	}
	return dests, vds
}

// clientKey sums up what the VirtualService of client c for destination
// st.dst depends on besides the destination: the policies' sources as
// matched in c's cluster, and the host by which c reaches each target.
// Clients with the same key get the same VirtualService.
func (t *trafficTranslation) clientKey(st *destState, c federatedClient) string {
	v := routeView{cluster: c.mesh.Key.Cluster, mesh: c.mesh.Key, host: c.host}
	var b strings.Builder
	for _, a := range st.inForce {
		if sel := a.spec.GetSourceSelector(); len(sel) > 0 {
			conds, ok := sourceConditions(sel, v.cluster)
			if !ok {
				b.WriteByte('!')
			}
			b.WriteString(matchKey(conds))
		}
		b.WriteByte('|')
		for _, target := range a.targets {
			if target == st.dst {
				b.WriteString("=,")
				continue
			}
			host, _ := t.hostIn(v, target)
			b.WriteString(host)
			b.WriteByte(',')
		}
		for _, vd := range a.vds {
			if vd.serves(v.mesh) {
				b.WriteByte('+')
			} else {
				b.WriteByte('-')
			}
		}
		b.WriteByte(';')
	}
	return b.String()
}

// kubeDestinationCluster is the cluster a traffic shift's kubeService
// names, and the field that names it: cluster, else the deprecated
// clusterName (validation refuses the two naming different clusters).
func kubeDestinationCluster(ks *networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_KubeDestination) (cluster, field string) {
	if c := ks.GetCluster(); c != "" {
		return c, "cluster"
	}
	//lint:ignore SA1019 the deprecated clusterName is still accepted for one release
	return ks.GetClusterName(), "clusterName"
}

// clusterNameDeprecated is the warning for a kubeService that spells its
// cluster the old way.
const clusterNameDeprecated = "clusterName is deprecated and will be removed in the next release: use cluster, as every other reference spells it"

// deprecationWarnings are the warnings for deprecated fields a valid
// policy uses, for the status of every destination it applies to.
func deprecationWarnings(pol *networkingv1.TrafficPolicySpec_Policy) []string {
	var out []string
	for i, wd := range pol.GetTrafficShift().GetDestinations() {
		//lint:ignore SA1019 the deprecated clusterName is still accepted for one release
		if wd.GetKubeService().GetClusterName() != "" {
			out = append(out, fmt.Sprintf("spec.policy.trafficShift.destinations[%d].kubeService.%s", i, clusterNameDeprecated))
		}
	}
	return out
}

type subsetRef struct {
	target ObjectKey
	name   string
	labels map[string]string
	policy ObjectKey // the policy that names the subset
}

// resolveTargets resolves the services a policy sends or mirrors traffic
// to, as seen from destination d by the clients of view v. A target's
// cluster and namespace default to d's: a policy that selects a service in
// several clusters shifts each one's traffic within its cluster. A target
// in the view's cluster is reached by its own hostname; one in another
// cluster by the federated host of the VirtualMesh that exports it to the
// view's mesh, or not at all.
func (t *trafficTranslation) resolveTargets(d *destination, pol *networkingv1.TrafficPolicySpec_Policy, source string, v routeView) (shift []*istiov1alpha3.HTTPRouteDestination, subsets []subsetRef, mirror *istiov1alpha3.Destination, errs []string) {
	// portPath names the field that holds port.
	resolve := func(path, name, namespace, cluster, clusterField, portPath string, port uint32) (*destination, string, bool) {
		key := ObjectKey{Cluster: cmp.Or(cluster, d.Key.Cluster), Namespace: cmp.Or(namespace, d.Key.Namespace), Name: name}
		if !t.ix.scope.allows(source, key.Cluster, key.Namespace) {
			errs = append(errs, t.ix.scope.outOfScope(path, "service "+key.String(), source, key.Cluster, key.Namespace))
			return nil, "", false
		}
		target, ok := t.ix.destination(key)
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: service %s not found", path, key))
			return nil, "", false
		}
		switch {
		case port != 0 && len(target.Ports) > 0 && !slices.Contains(target.Ports, port):
			errs = append(errs, fmt.Sprintf("%s: service %s has no port %d", portPath, key, port))
			return nil, "", false
		case port == 0 && len(target.Ports) > 1:
			// Istio cannot tell which port a route without one means.
			errs = append(errs, fmt.Sprintf("%s: is required: service %s has several ports (%s)", portPath, key, formatPorts(target.Ports)))
			return nil, "", false
		}
		host, ok := t.hostIn(v, target)
		if !ok {
			errs = append(errs, t.notFederated(path+"."+clusterField, target, d, v))
			return nil, "", false
		}
		return target, host, true
	}

	if ts := pol.GetTrafficShift(); ts != nil {
		weights := make([]uint32, 0, len(ts.GetDestinations()))
		for i, wd := range ts.GetDestinations() {
			if ref := wd.GetVirtualDestination(); ref != nil {
				rd, ok := t.resolveVirtualDestination(fmt.Sprintf("spec.policy.trafficShift.destinations[%d].virtualDestination", i), d, v, ref, &errs)
				if ok {
					shift = append(shift, rd)
					weights = append(weights, wd.GetWeight())
				}
				continue
			}
			ks := wd.GetKubeService()
			path := fmt.Sprintf("spec.policy.trafficShift.destinations[%d].kubeService", i)
			cluster, field := kubeDestinationCluster(ks)
			target, host, ok := resolve(path, ks.GetName(), ks.GetNamespace(), cluster, field, path+".port", ks.GetPort())
			if !ok {
				continue
			}
			rd := &istiov1alpha3.HTTPRouteDestination{Destination: &istiov1alpha3.Destination{Host: host}}
			if ks.GetPort() != 0 {
				rd.Destination.Port = &istiov1alpha3.PortSelector{Number: ks.GetPort()}
			}
			if len(ks.GetSubset()) > 0 {
				if !t.backing.hasSubset(target, ks.GetSubset()) {
					errs = append(errs, fmt.Sprintf("%s.subset: no workload of service %s has the labels %s", path, target.Key, formatLabels(ks.GetSubset())))
					continue
				}
				// The subset has the same name on the target's own host
				// and on its federated hosts (see emitFederation).
				name := SubsetName(ks.GetSubset())
				rd.Destination.Subset = name
				subsets = append(subsets, subsetRef{target: target.Key, name: name, labels: maps.Clone(ks.GetSubset())})
			}
			shift = append(shift, rd)
			weights = append(weights, wd.GetWeight())
		}
		if len(shift) > 1 {
			for i, w := range normalizeWeights(weights) {
				shift[i].Weight = w
			}
		}
	}
	if m := pol.GetMirror(); m != nil {
		ref := m.GetKubeService()
		if _, host, ok := resolve("spec.policy.mirror.kubeService", ref.GetName(), ref.GetNamespace(), ref.GetCluster(), "cluster", "spec.policy.mirror.port", m.GetPort()); ok {
			mirror = &istiov1alpha3.Destination{Host: host}
			if m.GetPort() != 0 {
				mirror.Port = &istiov1alpha3.PortSelector{Number: m.GetPort()}
			}
		}
	}
	return shift, subsets, mirror, errs
}

// hostIn is the host by which the clients of view v reach target: its own
// hostname from its own cluster, else the federated host of the
// VirtualMesh that exports it to v's mesh.
func (t *trafficTranslation) hostIn(v routeView, target *destination) (string, bool) {
	if target.Key.Cluster == v.cluster {
		return target.Host, true
	}
	return t.fed.hostFor(target, v.mesh)
}

// notFederated says why the clients of view v cannot reach target, a
// service of another cluster, naming field.
func (t *trafficTranslation) notFederated(field string, target, d *destination, v routeView) string {
	if v.home {
		if d.Mesh == (ObjectKey{}) {
			return fmt.Sprintf("%s: service %s is in cluster %q, and destination %s is in no mesh, so no VirtualMesh federates it there; traffic to another cluster goes to the service's federated host", field, target.Key, target.Key.Cluster, d.Key)
		}
		return fmt.Sprintf("%s: service %s is in cluster %q, and no VirtualMesh federates it to mesh %s of destination %s, whose clients could not resolve it; federate it to that mesh (spec.federation of the VirtualMesh) to send traffic there", field, target.Key, target.Key.Cluster, v.mesh, d.Key)
	}
	return fmt.Sprintf("%s: service %s is not federated to mesh %s", field, target.Key, v.mesh)
}

// resolveVirtualDestination resolves a traffic shift to a
// VirtualDestination, as seen from destination d by the clients of view v:
// it must be valid and written into their mesh, or they could not resolve
// its hostname.
func (t *trafficTranslation) resolveVirtualDestination(path string, d *destination, v routeView, ref *networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_VirtualDestinationRef, errs *[]string) (*istiov1alpha3.HTTPRouteDestination, bool) {
	ns := cmp.Or(ref.GetNamespace(), d.Key.Namespace)
	var vd *virtualDestination
	if t.vds != nil {
		vd = t.vds.lookup(ns, ref.GetName(), d.Key.Cluster)
	}
	switch {
	case vd == nil:
		*errs = append(*errs, fmt.Sprintf("%s: VirtualDestination %s/%s not found", path, ns, ref.GetName()))
		return nil, false
	case !vd.valid():
		*errs = append(*errs, fmt.Sprintf("%s: VirtualDestination %s is INVALID", path, vd.Key))
		return nil, false
	case !vd.serves(v.mesh) && v.home:
		*errs = append(*errs, fmt.Sprintf("%s: VirtualDestination %s is not written into the mesh of destination %s", path, vd.Key, d.Key))
		return nil, false
	case !vd.serves(v.mesh):
		*errs = append(*errs, fmt.Sprintf("%s: VirtualDestination %s is not written into mesh %s", path, vd.Key, v.mesh))
		return nil, false
	}
	return &istiov1alpha3.HTTPRouteDestination{Destination: &istiov1alpha3.Destination{
		Host: vd.Spec.GetHostname(),
		Port: &istiov1alpha3.PortSelector{Number: vd.Spec.GetPort().GetNumber()},
	}}, true
}

// SubsetName names the DestinationRule subset for pod labels: the sorted
// "key-value" pairs joined by "-", e.g. "version-v2". Istio wants a DNS
// label, so other characters become "-", and a name that had to be changed
// or cut gets a hash of the labels to stay unique.
func SubsetName(labels map[string]string) string {
	var raw strings.Builder
	for i, k := range slices.Sorted(maps.Keys(labels)) {
		if i > 0 {
			raw.WriteByte('-')
		}
		raw.WriteString(k + "-" + labels[k])
	}
	name := []byte(strings.ToLower(raw.String()))
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			name[i] = '-'
		}
	}
	clean := strings.Trim(string(name), "-")
	if clean == raw.String() && len(clean) <= 63 && clean != "" {
		return clean
	}
	sum := sha256.Sum256([]byte(formatLabels(labels)))
	suffix := hex.EncodeToString(sum[:])[:8]
	if len(clean) > 54 {
		clean = strings.Trim(clean[:54], "-")
	}
	if clean == "" {
		return "subset-" + suffix
	}
	return clean + "-" + suffix
}

// formatPorts lists ports in order: "9080, 9443".
func formatPorts(ports []uint32) string {
	parts := make([]string, 0, len(ports))
	for _, p := range slices.Sorted(slices.Values(ports)) {
		parts = append(parts, strconv.FormatUint(uint64(p), 10))
	}
	return strings.Join(parts, ", ")
}

func formatLabels(labels map[string]string) string {
	parts := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// virtualService is the destination's VirtualService, or nil when no
// policy sets anything on its routes.
func (st *destState) virtualService() *istiov1alpha3.VirtualService {
	return virtualServiceOf(st.routes, st.dst.Host)
}

// virtualServiceOf is the VirtualService for host with these routes, or
// nil when there are none.
func virtualServiceOf(groups map[string]*routeGroup, host string) *istiov1alpha3.VirtualService {
	if len(groups) == 0 {
		return nil
	}
	routes := make([]*istiov1alpha3.HTTPRoute, 0, len(groups)+1)
	catchAll := false
	for _, g := range groups {
		routes = append(routes, g.route)
		catchAll = catchAll || len(g.route.GetMatch()) == 0
	}
	slices.SortFunc(routes, compareRoutes)
	if !catchAll {
		// Requests that match no route would get a 404 from Envoy; they
		// must reach the service as they did without a VirtualService.
		routes = append(routes, &istiov1alpha3.HTTPRoute{
			Route: []*istiov1alpha3.HTTPRouteDestination{{Destination: &istiov1alpha3.Destination{Host: host}}},
		})
	}
	return &istiov1alpha3.VirtualService{Hosts: []string{host}, Http: routes}
}

// clientVirtualService is the VirtualService that the clients of mesh c,
// in another cluster than destination st.dst, get for the federated host
// they reach it by: the route settings of the policies in force for the
// destination, with their source selectors matched against c's cluster
// and their targets named by the hosts c's clients know them by. A policy
// that cannot be translated there (a target not federated to c, or a
// field that an earlier policy sets for the same sources in c's cluster
// only) is left out of it, with a warning in its status for the
// destination. It returns nil when no policy sets routes for c's clients,
// the policies behind the routes, and whether it warned.
func (t *trafficTranslation) clientVirtualService(st *destState, c federatedClient) (vs *istiov1alpha3.VirtualService, parents []ObjectKey, warned bool) {
	d := st.dst
	v := routeView{cluster: c.mesh.Key.Cluster, mesh: c.mesh.Key, host: c.host}
	var groups map[string]*routeGroup
	for _, a := range st.inForce {
		pol := a.spec.GetPolicy()
		rfields := routeFields(pol)
		if len(rfields) == 0 {
			continue
		}
		sources, ok := sourceConditions(a.spec.GetSourceSelector(), v.cluster)
		if !ok {
			// The policy is for clients in other clusters.
			continue
		}
		as := a.p.Status.GetDestinations()[d.Key.String()]
		warn := func(msg string) {
			warned = true
			if as != nil {
				as.Warnings = append(as.Warnings, fmt.Sprintf("not applied to the clients of mesh %s in cluster %q, which reach the destination as %s: %s", c.mesh.Key, v.cluster, c.host, msg))
			}
		}
		shift, _, mirror, errs := t.resolveTargets(d, pol, a.p.Key.Cluster, v)
		if len(errs) > 0 {
			warn(strings.Join(errs, "; "))
			continue
		}
		matches := combine(requestConditions(a.spec.GetHttpRequestMatchers()), sources)
		key := matchKey(matches)
		group := groups[key]
		var conflicts []string
		for _, f := range rfields {
			if group != nil && group.owners[f] != nil {
				conflicts = append(conflicts, fmt.Sprintf("spec.policy.%s: conflicts with TrafficPolicy %s, accepted earlier, which sets %s for the same sources and request matchers there", f, group.owners[f].Key, f))
			}
		}
		if len(conflicts) > 0 {
			warn(strings.Join(conflicts, "; "))
			continue
		}
		if group == nil {
			group = &routeGroup{
				route: &istiov1alpha3.HTTPRoute{
					Match: matches,
					Route: []*istiov1alpha3.HTTPRouteDestination{{Destination: &istiov1alpha3.Destination{Host: c.host}}},
				},
				owners: map[string]*trafficPolicy{},
			}
			if groups == nil {
				groups = map[string]*routeGroup{}
			}
			groups[key] = group
		}
		for _, f := range rfields {
			setRouteField(group.route, f, pol, shift, mirror)
			group.owners[f] = a.p
		}
		parents = append(parents, a.p.Key)
	}
	return virtualServiceOf(groups, c.host), parents, warned
}

// trafficPolicyStatus is the status written back to a TrafficPolicy. The
// policy is INVALID when validation rejected it or when it is INVALID for
// any destination it selects; each destination's entry says which.
func trafficPolicyStatus(enc encode.Encoder, p *trafficPolicy) (*snapshotv1.ResourceStatus, error) {
	s := p.Status
	s.State = commonv1.ApprovalState_ACCEPTED
	s.Errors = slices.Clone(p.Errors)
	if len(p.Errors) > 0 {
		s.State = commonv1.ApprovalState_INVALID
	}
	failed := len(p.conflicts) > 0
	for _, key := range slices.Sorted(maps.Keys(s.Destinations)) {
		as := s.Destinations[key]
		switch as.State {
		case commonv1.ApprovalState_INVALID:
			s.State = commonv1.ApprovalState_INVALID
		case commonv1.ApprovalState_FAILED:
			failed = true
		default:
			continue
		}
		for _, e := range as.Errors {
			s.Errors = append(s.Errors, "destination "+key+": "+e)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(p.conflicts), ObjectKey.compare) {
		s.Errors = append(s.Errors, p.conflicts[k])
	}
	if failed && s.State == commonv1.ApprovalState_ACCEPTED {
		// Valid, but some of its outputs could not be written.
		s.State = commonv1.ApprovalState_FAILED
	}
	switch {
	case p.lastGood != nil:
		s.LastKnownGood = true
		s.Errors = append(s.Errors, lastGoodMessage(p.lastGood.Generation))
	case len(p.heldOn) > 0:
		s.LastKnownGood = true
		s.Errors = append(s.Errors, lastGoodMessage(p.prior.Generation))
	}
	return resourceStatus(enc, NetworkingV1, KindTrafficPolicy, p.Key, p.Meta.GetGeneration(), s)
}
