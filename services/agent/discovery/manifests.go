package discovery

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discov1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// Identity and Options are the domain's, named here so that callers
// outside the agent (meshctl) can fill them.
type (
	Identity = domain.Identity
	Options  = domain.Options
)

// Manifest is one Kubernetes object as JSON.
type Manifest struct {
	// Where names the file and document it was read from, for messages.
	Where string
	JSON  []byte
}

// Pod-injection labels and annotations that the offline injector reads.
const (
	labelInjection  = "istio-injection"
	labelInject     = "sidecar.istio.io/inject"
	annotationProxy = "sidecar.istio.io/inject"
)

// FromManifests discovers one cluster from its objects, with the rules
// the agent runs on its API server, and returns the discovered part of an
// input snapshot (meshes, workloads, destinations, user Istio objects) and the manifests it
// does not read (other kinds, ConfigMaps other than Istio's mesh config),
// as "where: Kind namespace/name (apiVersion)".
//
// It reads Services, Pods, Deployments, ReplicaSets, StatefulSets,
// DaemonSets, EndpointSlices, ConfigMaps (Istio's mesh config), Nodes and
// Namespaces, and the users' Istio VirtualServices and DestinationRules
// (the snapshot's userIstioObjects, which translation checks its own
// objects against; those labelled meshplane.dev/managed-by with the
// install are Meshplane's and left out, as the agent leaves them out). Manifests hold what users apply, not what the API server
// makes of it, so when they hold no Pod at all, each Deployment,
// StatefulSet, DaemonSet and ReplicaSet without a controller stands for the
// pods it would create (spec.replicas of them, one per Node for a
// DaemonSet), ready, with Istio's sidecar when the injector would add it
// (see injected). When they hold Pods (a dump of a live cluster), only
// those are read.
func FromManifests(id Identity, opts Options, manifests []Manifest) (*snapshotv1.InputSnapshot, []string, error) {
	d := domain.Discovered{Options: opts}
	var (
		skipped   []string
		templates []podTemplate
		nsLabels  = map[string]map[string]string{}
		nodes     int
	)
	for _, m := range manifests {
		obj, what, err := decodeManifest(m)
		if err != nil {
			return nil, nil, err
		}
		switch o := obj.(type) {
		case *corev1.Service:
			if !IsSystemService(o) {
				d.Services = append(d.Services, Service(o))
			}
		case *corev1.Pod:
			if o.Status.Phase != corev1.PodSucceeded && o.Status.Phase != corev1.PodFailed {
				d.Pods = append(d.Pods, Pod(o))
			}
		case *appsv1.Deployment:
			if MayBeIstiod(o) {
				d.Deployments = append(d.Deployments, Deployment(o))
			}
			templates = append(templates, podTemplate{o.ObjectMeta, "Deployment", o.Spec.Replicas, o.Spec.Template})
		case *appsv1.StatefulSet:
			templates = append(templates, podTemplate{o.ObjectMeta, "StatefulSet", o.Spec.Replicas, o.Spec.Template})
		case *appsv1.DaemonSet:
			templates = append(templates, podTemplate{o.ObjectMeta, "DaemonSet", nil, o.Spec.Template})
		case *appsv1.ReplicaSet:
			d.ReplicaSets = append(d.ReplicaSets, domain.ReplicaSet{Name: o.Name, Namespace: o.Namespace, Controller: ControllerOf(&o.ObjectMeta)})
			if metav1.GetControllerOfNoCopy(&o.ObjectMeta) == nil {
				templates = append(templates, podTemplate{o.ObjectMeta, "ReplicaSet", o.Spec.Replicas, o.Spec.Template})
			}
		case *discov1.EndpointSlice:
			d.EndpointSlices = append(d.EndpointSlices, EndpointSlice(o))
		case *corev1.ConfigMap:
			if _, ok := o.Data["mesh"]; !ok || !IsMeshConfig(o.Name) {
				skipped = append(skipped, m.Where+": "+what)
				continue
			}
			mc, err := MeshConfig(o)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %s: field data.mesh: %w", m.Where, what, err)
			}
			d.MeshConfigs = append(d.MeshConfigs, mc)
		case *corev1.Node:
			d.Nodes = append(d.Nodes, Node(o))
			nodes++
		case *corev1.Namespace:
			d.Namespaces = append(d.Namespaces, domain.Namespace{Name: o.Name, Labels: o.Labels})
			nsLabels[o.Name] = o.Labels
		case *unstructured.Unstructured:
			d.IstioObjects = append(d.IstioObjects, IstioObject(o.GetKind(), o))
		default:
			skipped = append(skipped, m.Where+": "+what)
		}
	}
	if len(d.Pods) == 0 {
		for _, t := range templates {
			d.Pods = append(d.Pods, t.pods(nsLabels[t.meta.Namespace], nodes)...)
		}
	}
	s := domain.BuildInputSnapshot(id, d)
	return &snapshotv1.InputSnapshot{
		Cluster: s.GetCluster(), Meshes: s.GetMeshes(), Workloads: s.GetWorkloads(), Destinations: s.GetDestinations(),
		UserIstioObjects: s.GetUserIstioObjects(),
	}, skipped, nil
}

