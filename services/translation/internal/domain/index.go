package domain

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/proto"
)

// ObjectKey names a namespaced object in a cluster.
type ObjectKey struct {
	Cluster, Namespace, Name string
}

// String renders the key as statuses do: "<name>.<namespace>.<cluster>".
func (k ObjectKey) String() string { return k.Name + "." + k.Namespace + "." + k.Cluster }

func (k ObjectKey) compare(o ObjectKey) int {
	return cmp.Or(cmp.Compare(k.Cluster, o.Cluster), cmp.Compare(k.Namespace, o.Namespace), cmp.Compare(k.Name, o.Name))
}

// destination is a discovered Kubernetes Service.
type destination struct {
	Key      ObjectKey
	Host     string
	Labels   map[string]string // the Service's own labels
	Selector map[string]string // the Service's pod selector
	Subsets  map[string]*discoveryv1.DestinationSpec_KubeService_Subset
	Ports    []uint32
	// PortInfo has every port of the Service, in discovery's order.
	PortInfo []*discoveryv1.DestinationSpec_KubeService_KubeServicePort
	// TargetPorts maps a service port to its numeric target (pod) port,
	// where discovery reported one.
	TargetPorts map[uint32]uint32
	Mesh        ObjectKey // zero when unknown
	// Region of the Service's cluster, and the zone of its endpoints when
	// they are all in one; empty when not known.
	Region, Zone string
}

// workload is a discovered group of mesh pods.
type workload struct {
	Key            ObjectKey
	Labels         map[string]string
	ServiceAccount string
	Mesh           ObjectKey // zero when unknown
}

// Index holds every cluster's discovered entities, looked up by the keys
// that selectors use.
type Index struct {
	destinations []*destination // sorted by key
	byKey        map[ObjectKey]*destination
	byCluster    map[string][]*destination
	byClusterNS  map[[2]string][]*destination

	workloads     []*workload // sorted by key
	workloadsByNS map[[2]string][]*workload
	// Workloads by cluster; the keys are the clusters with workloads.
	workloadsByCluster map[string][]*workload
	// Workloads by the service account they run as: (cluster, namespace,
	// service account name).
	workloadsBySA map[ObjectKey][]*workload

	meshIndex

	// scope says what each cluster's resources may change; nil allows
	// everything (set by translateAll).
	scope *scopes
}

