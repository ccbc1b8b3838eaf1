// Package discovery is the agent's discovery as a library. It converts
// Kubernetes API objects into the inputs of the discovery domain
// (internal/domain), for the kube adapter's informers and for offline runs
// on manifests (FromManifests, which `meshctl render` calls), so that both
// run the same rules on the same conversions.
package discovery

import (
	"encoding/json"
	"strings"

	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discov1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// ControllerOf names an object's controller; empty when it has none.
func ControllerOf(m *metav1.ObjectMeta) domain.OwnerRef {
	if c := metav1.GetControllerOfNoCopy(m); c != nil {
		return domain.OwnerRef{Kind: c.Kind, Name: c.Name}
	}
	return domain.OwnerRef{}
}

// Service converts a Service.
func Service(s *corev1.Service) domain.Service {
	out := domain.Service{
		Name: s.Name, Namespace: s.Namespace, Labels: s.Labels, Selector: s.Spec.Selector, Type: string(s.Spec.Type),
		Discover: s.Annotations[domain.AnnotationDiscover], ExternalIPs: s.Spec.ExternalIPs,
	}
	if out.Type == "" {
		out.Type = string(corev1.ServiceTypeClusterIP)
	}
	for _, p := range s.Spec.Ports {
		sp := domain.ServicePort{Name: p.Name, Port: uint32(p.Port), Protocol: string(p.Protocol), NodePort: uint32(p.NodePort)}
		if p.AppProtocol != nil {
			sp.AppProtocol = *p.AppProtocol
		}
		if p.TargetPort.StrVal != "" {
			sp.TargetName = p.TargetPort.StrVal
		} else {
			sp.TargetPort = uint32(p.TargetPort.IntVal)
		}
		out.Ports = append(out.Ports, sp)
	}
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out.LoadBalancer = append(out.LoadBalancer, in.IP)
		} else if in.Hostname != "" {
			out.LoadBalancer = append(out.LoadBalancer, in.Hostname)
		}
	}
	return out
}

// IsSystemService says whether s is the API server's own Service, which
// discovery leaves out.
func IsSystemService(s *corev1.Service) bool {
	return s.Namespace == metav1.NamespaceDefault && s.Name == "kubernetes"
}

// Pod converts a Pod.
func Pod(p *corev1.Pod) domain.Pod {
	out := domain.Pod{
		Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, ServiceAccount: p.Spec.ServiceAccountName,
		Controller: ControllerOf(&p.ObjectMeta), NodeName: p.Spec.NodeName, IP: p.Status.PodIP,
		SidecarRevision: sidecarRevision(p.Annotations[domain.AnnotationSidecar]),
	}
	if out.ServiceAccount == "" {
		out.ServiceAccount = "default"
	}
	containers := make([]domain.Container, 0, len(p.Spec.Containers)+len(p.Spec.InitContainers))
	for _, c := range p.Spec.Containers {
		containers = append(containers, domain.Container{Name: c.Name, Image: c.Image})
	}
	for _, c := range p.Spec.InitContainers {
		restartAlways := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		containers = append(containers, domain.Container{Name: c.Name, Image: c.Image, Init: true, RestartAlways: restartAlways})
	}
	_, injected := p.Annotations[domain.AnnotationSidecar]
	out.Sidecar = domain.HasSidecar(containers, injected)
	out.DiscoveryImage = domain.PodIstiodImage(p.Labels, containers)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			out.Ready = p.DeletionTimestamp == nil
		}
	}
	return out
}

// sidecarRevision reads the revision from the injector's status annotation.
func sidecarRevision(status string) string {
	if status == "" {
		return ""
	}
	var s struct {
		Revision string `json:"revision"`
	}
	if json.Unmarshal([]byte(status), &s) != nil {
		return ""
	}
	return s.Revision
}

// MayBeIstiod says whether a Deployment may be istiod; the domain decides,
// but the adapter caches every other Deployment as a name only.
func MayBeIstiod(d *appsv1.Deployment) bool {
	return domain.IsIstiod(d.Name, d.Spec.Template.Labels) || d.Labels["app"] == "istiod"
}

