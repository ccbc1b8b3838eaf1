package domain

import (
	"cmp"
	"fmt"
	"slices"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
)

// workload is the sidecar-injected pods of one top controller.
type workload struct {
	namespace  string
	controller OwnerRef
	pods       []*Pod
	labels     map[string]string
	mesh       *controlPlane
}

// groupWorkloads groups the in-scope sidecar pods by top controller. pods
// is sorted by namespace and name.
func (ix *index) groupWorkloads(pods []*Pod) []*workload {
	type key struct {
		namespace string
		top       OwnerRef
	}
	byKey := map[key]*workload{}
	var out []*workload
	for _, p := range pods {
		if !p.Sidecar || !ix.inScope(p.Namespace) {
			continue
		}
		k := key{p.Namespace, ix.topController(p)}
		w := byKey[k]
		if w == nil {
			w = &workload{namespace: p.Namespace, controller: k.top}
			byKey[k] = w
			out = append(out, w)
		}
		w.pods = append(w.pods, p)
		ix.ofPod[p] = w
	}
	for _, w := range out {
		w.labels = commonLabels(w.pods)
		w.mesh = ix.byRev[ix.podRevision(w.pods[0])]
	}
	slices.SortFunc(out, func(a, b *workload) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace),
			cmp.Compare(a.controller.Name, b.controller.Name), cmp.Compare(a.controller.Kind, b.controller.Kind))
	})
	return out
}

func (ix *index) workloadProtos() []*discoveryv1.Workload {
	out := make([]*discoveryv1.Workload, 0, len(ix.workloads))
	for _, w := range ix.workloads {
		var ready uint32
		for _, p := range w.pods {
			if p.Ready {
				ready++
			}
		}
		spec := &discoveryv1.WorkloadSpec{
			Type: &discoveryv1.WorkloadSpec_Kubernetes_{Kubernetes: &discoveryv1.WorkloadSpec_Kubernetes{
				Controller:         &commonv1.ClusterObjectRef{Name: w.controller.Name, Namespace: w.namespace, Cluster: ix.id.Cluster},
				ControllerKind:     w.controller.Kind,
				PodLabels:          w.labels,
				ServiceAccountName: w.pods[0].ServiceAccount,
				ReadyPods:          ready,
			}},
		}
		if w.mesh != nil {
			spec.Mesh = w.mesh.ref(ix.id.Cluster)
		}
		out = append(out, &discoveryv1.Workload{
			Metadata: &commonv1.ObjectMeta{
				Name:      fmt.Sprintf("%s-%s-%s", w.controller.Name, w.namespace, ix.id.Cluster),
				Namespace: w.namespace,
				Cluster:   ix.id.Cluster,
			},
			Spec: spec,
		})
	}
	return out
}
