package kube

import (
	"slices"

	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/discovery"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discov1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The informers' transforms keep only what discovery reads, so that the
// caches of a large cluster stay small: a full Pod is several kilobytes, a
// cachedPod a few hundred bytes.

// slimMeta keeps the identity, labels and controller of an object.
func slimMeta(m metav1.ObjectMeta, keepLabels bool) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, DeletionTimestamp: m.DeletionTimestamp,
	}
	if keepLabels {
		out.Labels = m.Labels
	}
	if c := metav1.GetControllerOfNoCopy(&m); c != nil {
		out.OwnerReferences = []metav1.OwnerReference{{Kind: c.Kind, Name: c.Name, Controller: c.Controller, APIVersion: c.APIVersion, UID: c.UID}}
	}
	return out
}

func transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return slimPod(o), nil
	case *corev1.Service:
		o.ManagedFields = nil
		o.Annotations = keep(o.Annotations, domain.AnnotationDiscover)
		return o, nil
	case *appsv1.Deployment:
		return slimDeployment(o), nil
	case *corev1.ConfigMap:
		return slimConfigMap(o), nil
	case *corev1.Node:
		return slimNode(o), nil
	case *discov1.EndpointSlice:
		return slimEndpointSlice(o), nil
	case *metav1.PartialObjectMetadata:
		// Namespaces (cluster-scoped) are read for their labels,
		// ReplicaSets only for their controller.
		o.ObjectMeta = slimMeta(o.ObjectMeta, o.Namespace == "")
		return o, nil
	case *unstructured.Unstructured:
		o.SetManagedFields(nil)
		ann := o.GetAnnotations()
		delete(ann, corev1.LastAppliedConfigAnnotation)
		o.SetAnnotations(ann)
		unstructured.RemoveNestedField(o.Object, "status")
		return o, nil
	}
	return obj, nil
}

func keep(m map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// cachedPod is what the pod cache holds instead of a Pod: a corev1.Pod is
// more than a kilobyte even when empty, and pods are most of a cluster.
// Pod holds what discovery.Pod read from it when it was cached.
type cachedPod struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Phase corev1.PodPhase
	Pod   domain.Pod
}

var _ runtime.Object = (*cachedPod)(nil)

func (p *cachedPod) DeepCopyObject() runtime.Object {
	c := *p
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Pod.Labels = c.Labels
	return &c
}

func slimPod(p *corev1.Pod) *cachedPod {
	out := &cachedPod{ObjectMeta: slimMeta(p.ObjectMeta, true), Phase: p.Status.Phase, Pod: discovery.Pod(p)}
	// The metadata is the cached ObjectMeta's; toPod puts it back.
	out.Pod.Name, out.Pod.Namespace, out.Pod.Labels, out.Pod.Controller = "", "", nil, domain.OwnerRef{}
	return out
}

func slimDeployment(d *appsv1.Deployment) *appsv1.Deployment {
	if !discovery.MayBeIstiod(d) {
		return &appsv1.Deployment{ObjectMeta: slimMeta(d.ObjectMeta, false)}
	}
	out := &appsv1.Deployment{ObjectMeta: slimMeta(d.ObjectMeta, true)}
	out.Spec.Template.Labels = d.Spec.Template.Labels
	out.Spec.Template.Spec.ServiceAccountName = d.Spec.Template.Spec.ServiceAccountName
	for _, c := range d.Spec.Template.Spec.Containers {
		out.Spec.Template.Spec.Containers = append(out.Spec.Template.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	return out
}

func slimConfigMap(c *corev1.ConfigMap) *corev1.ConfigMap {
	out := &corev1.ConfigMap{ObjectMeta: slimMeta(c.ObjectMeta, false)}
	if discovery.IsMeshConfig(c.Name) {
		if m, ok := c.Data["mesh"]; ok {
			out.Data = map[string]string{"mesh": m}
		}
	}
	return out
}

var nodeLabels = []string{
	domain.LabelRegion, domain.LabelZone, domain.LabelSubzone,
	"failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
}

func slimNode(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{ObjectMeta: slimMeta(n.ObjectMeta, false)}
	out.Labels = keep(n.Labels, nodeLabels...)
	for _, a := range n.Status.Addresses {
		if slices.Contains(discovery.NodeAddressTypes, a.Type) {
			out.Status.Addresses = append(out.Status.Addresses, a)
		}
	}
	return out
}

func slimEndpointSlice(es *discov1.EndpointSlice) *discov1.EndpointSlice {
	out := &discov1.EndpointSlice{ObjectMeta: slimMeta(es.ObjectMeta, false), AddressType: es.AddressType, Ports: es.Ports}
	out.Labels = keep(es.Labels, discov1.LabelServiceName)
	out.OwnerReferences = nil
	out.Endpoints = make([]discov1.Endpoint, 0, len(es.Endpoints))
	for _, e := range es.Endpoints {
		se := discov1.Endpoint{Addresses: e.Addresses, NodeName: e.NodeName, Zone: e.Zone, Conditions: discov1.EndpointConditions{Ready: e.Conditions.Ready}}
		if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
			se.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: e.TargetRef.Name}
		}
		out.Endpoints = append(out.Endpoints, se)
	}
	return out
}

// transformIstio keeps of an Istio VirtualService or DestinationRule what
// conflict detection reads: its name, the managed-by label, and the hosts
// and exportTo of its spec. Routes and traffic policies can be large.
func transformIstio(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	return slimIstioObject(u), nil
}

func slimIstioObject(u *unstructured.Unstructured) *unstructured.Unstructured {
	md := map[string]any{"name": u.GetName(), "namespace": u.GetNamespace(), "resourceVersion": u.GetResourceVersion()}
	if v, ok := u.GetLabels()[snapshots.LabelManagedBy]; ok {
		md["labels"] = map[string]any{snapshots.LabelManagedBy: v}
	}
	spec := map[string]any{}
	for _, f := range []string{"hosts", "host", "exportTo"} {
		if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", f); ok {
			spec[f] = v
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": md, "spec": spec,
	}}
}