// NewIndex indexes the destinations and workloads of every input. The
// cluster of an entity is the cluster of the input that carried it: an
// agent speaks only for its own cluster.
func NewIndex(inputs map[string]*snapshotv1.InputSnapshot, clusterDomain string) *Index {
	ix := &Index{
		byKey:         map[ObjectKey]*destination{},
		byCluster:     map[string][]*destination{},
		byClusterNS:   map[[2]string][]*destination{},
		workloadsByNS: map[[2]string][]*workload{},

		workloadsByCluster: map[string][]*workload{},
	}
	ix.indexMeshes(inputs)
	var nd, nw int
	for _, in := range inputs {
		nd += len(in.GetDestinations())
		nw += len(in.GetWorkloads())
	}
	dests := make([]keyed[*discoveryv1.Destination], 0, nd)
	works := make([]keyed[*discoveryv1.Workload], 0, nw)
	for _, cluster := range sortedKeys(inputs) {
		in := inputs[cluster]
		for _, d := range in.GetDestinations() {
			ref := d.GetSpec().GetKubeService().GetRef()
			if ref.GetName() == "" || ref.GetNamespace() == "" {
				continue
			}
			dests = append(dests, keyed[*discoveryv1.Destination]{ObjectKey{Cluster: cluster, Namespace: ref.GetNamespace(), Name: ref.GetName()}, d})
		}
		for _, w := range in.GetWorkloads() {
			key := workloadKey(cluster, w)
			if key.Name == "" {
				continue
			}
			works = append(works, keyed[*discoveryv1.Workload]{key, w})
		}
	}
	dests, works = sortedUnique(dests), sortedUnique(works)
	ix.byKey = make(map[ObjectKey]*destination, len(dests))
	ix.destinations = make([]*destination, 0, len(dests))
	// One allocation for all destinations, and one for all their ports.
	allDests := make([]destination, len(dests))
	nports := 0
	for _, kd := range dests {
		nports += len(kd.v.GetSpec().GetKubeService().GetPorts())
	}
	allPorts := make([]uint32, 0, nports)
	for i, kd := range dests {
		key, d := kd.key, kd.v
		ks := d.GetSpec().GetKubeService()
		host := ks.GetHostname()
		if host == "" {
			host = key.Name + "." + key.Namespace + ".svc." + clusterDomain
		}
		dst := &allDests[i]
		*dst = destination{Key: key, Host: host, Labels: ks.GetLabels(), Selector: ks.GetWorkloadSelectorLabels(), Subsets: ks.GetSubsets(), PortInfo: ks.GetPorts(), Region: ks.GetRegion()}
		dst.Zone = singleZone(ks)
		from := len(allPorts)
		for _, p := range ks.GetPorts() {
			allPorts = append(allPorts, p.GetPort())
		}
		// Capped, so that an append copies rather than writing over the
		// next destination's ports.
		dst.Ports = allPorts[from:len(allPorts):len(allPorts)]
		for _, p := range ks.GetPorts() {
			if t := p.GetTargetPortNumber(); t != 0 {
				if dst.TargetPorts == nil {
					dst.TargetPorts = map[uint32]uint32{}
				}
				dst.TargetPorts[p.GetPort()] = t
			}
		}
		dst.Mesh = ix.meshOf(key.Cluster, d.GetSpec().GetMesh())
		ix.byKey[key] = dst
		ix.destinations = append(ix.destinations, dst)
	}
	ix.workloads = make([]*workload, 0, len(works))
	all := make([]workload, len(works)) // one allocation for all
	for i, kw := range works {
		k := kw.v.GetSpec().GetKubernetes()
		all[i] = workload{
			Key: kw.key, Labels: k.GetPodLabels(), ServiceAccount: k.GetServiceAccountName(),
			Mesh: ix.meshOf(kw.key.Cluster, kw.v.GetSpec().GetMesh()),
		}
		ix.workloads = append(ix.workloads, &all[i])
	}
	for _, d := range ix.destinations {
		ix.byCluster[d.Key.Cluster] = append(ix.byCluster[d.Key.Cluster], d)
		nk := [2]string{d.Key.Cluster, d.Key.Namespace}
		ix.byClusterNS[nk] = append(ix.byClusterNS[nk], d)
	}
	// Service accounts run a workload or two each, usually: their lists
	// start in room for two, taken from one array.
	ix.workloadsBySA = make(map[ObjectKey][]*workload, len(ix.workloads)/2)
	var room []*workload
	for _, w := range ix.workloads {
		nk := [2]string{w.Key.Cluster, w.Key.Namespace}
		ix.workloadsByNS[nk] = append(ix.workloadsByNS[nk], w)
		ix.workloadsByCluster[w.Key.Cluster] = append(ix.workloadsByCluster[w.Key.Cluster], w)
		if w.ServiceAccount != "" {
			sk := ObjectKey{Cluster: w.Key.Cluster, Namespace: w.Key.Namespace, Name: w.ServiceAccount}
			ws, ok := ix.workloadsBySA[sk]
			if !ok {
				if len(room) < 2 {
					room = make([]*workload, 2048)
				}
				ws, room = room[:0:2], room[2:]
			}
			ix.workloadsBySA[sk] = append(ws, w)
		}
	}
	return ix
}

// keyed is an entity of an input with its key.
type keyed[T proto.Message] struct {
	key ObjectKey
	v   T
}

// sortedUnique sorts entities by key and keeps one of each key: two
// entries for one object (an agent bug, or a resync race) are resolved by
// content, so that list order cannot change the result. Inputs are
// sorted already, and then nothing is moved.
func sortedUnique[T proto.Message](list []keyed[T]) []keyed[T] {
	sorted := true
	for i := 1; i < len(list) && sorted; i++ {
		sorted = list[i-1].key.compare(list[i].key) < 0
	}
	if sorted {
		return list
	}
	slices.SortStableFunc(list, func(a, b keyed[T]) int { return a.key.compare(b.key) })
	out := list[:0]
	for _, e := range list {
		if n := len(out); n > 0 && out[n-1].key == e.key {
			// The first of the least content wins, as it did in input
			// order.
			if compareContent(e.v, out[n-1].v) < 0 {
				out[n-1] = e
			}
			continue
		}
		out = append(out, e)
	}
	return out
}

