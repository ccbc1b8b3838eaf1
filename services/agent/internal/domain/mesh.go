package domain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
)

// controlPlane is one istiod: a Deployment, or istiod pods whose
// Deployment is not known.
type controlPlane struct {
	name, namespace string
	revision        string
	podLabels       map[string]string
	serviceAccount  string
	image           string
}

func (cp *controlPlane) ref(cluster string) *commonv1.ObjectRef {
	return &commonv1.ObjectRef{Name: meshName(cp.name, cp.namespace, cluster), Namespace: cp.namespace}
}

func meshName(istiod, namespace, cluster string) string {
	return fmt.Sprintf("%s-%s-%s", istiod, namespace, cluster)
}

// IsIstiod reports whether a Deployment or pod with this name and labels is
// an istiod: named istiod or istiod-<revision>, or labelled app=istiod; or
// the control plane of Istio before 1.5, the Deployment istio-pilot
// (labelled app=pilot).
func IsIstiod(name string, labels map[string]string) bool {
	return name == "istiod" || strings.HasPrefix(name, "istiod-") || name == legacyPilot || isIstiodPod(labels)
}

// legacyPilot is the Deployment of Istio's control plane before istiod.
const legacyPilot = "istio-pilot"

// isIstiodPod says whether a pod's labels are those of istiod's pods, or of
// the legacy istio-pilot's.
func isIstiodPod(labels map[string]string) bool {
	return labels["app"] == "istiod" || labels["app"] == "pilot"
}

// IstioVersion returns the tag of an image reference, without a digest and
// without the "-distroless" variant suffix.
func IstioVersion(image string) string {
	image, _, _ = strings.Cut(image, "@")
	slash := strings.LastIndex(image, "/")
	colon := strings.LastIndex(image, ":")
	if colon <= slash {
		return ""
	}
	return strings.TrimSuffix(image[colon+1:], "-distroless")
}

func istiodRevision(name string, labels ...map[string]string) string {
	for _, l := range labels {
		if r, ok := l[LabelRevision]; ok {
			return normalizeRevision(r)
		}
	}
	if r, ok := strings.CutPrefix(name, "istiod-"); ok {
		return normalizeRevision(r)
	}
	return ""
}

// controlPlanes finds every istiod, from Deployments first and then from
// pods that no known Deployment owns.
func (ix *index) controlPlanes(pods []*Pod) []*controlPlane {
	seen := map[nsName]bool{}
	var out []*controlPlane
	for _, dep := range ix.d.Deployments {
		if !IsIstiod(dep.Name, dep.PodLabels) && dep.Labels["app"] != "istiod" {
			continue
		}
		seen[nsName{dep.Namespace, dep.Name}] = true
		out = append(out, &controlPlane{
			name: dep.Name, namespace: dep.Namespace,
			revision:       istiodRevision(dep.Name, dep.Labels, dep.PodLabels),
			podLabels:      cloneLabels(dep.PodLabels),
			serviceAccount: dep.ServiceAccount,
			image:          dep.DiscoveryImage,
		})
	}
	for _, p := range pods {
		if p.DiscoveryImage == "" || !isIstiodPod(p.Labels) {
			continue
		}
		top := ix.topController(p)
		key := nsName{p.Namespace, top.Name}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, &controlPlane{
			name: top.Name, namespace: p.Namespace,
			revision:       istiodRevision(top.Name, p.Labels),
			podLabels:      podLabels(p),
			serviceAccount: p.ServiceAccount,
			image:          p.DiscoveryImage,
		})
	}
	slices.SortFunc(out, func(a, b *controlPlane) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
	})
	return out
}

func (ix *index) meshConfig(cp *controlPlane) MeshConfig {
	name := "istio"
	if cp.revision != "" {
		name += "-" + cp.revision
	}
	for _, mc := range ix.d.MeshConfigs {
		if mc.Namespace == cp.namespace && mc.Name == name {
			return mc
		}
	}
	return MeshConfig{}
}

