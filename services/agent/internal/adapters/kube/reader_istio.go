package kube

import (
	"fmt"

	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// istioKinds are the Istio objects read for conflict detection: a user's
// VirtualService or DestinationRule for a host Meshplane also configures.
var istioKinds = []struct {
	kind string
	gvr  schema.GroupVersionResource
}{
	{domain.KindVirtualService, schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}},
	{domain.KindDestinationRule, schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}},
}

type istioInformer struct {
	kind   string
	lister cache.GenericLister
}

// watchIstio starts informers on the Istio kinds the cluster serves. Their
// caches hold only names, the managed-by label, hosts and exportTo (see
// slimIstioObject). A cluster without Istio's CRDs has no user objects; a
// CRD installed later is picked up when the agent restarts.
func (r *Reader) watchIstio(kc kubernetes.Interface) error {
	for _, k := range istioKinds {
		served, err := isServed(kc, k.gvr)
		if err != nil {
			return err
		}
		if !served {
			r.log.Info("Istio resource is not served by this cluster; user Istio objects of this kind are not discovered", "resource", k.gvr.String())
			continue
		}
		gi := r.dyn.ForResource(k.gvr)
		if err := gi.Informer().SetTransform(transformIstio); err != nil {
			return fmt.Errorf("transform %s: %w", k.gvr, err)
		}
		if _, err := gi.Informer().AddEventHandler(r.handler); err != nil {
			return fmt.Errorf("watch %s: %w", k.gvr, err)
		}
		r.synced = append(r.synced, gi.Informer().HasSynced)
		r.istio = append(r.istio, istioInformer{kind: k.kind, lister: gi.Lister()})
	}
	return nil
}

// discoverIstio lists the cached Istio objects.
func (r *Reader) discoverIstio() ([]domain.IstioObject, error) {
	var out []domain.IstioObject
	for _, inf := range r.istio {
		objs, err := inf.lister.List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", inf.kind, err)
		}
		for _, o := range objs {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			obj := domain.IstioObject{Kind: inf.kind, Namespace: u.GetNamespace(), Name: u.GetName(), ManagedBy: u.GetLabels()[snapshots.LabelManagedBy]}
			obj.Hosts, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "hosts")
			if h, ok, _ := unstructured.NestedString(u.Object, "spec", "host"); ok && h != "" {
				obj.Hosts = append(obj.Hosts, h)
			}
			obj.ExportTo, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "exportTo")
			out = append(out, obj)
		}
	}
	return out, nil
}