// workloadsIn returns the workloads in any of clusters and any of
// namespaces, where an empty list means any, sorted by key.
func (ix *Index) workloadsIn(clusters, namespaces []string) []*workload {
	if len(clusters) == 0 {
		clusters = sortedKeys(ix.workloadsByCluster)
	} else {
		clusters = uniqueSorted(clusters)
	}
	var out []*workload
	for _, c := range clusters {
		if len(namespaces) == 0 {
			out = append(out, ix.workloadsByCluster[c]...)
			continue
		}
		for _, ns := range uniqueSorted(namespaces) {
			out = append(out, ix.workloadsByNS[[2]string{c, ns}]...)
		}
	}
	return out
}

// singleZone is the zone of every endpoint of a Service, or "" when they
// are in several zones or none is known.
func singleZone(ks *discoveryv1.DestinationSpec_KubeService) string {
	zone := ""
	for _, es := range ks.GetEndpointSubsets() {
		for _, ep := range es.GetEndpoints() {
			z := ep.GetSubLocality().GetZone()
			if z == "" || zone != "" && z != zone {
				return ""
			}
			zone = z
		}
	}
	return zone
}

func workloadKey(cluster string, w *discoveryv1.Workload) ObjectKey {
	md := w.GetMetadata()
	key := ObjectKey{Cluster: cluster, Namespace: md.GetNamespace(), Name: md.GetName()}
	if c := w.GetSpec().GetKubernetes().GetController(); key.Name == "" && c != nil {
		key.Namespace, key.Name = c.GetNamespace(), c.GetName()
	}
	return key
}

// Destination returns the destination with the given key.
func (ix *Index) destination(k ObjectKey) (*destination, bool) {
	d, ok := ix.byKey[k]
	return d, ok
}