// decodeManifest decodes the kinds FromManifests reads into their typed
// objects; any other kind is returned as nil with no error.
func decodeManifest(m Manifest) (runtime.Object, string, error) {
	var probe struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(m.JSON, &probe); err != nil {
		return nil, "", fmt.Errorf("%s: %w", m.Where, err)
	}
	id := probe.Kind + " " + probe.Metadata.Name
	if probe.Metadata.Namespace != "" {
		id = probe.Kind + " " + probe.Metadata.Namespace + "/" + probe.Metadata.Name
	}
	id += " (" + probe.APIVersion + ")"
	group, _, _ := strings.Cut(probe.APIVersion, "/")
	if group == istioGroup && (probe.Kind == domain.KindVirtualService || probe.Kind == domain.KindDestinationRule) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(m.JSON); err != nil {
			return nil, "", fmt.Errorf("%s: %s: %w", m.Where, id, err)
		}
		if u.GetNamespace() == "" {
			u.SetNamespace(metav1.NamespaceDefault)
		}
		return u, id, nil
	}
	if !readKinds[probe.APIVersion+", "+probe.Kind] {
		return nil, id, nil
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(m.JSON, nil, nil)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %s: %w", m.Where, id, err)
	}
	if mo, ok := obj.(metav1.Object); ok && mo.GetNamespace() == "" && probe.Kind != "Node" && probe.Kind != "Namespace" {
		// kubectl applies a manifest without a namespace to "default".
		mo.SetNamespace(metav1.NamespaceDefault)
	}
	return obj, id, nil
}

// istioGroup holds the Istio kinds read for conflict checks, in any of
// its versions (v1, v1beta1, v1alpha3), as the agent reads them.
const istioGroup = "networking.istio.io"

var readKinds = map[string]bool{
	"v1, Service": true, "v1, Pod": true, "v1, ConfigMap": true, "v1, Node": true, "v1, Namespace": true,
	"apps/v1, Deployment": true, "apps/v1, StatefulSet": true, "apps/v1, DaemonSet": true, "apps/v1, ReplicaSet": true,
	"discovery.k8s.io/v1, EndpointSlice": true,
}

// podTemplate is a controller whose pods the manifests stand for.
type podTemplate struct {
	meta     metav1.ObjectMeta
	kind     string
	replicas *int32
	template corev1.PodTemplateSpec
}

func (t podTemplate) pods(nsLabels map[string]string, nodes int) []domain.Pod {
	n := 1
	switch {
	case t.kind == "DaemonSet":
		n = max(nodes, 1)
	case t.replicas != nil:
		n = int(*t.replicas)
	}
	out := make([]domain.Pod, 0, n)
	for i := range n {
		p := &corev1.Pod{ObjectMeta: *t.template.ObjectMeta.DeepCopy(), Spec: t.template.Spec}
		p.Name, p.Namespace = t.meta.Name+"-"+strconv.Itoa(i), t.meta.Namespace
		p.OwnerReferences = []metav1.OwnerReference{{Kind: t.kind, Name: t.meta.Name, Controller: new(true)}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		dp := Pod(p)
		if !dp.Sidecar {
			dp.Sidecar, dp.SidecarRevision = injected(nsLabels, p.Labels, p.Annotations)
		}
		out = append(out, dp)
	}
	return out
}

// injected says whether Istio's sidecar injector would add a sidecar to a
// pod with these labels and annotations in a namespace with these labels,
// and of which revision ("" for the default one): the pod's
// sidecar.istio.io/inject label (or annotation) "false" or the namespace's
// istio-injection=disabled refuse it; the namespace's istio-injection=enabled
// or istio.io/rev, the pod's istio.io/rev, or the pod's
// sidecar.istio.io/inject=true ask for it.
func injected(nsLabels, labels, annotations map[string]string) (bool, string) {
	if labels[labelInject] == "false" || annotations[annotationProxy] == "false" || nsLabels[labelInjection] == "disabled" {
		return false, ""
	}
	if r, ok := labels[domain.LabelRevision]; ok {
		return true, r
	}
	if nsLabels[labelInjection] == "enabled" {
		return true, ""
	}
	if r, ok := nsLabels[domain.LabelRevision]; ok {
		return true, r
	}
	return labels[labelInject] == "true", ""
}