// Deployment converts a Deployment.
func Deployment(d *appsv1.Deployment) domain.Deployment {
	out := domain.Deployment{
		Name: d.Name, Namespace: d.Namespace, Labels: d.Labels, PodLabels: d.Spec.Template.Labels,
		ServiceAccount: d.Spec.Template.Spec.ServiceAccountName,
	}
	containers := make([]domain.Container, 0, len(d.Spec.Template.Spec.Containers))
	for _, c := range d.Spec.Template.Spec.Containers {
		containers = append(containers, domain.Container{Name: c.Name, Image: c.Image})
	}
	out.DiscoveryImage = domain.IstiodImage(containers)
	return out
}

// IsMeshConfig says whether a ConfigMap name is that of an Istio mesh
// config: istio, or istio-<revision>.
func IsMeshConfig(name string) bool {
	return name == "istio" || strings.HasPrefix(name, "istio-")
}

// MeshConfig parses the "mesh" key of an Istio mesh config ConfigMap. A
// ConfigMap that does not parse gives the defaults, as it does to istiod.
func MeshConfig(c *corev1.ConfigMap) (domain.MeshConfig, error) {
	out := domain.MeshConfig{Name: c.Name, Namespace: c.Namespace}
	var mc struct {
		TrustDomain   string `json:"trustDomain"`
		DefaultConfig struct {
			ProxyMetadata map[string]string `json:"proxyMetadata"`
		} `json:"defaultConfig"`
	}
	if err := yaml.Unmarshal([]byte(c.Data["mesh"]), &mc); err != nil {
		return out, err
	}
	out.TrustDomain = mc.TrustDomain
	out.DNSCapture = mc.DefaultConfig.ProxyMetadata["ISTIO_META_DNS_CAPTURE"] == "true"
	return out, nil
}

// Node converts a Node: its locality labels and its first address of each
// type that gateway addresses use.
func Node(n *corev1.Node) domain.Node {
	out := domain.Node{Name: n.Name, Labels: n.Labels}
	for _, a := range n.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP:
			if out.InternalIP == "" {
				out.InternalIP = a.Address
			}
		case corev1.NodeExternalIP:
			if out.ExternalIP == "" {
				out.ExternalIP = a.Address
			}
		case corev1.NodeExternalDNS:
			if out.ExternalDNS == "" {
				out.ExternalDNS = a.Address
			}
		}
	}
	return out
}

// NodeAddressTypes are the node address types that Node reads.
var NodeAddressTypes = []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeExternalDNS}

// EndpointSlice converts an EndpointSlice.
func EndpointSlice(es *discov1.EndpointSlice) domain.EndpointSlice {
	out := domain.EndpointSlice{Name: es.Name, Namespace: es.Namespace, Service: es.Labels[discov1.LabelServiceName]}
	for _, p := range es.Ports {
		ep := domain.EndpointPort{}
		if p.Name != nil {
			ep.Name = *p.Name
		}
		if p.Port != nil {
			ep.Port = uint32(*p.Port)
		}
		if p.Protocol != nil {
			ep.Protocol = string(*p.Protocol)
		}
		if p.AppProtocol != nil {
			ep.AppProtocol = *p.AppProtocol
		}
		out.Ports = append(out.Ports, ep)
	}
	for _, e := range es.Endpoints {
		de := domain.Endpoint{
			Addresses: e.Addresses,
			// A nil ready condition means unknown, which consumers must
			// take as ready.
			Ready: e.Conditions.Ready == nil || *e.Conditions.Ready,
		}
		if e.NodeName != nil {
			de.NodeName = *e.NodeName
		}
		if e.Zone != nil {
			de.Zone = *e.Zone
		}
		if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
			de.Pod = e.TargetRef.Name
		}
		out.Endpoints = append(out.Endpoints, de)
	}
	return out
}

// IstioObject converts an Istio VirtualService or DestinationRule of the
// given kind.
func IstioObject(kind string, u *unstructured.Unstructured) domain.IstioObject {
	obj := domain.IstioObject{Kind: kind, Namespace: u.GetNamespace(), Name: u.GetName(), ManagedBy: u.GetLabels()[snapshots.LabelManagedBy]}
	obj.Hosts, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "hosts")
	if h, ok, _ := unstructured.NestedString(u.Object, "spec", "host"); ok && h != "" {
		obj.Hosts = append(obj.Hosts, h)
	}
	obj.ExportTo, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "exportTo")
	return obj
}