// selectDestinations returns the destinations that a policy living in
// policyKey's cluster and namespace selects, sorted by key. An empty list
// selects every destination.
func (ix *Index) selectDestinations(selectors []*networkingv1.DestinationSelector, policy ObjectKey) []*destination {
	if len(selectors) == 0 {
		return ix.destinations
	}
	seen := map[ObjectKey]bool{}
	var out []*destination
	add := func(d *destination) {
		if !seen[d.Key] {
			seen[d.Key] = true
			out = append(out, d)
		}
	}
	for _, sel := range selectors {
		switch {
		case sel.GetKubeServiceRefs() != nil:
			for _, ref := range sel.GetKubeServiceRefs().GetServices() {
				if d, ok := ix.byKey[resolveRef(ref, policy)]; ok {
					add(d)
				}
			}
		default:
			m := sel.GetKubeServiceMatcher() // nil matches everything
			for _, d := range ix.candidates(m.GetClusters(), m.GetNamespaces()) {
				if matchDestination(m, d) {
					add(d)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b *destination) int { return a.Key.compare(b.Key) })
	return out
}

// missingServiceRefs are the warnings for the kubeServiceRefs entries of
// selectors, those of a policy living in policyKey's cluster and
// namespace, that name no discovered service. A missing service is not an
// error: it may be deployed, or its cluster may report, later, and the
// policy applies to it then.
func (ix *Index) missingServiceRefs(selectors []*networkingv1.DestinationSelector, policy ObjectKey) []string {
	var out []string
	for i, sel := range selectors {
		for j, ref := range sel.GetKubeServiceRefs().GetServices() {
			if k := resolveRef(ref, policy); ix.byKey[k] == nil {
				out = append(out, fmt.Sprintf("spec.destinationSelector[%d].kubeServiceRefs.services[%d]: service %s not found in cluster %q; the policy applies to it once it is discovered", i, j, k.Name+"."+k.Namespace, k.Cluster))
			}
		}
	}
	return out
}

// candidates narrows the destinations to scan by the matcher's clusters and
// namespaces, when it names them.
func (ix *Index) candidates(clusters, namespaces []string) []*destination {
	if len(clusters) == 0 {
		return ix.destinations
	}
	var out []*destination
	for _, c := range uniqueSorted(clusters) {
		if len(namespaces) == 0 {
			out = append(out, ix.byCluster[c]...)
			continue
		}
		for _, ns := range uniqueSorted(namespaces) {
			out = append(out, ix.byClusterNS[[2]string{c, ns}]...)
		}
	}
	return out
}

// resolveRef fills the defaults of a reference made by a policy: the
// policy's cluster and namespace.
func resolveRef(ref *commonv1.ClusterObjectRef, policy ObjectKey) ObjectKey {
	k := ObjectKey{Cluster: ref.GetCluster(), Namespace: ref.GetNamespace(), Name: ref.GetName()}
	if k.Cluster == "" {
		k.Cluster = policy.Cluster
	}
	if k.Namespace == "" {
		k.Namespace = policy.Namespace
	}
	return k
}

func matchDestination(m *networkingv1.DestinationSelector_KubeServiceMatcher, d *destination) bool {
	return containsOrEmpty(m.GetClusters(), d.Key.Cluster) &&
		containsOrEmpty(m.GetNamespaces(), d.Key.Namespace) &&
		labelsMatch(m.GetLabels(), d.Labels)
}

// selectWorkloads returns the workloads that any of the selectors matches,
// sorted by key.
func (ix *Index) selectWorkloads(selectors []*networkingv1.WorkloadSelector) []*workload {
	var out []*workload
	for _, w := range ix.workloads {
		for _, sel := range selectors {
			if matchWorkload(sel.GetKubeWorkloadMatcher(), w) {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

func matchWorkload(m *networkingv1.WorkloadSelector_KubeWorkloadMatcher, w *workload) bool {
	return containsOrEmpty(m.GetClusters(), w.Key.Cluster) &&
		containsOrEmpty(m.GetNamespaces(), w.Key.Namespace) &&
		labelsMatch(m.GetLabels(), w.Labels)
}

// backingWorkloads finds the workloads behind destinations, remembering
// them: every traffic shift to a subset asks for its destination's. It is
// not safe for concurrent use; the workloads of the index must not change.
type backingWorkloads struct {
	ix     *Index
	byDest map[*destination][]*workload
	// The workloads of a namespace by the value of one label, for a
	// (cluster, namespace, label).
	byLabel map[[3]string]map[string][]*workload
}

// of returns the workloads in d's namespace that d's selector selects,
// in key order; none when it selects nothing.
func (b *backingWorkloads) of(d *destination) []*workload {
	if ws, ok := b.byDest[d]; ok {
		return ws
	}
	var ws []*workload
	if len(d.Selector) > 0 {
		// Those with the selector's first label are the candidates.
		key := slices.Min(slices.Collect(maps.Keys(d.Selector)))
		ik := [3]string{d.Key.Cluster, d.Key.Namespace, key}
		idx, ok := b.byLabel[ik]
		if !ok {
			idx = map[string][]*workload{}
			for _, w := range b.ix.workloadsByNS[[2]string{d.Key.Cluster, d.Key.Namespace}] {
				if v, ok := w.Labels[key]; ok {
					idx[v] = append(idx[v], w)
				}
			}
			if b.byLabel == nil {
				b.byLabel = map[[3]string]map[string][]*workload{}
			}
			b.byLabel[ik] = idx
		}
		for _, w := range idx[d.Selector[key]] {
			if labelsMatch(d.Selector, w.Labels) {
				ws = append(ws, w)
			}
		}
	}
	if b.byDest == nil {
		b.byDest = map[*destination][]*workload{}
	}
	b.byDest[d] = ws
	return ws
}

// hasSubset says whether some workload behind d carries every label of
// subset, or, when no workload is known, whether discovery reported each
// label value among d's subsets.
func (b *backingWorkloads) hasSubset(d *destination, subset map[string]string) bool {
	backing := b.of(d)
	for _, w := range backing {
		if labelsMatch(subset, w.Labels) {
			return true
		}
	}
	if len(backing) > 0 || len(d.Subsets) == 0 {
		return false
	}
	for k, v := range subset {
		if !slices.Contains(d.Subsets[k].GetValues(), v) {
			return false
		}
	}
	return true
}

// labelsMatch says whether have holds every label of want.
func labelsMatch(want, have map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

func containsOrEmpty(list []string, s string) bool {
	return len(list) == 0 || slices.Contains(list, s)
}

func uniqueSorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// clusterRegion is the region of a cluster: the first region its
// destinations report (the region of a cluster's nodes), or "" when none
// does.
func (ix *Index) clusterRegion(cluster string) string {
	for _, d := range ix.byCluster[cluster] {
		if d.Region != "" {
			return d.Region
		}
	}
	return ""
}
