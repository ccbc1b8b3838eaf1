package domain

import (
	"cmp"
	"slices"
	"strings"
)

// perPodLabels differ between the pods of one controller; they say nothing
// about the workload.
var perPodLabels = []string{
	"pod-template-hash", "controller-revision-hash", "pod-template-generation",
	"statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index",
}

type nsName struct{ namespace, name string }

// index holds the lookups that building a snapshot needs, computed once.
type index struct {
	id     Identity
	opts   Options
	d      Discovered
	region string

	nsLabels map[string]map[string]string
	nodes    map[string]*Node
	rsOwner  map[nsName]OwnerRef
	pods     map[nsName]*Pod
	// byLabel maps a namespace and "key=value" to the pods that carry the
	// pair, so that a selector is matched against few pods.
	byLabel map[string]map[string][]*Pod

	planes    []*controlPlane
	byRev     map[string]*controlPlane
	workloads []*workload
	ofPod     map[*Pod]*workload
}

func newIndex(id Identity, d Discovered) *index {
	ix := &index{
		id: id, opts: d.Options.withDefaults(), d: d,
		nsLabels: make(map[string]map[string]string, len(d.Namespaces)),
		nodes:    make(map[string]*Node, len(d.Nodes)),
		rsOwner:  make(map[nsName]OwnerRef, len(d.ReplicaSets)),
		pods:     make(map[nsName]*Pod, len(d.Pods)),
		byLabel:  map[string]map[string][]*Pod{},
		byRev:    map[string]*controlPlane{},
		ofPod:    map[*Pod]*workload{},
	}
	for _, ns := range d.Namespaces {
		ix.nsLabels[ns.Name] = ns.Labels
	}
	for i := range d.Nodes {
		ix.nodes[d.Nodes[i].Name] = &d.Nodes[i]
	}
	ix.region = clusterRegion(d.Nodes)
	for _, rs := range d.ReplicaSets {
		ix.rsOwner[nsName{rs.Namespace, rs.Name}] = rs.Controller
	}
	pods := make([]*Pod, len(d.Pods))
	for i := range d.Pods {
		pods[i] = &d.Pods[i]
	}
	slices.SortFunc(pods, func(a, b *Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, p := range pods {
		ix.pods[nsName{p.Namespace, p.Name}] = p
		m := ix.byLabel[p.Namespace]
		if m == nil {
			m = map[string][]*Pod{}
			ix.byLabel[p.Namespace] = m
		}
		for k, v := range p.Labels {
			m[k+"="+v] = append(m[k+"="+v], p)
		}
	}
	ix.planes = ix.controlPlanes(pods)
	for _, cp := range ix.planes {
		if _, dup := ix.byRev[cp.revision]; !dup {
			ix.byRev[cp.revision] = cp
		}
	}
	ix.workloads = ix.groupWorkloads(pods)
	return ix
}

// inScope applies the namespace filter, which the adapter evaluated for
// every namespace it passed.
func (ix *index) inScope(ns string) bool {
	return ix.d.InScope == nil || ix.d.InScope[ns]
}

// selected returns the pods in ns whose labels satisfy selector, sorted by
// name.
func (ix *index) selected(ns string, selector map[string]string) []*Pod {
	if len(selector) == 0 {
		return nil
	}
	m := ix.byLabel[ns]
	var candidates []*Pod
	first := true
	for k, v := range selector {
		c := m[k+"="+v]
		if first || len(c) < len(candidates) {
			candidates, first = c, false
		}
	}
	var out []*Pod
	for _, p := range candidates {
		if matches(selector, p.Labels) {
			out = append(out, p)
		}
	}
	return out
}

// topController follows a pod's ownership up to the object users manage.
func (ix *index) topController(p *Pod) OwnerRef {
	c := p.Controller
	switch {
	case c.Kind == "":
		return OwnerRef{Kind: "Pod", Name: p.Name}
	case c.Kind == "ReplicaSet":
		if o, ok := ix.rsOwner[nsName{p.Namespace, c.Name}]; ok {
			if o.Kind != "" {
				return o
			}
			return c
		}
		// The ReplicaSet is not in the cache yet; a Deployment names its
		// ReplicaSets "<deployment>-<pod-template-hash>".
		if h := p.Labels["pod-template-hash"]; h != "" {
			if name, ok := strings.CutSuffix(c.Name, "-"+h); ok {
				return OwnerRef{Kind: "Deployment", Name: name}
			}
		}
	}
	return c
}

// podRevision is the Istio revision a pod's sidecar belongs to: the one the
// injector recorded, else the revision labels of the pod and its
// namespace, else the default revision ("").
func (ix *index) podRevision(p *Pod) string {
	if p.SidecarRevision != "" {
		return normalizeRevision(p.SidecarRevision)
	}
	if r, ok := p.Labels[LabelRevision]; ok {
		return normalizeRevision(r)
	}
	if r, ok := ix.nsLabels[p.Namespace][LabelRevision]; ok {
		return normalizeRevision(r)
	}
	return ""
}

func normalizeRevision(r string) string {
	if r == defaultRevisionLabel {
		return ""
	}
	return r
}

// clusterRegion is the region most nodes are in; ties go to the first
// name, so that the result does not depend on list order.
func clusterRegion(nodes []Node) string {
	counts := map[string]int{}
	for _, n := range nodes {
		r := n.Labels[LabelRegion]
		if r == "" {
			r = n.Labels["failure-domain.beta.kubernetes.io/region"]
		}
		if r != "" {
			counts[r]++
		}
	}
	best := ""
	for r, c := range counts {
		if c > counts[best] || (c == counts[best] && r < best) {
			best = r
		}
	}
	return best
}

// commonLabels returns the labels that every pod carries with the same
// value, less the per-pod ones.
func commonLabels(pods []*Pod) map[string]string {
	if len(pods) == 0 {
		return nil
	}
	out := cloneLabels(pods[0].Labels)
	for _, p := range pods[1:] {
		for k, v := range out {
			if w, ok := p.Labels[k]; !ok || w != v {
				delete(out, k)
			}
		}
	}
	for _, k := range perPodLabels {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func podLabels(p *Pod) map[string]string {
	return commonLabels([]*Pod{p})
}
