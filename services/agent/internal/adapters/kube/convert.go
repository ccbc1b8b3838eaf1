package kube

import (
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discov1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func controllerOf(m *metav1.ObjectMeta) domain.OwnerRef {
	if c := metav1.GetControllerOfNoCopy(m); c != nil {
		return domain.OwnerRef{Kind: c.Kind, Name: c.Name}
	}
	return domain.OwnerRef{}
}

func toService(s *corev1.Service) domain.Service {
	out := domain.Service{
		Name: s.Name, Namespace: s.Namespace, Labels: s.Labels, Selector: s.Spec.Selector, Type: string(s.Spec.Type),
		Discover: s.Annotations[domain.AnnotationDiscover],
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

func toPod(p *cachedPod) domain.Pod {
	out := domain.Pod{
		Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, ServiceAccount: p.ServiceAccount,
		Controller: controllerOf(&p.ObjectMeta), Sidecar: p.Sidecar, SidecarRevision: p.SidecarRevision,
		DiscoveryImage: p.DiscoveryImage, Ready: p.Ready, IP: p.IP, NodeName: p.NodeName,
	}
	if out.ServiceAccount == "" {
		out.ServiceAccount = "default"
	}
	return out
}

func toDeployment(d *appsv1.Deployment) domain.Deployment {
	out := domain.Deployment{
		Name: d.Name, Namespace: d.Namespace, Labels: d.Labels, PodLabels: d.Spec.Template.Labels,
		ServiceAccount: d.Spec.Template.Spec.ServiceAccountName,
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == discoveryContainer {
			out.DiscoveryImage = c.Image
		}
	}
	return out
}

// toMeshConfig parses the "mesh" key of an Istio mesh config ConfigMap. A
// ConfigMap that does not parse gives the defaults, as it does to istiod.
func toMeshConfig(c *corev1.ConfigMap) (domain.MeshConfig, error) {
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

func toNode(n *corev1.Node) domain.Node {
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
		}
	}
	return out
}

func toEndpointSlice(es *discov1.EndpointSlice) domain.EndpointSlice {
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