func (ix *index) meshes() []*discoveryv1.Mesh {
	gateways := ix.gateways()
	var out []*discoveryv1.Mesh
	for _, cp := range ix.planes {
		mc := ix.meshConfig(cp)
		td := mc.TrustDomain
		if td == "" {
			td = DefaultTrustDomain
		}
		g := gateways[cp]
		out = append(out, &discoveryv1.Mesh{
			Metadata: &commonv1.ObjectMeta{Name: meshName(cp.name, cp.namespace, ix.id.Cluster), Namespace: cp.namespace, Cluster: ix.id.Cluster},
			Spec: &discoveryv1.MeshSpec{
				Type: &discoveryv1.MeshSpec_Istio_{Istio: &discoveryv1.MeshSpec_Istio{
					Installation: &discoveryv1.MeshSpec_Installation{
						Namespace: cp.namespace, Cluster: ix.id.Cluster, PodLabels: cp.podLabels,
						Version: IstioVersion(cp.image), Revision: cp.revision, Region: ix.region,
					},
					TrustDomain:             td,
					IstiodServiceAccount:    cp.serviceAccount,
					IngressGateways:         g.ingress,
					EastWestGateways:        g.eastWest,
					SmartDnsProxyingEnabled: mc.DNSCapture,
				}},
				AgentInfo: &discoveryv1.MeshSpec_AgentInfo{AgentNamespace: ix.id.Namespace},
			},
		})
	}
	return out
}

type meshGateways struct {
	ingress, eastWest []*discoveryv1.MeshSpec_Gateway
}

// gateways finds the gateway Services: those whose selector names the
// configured gateway labels, or that select pods carrying them. Each goes to
// the mesh of its pods' revision.
func (ix *index) gateways() map[*controlPlane]meshGateways {
	out := map[*controlPlane]meshGateways{}
	if len(ix.planes) == 0 {
		return out
	}
	for i := range ix.d.Services {
		svc := &ix.d.Services[i]
		pods := ix.selected(svc.Namespace, svc.Selector)
		isGateway := func(labels map[string]string) bool {
			if matches(labels, svc.Selector) {
				return true
			}
			return slices.ContainsFunc(pods, func(p *Pod) bool { return matches(labels, p.Labels) })
		}
		ingress, eastWest := isGateway(ix.opts.IngressGatewayLabels), isGateway(ix.opts.EastWestGatewayLabels)
		if !ingress && !eastWest {
			continue
		}
		rev := ""
		if len(pods) > 0 {
			rev = ix.podRevision(pods[0])
		} else if r, ok := svc.Labels[LabelRevision]; ok {
			rev = normalizeRevision(r)
		} else if r, ok := ix.nsLabels[svc.Namespace][LabelRevision]; ok {
			rev = normalizeRevision(r)
		}
		cp := ix.byRev[rev]
		if cp == nil {
			continue
		}
		gw := ix.gateway(svc, pods)
		g := out[cp]
		if ingress {
			g.ingress = append(g.ingress, gw)
		}
		if eastWest {
			g.eastWest = append(g.eastWest, gw)
		}
		out[cp] = g
	}
	byService := func(a, b *discoveryv1.MeshSpec_Gateway) int {
		return cmp.Or(cmp.Compare(a.GetService().GetNamespace(), b.GetService().GetNamespace()),
			cmp.Compare(a.GetService().GetName(), b.GetService().GetName()))
	}
	for _, g := range out {
		slices.SortFunc(g.ingress, byService)
		slices.SortFunc(g.eastWest, byService)
	}
	return out
}

// gateway computes where other clusters reach a gateway: the load
// balancer's address and the Service port; else the first of
// spec.externalIPs and the Service port (kube-proxy serves the Service's
// own ports there, for any Service type); else, for a LoadBalancer still
// waiting for its address or a NodePort Service, a node's address and the
// node port.
func (ix *index) gateway(svc *Service, pods []*Pod) *discoveryv1.MeshSpec_Gateway {
	gw := &discoveryv1.MeshSpec_Gateway{
		WorkloadLabels: cloneLabels(svc.Selector),
		Service:        &commonv1.ClusterObjectRef{Name: svc.Name, Namespace: svc.Namespace, Cluster: ix.id.Cluster},
	}
	var tls *ServicePort
	for i := range svc.Ports {
		if svc.Ports[i].Name == ix.opts.TLSPortName {
			tls = &svc.Ports[i]
			break
		}
	}
	if tls != nil {
		gw.TlsContainerPort = tls.TargetPort
	}
	switch {
	case svc.Type == "LoadBalancer" && len(svc.LoadBalancer) > 0:
		gw.ExternalAddress = svc.LoadBalancer[0]
		if tls != nil {
			gw.ExternalTlsPort = tls.Port
		}
	case len(svc.ExternalIPs) > 0:
		gw.ExternalAddress = svc.ExternalIPs[0]
		if tls != nil {
			gw.ExternalTlsPort = tls.Port
		}
	case svc.Type == "LoadBalancer" || svc.Type == "NodePort":
		gw.ExternalAddress = ix.nodeAddress(pods)
		if tls != nil {
			gw.ExternalTlsPort = tls.NodePort
		}
	}
	return gw
}

// nodeAddress prefers the node a gateway pod runs on, then the first node
// by name; and of a node's addresses its ExternalIP, then its ExternalDNS
// name, then its InternalIP.
func (ix *index) nodeAddress(pods []*Pod) string {
	addr := func(n *Node) string { return cmp.Or(n.ExternalIP, n.ExternalDNS, n.InternalIP) }
	for _, p := range pods {
		if n := ix.nodes[p.NodeName]; n != nil && addr(n) != "" {
			return addr(n)
		}
	}
	names := make([]string, 0, len(ix.nodes))
	for name := range ix.nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if a := addr(ix.nodes[name]); a != "" {
			return a
		}
	}
	return ""
}

// Container is the part of a pod's container that discovery reads.
type Container struct {
	Name  string
	Image string
	// Init and RestartAlways describe an init container; one that restarts
	// always is a native sidecar, running beside the others.
	Init, RestartAlways bool
}

// HasSidecar says whether a pod carries Istio's sidecar: the injector
// recorded one (the sidecar.istio.io/status annotation, whatever the
// container is called), or it has an istio-proxy container, or an
// istio-proxy native sidecar (an init container that restarts always, as
// Istio injects on Kubernetes 1.29 and later).
func HasSidecar(containers []Container, injectorStatus bool) bool {
	if injectorStatus {
		return true
	}
	for _, c := range containers {
		if c.Name == SidecarContainerName && (!c.Init || c.RestartAlways) {
			return true
		}
	}
	return false
}

// IstiodImage is the image an istiod Deployment's version is read from:
// that of the container named "discovery", else that of its only
// container (an install that renamed it). Only Deployments that IsIstiod
// are asked.
func IstiodImage(containers []Container) string {
	var only []Container
	for _, c := range containers {
		if c.Init {
			continue
		}
		if c.Name == discoveryContainer {
			return c.Image
		}
		only = append(only, c)
	}
	if len(only) == 1 {
		return only[0].Image
	}
	return ""
}

// PodIstiodImage is the image of a pod that is istiod, "" for any other
// pod: the container named "discovery" (only istiod has one), else, for a
// pod labelled as istiod's, its only container.
func PodIstiodImage(labels map[string]string, containers []Container) string {
	for _, c := range containers {
		if c.Name == discoveryContainer && !c.Init {
			return c.Image
		}
	}
	if isIstiodPod(labels) {
		return IstiodImage(containers)
	}
	return ""
}
