// Package domain holds the agent's rules: how what it sees in its cluster
// becomes an input snapshot, and which applied objects an output snapshot
// makes obsolete. It imports no Kubernetes or RPC package; the kube adapter
// converts API objects into the plain types here.
package domain

import (
	"maps"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// Well-known label and annotation keys.
const (
	LabelRevision        = "istio.io/rev"
	LabelRegion          = "topology.kubernetes.io/region"
	LabelZone            = "topology.kubernetes.io/zone"
	LabelSubzone         = "topology.istio.io/subzone"
	AnnotationDiscover   = "discovery.meshplane.dev/discover"
	AnnotationSidecar    = "sidecar.istio.io/status"
	SidecarContainerName = "istio-proxy"
	DefaultTrustDomain   = "cluster.local"
	DefaultTLSPortName   = "tls"
	defaultRevisionLabel = "default"
	discoveryContainer   = "discovery"
)

// Service is the part of a Kubernetes Service that discovery uses.
type Service struct {
	Name      string
	Namespace string
	Labels    map[string]string
	Selector  map[string]string
	Type      string // ClusterIP, NodePort, LoadBalancer, ExternalName
	Ports     []ServicePort
	// Discover is the value of the discovery.meshplane.dev/discover
	// annotation: "true" discovers a Service that fronts no mesh workload,
	// "false" leaves out one that does.
	Discover string
	// LoadBalancer holds the IPs or hostnames of status.loadBalancer.ingress.
	LoadBalancer []string
	// ExternalIPs is spec.externalIPs: addresses, routed to the nodes by
	// the network, on which kube-proxy serves the Service's ports.
	ExternalIPs []string
}

// ServicePort is one port of a Service.
type ServicePort struct {
	Name        string
	Port        uint32
	Protocol    string
	AppProtocol string
	TargetPort  uint32
	TargetName  string
	NodePort    uint32
}

// OwnerRef names an object's controller.
type OwnerRef struct {
	Kind string
	Name string
}

// Pod is the part of a Pod that discovery uses.
type Pod struct {
	Name           string
	Namespace      string
	Labels         map[string]string
	ServiceAccount string
	// Controller is the pod's controlling owner; empty for a bare pod.
	Controller OwnerRef
	// Sidecar says the pod carries Istio's sidecar (see HasSidecar).
	Sidecar bool
	// SidecarRevision is the revision named in the sidecar.istio.io/status
	// annotation that the injector writes, "" when absent.
	SidecarRevision string
	// DiscoveryImage is istiod's image when the pod is istiod (see
	// PodIstiodImage), "" for any other pod.
	DiscoveryImage string
	Ready          bool
	IP             string
	NodeName       string
}

// ReplicaSet is the ownership of a ReplicaSet, which leads from a pod to
// its Deployment.
type ReplicaSet struct {
	Name       string
	Namespace  string
	Controller OwnerRef
}

// Deployment is the part of a Deployment that mesh discovery uses.
type Deployment struct {
	Name           string
	Namespace      string
	Labels         map[string]string
	PodLabels      map[string]string
	ServiceAccount string
	// DiscoveryImage is the image istiod's version is read from (see
	// IstiodImage).
	DiscoveryImage string
}

// Namespace is a namespace's labels.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// MeshConfig is what discovery reads from an Istio mesh config ConfigMap
// (istio or istio-<revision>, key "mesh").
type MeshConfig struct {
	Name        string
	Namespace   string
	TrustDomain string
	// DNSCapture is defaultConfig.proxyMetadata.ISTIO_META_DNS_CAPTURE.
	DNSCapture bool
}

// Node is the part of a Node that locality and gateway addresses use.
type Node struct {
	Name       string
	Labels     map[string]string
	InternalIP string
	ExternalIP string
	// ExternalDNS is the node's first ExternalDNS address, a hostname.
	ExternalDNS string
}

// EndpointSlice is the part of a discovery.k8s.io/v1 EndpointSlice that
// discovery uses.
type EndpointSlice struct {
	Name      string
	Namespace string
	// Service is the kubernetes.io/service-name label.
	Service   string
	Ports     []EndpointPort
	Endpoints []Endpoint
}

// EndpointPort is one port of an EndpointSlice.
type EndpointPort struct {
	Name        string
	Port        uint32
	Protocol    string
	AppProtocol string
}

// Endpoint is one endpoint of an EndpointSlice.
type Endpoint struct {
	Addresses []string
	Ready     bool
	NodeName  string
	// Zone is the slice's own zone hint, used when the node is unknown.
	Zone string
	// Pod names the target pod, "" when the target is not a pod.
	Pod string
}

// UserResources are the Meshplane resources applied in the cluster,
// already decoded.
type UserResources struct {
	VirtualMeshes       []*networkingv1.VirtualMesh
	TrafficPolicies     []*networkingv1.TrafficPolicy
	AccessPolicies      []*networkingv1.AccessPolicy
	VirtualDestinations []*networkingv1.VirtualDestination
	WasmDeployments     []*networkingv1.WasmDeploymentPolicy
	AccessLogPolicies   []*observabilityv1.AccessLogPolicy
	Settings            []*settingsv1.Settings
}

// Options are the discovery rules that users configure.
type Options struct {
	// IngressGatewayLabels and EastWestGatewayLabels select gateway pods
	// (all pairs must match). Nil means the defaults.
	IngressGatewayLabels  map[string]string
	EastWestGatewayLabels map[string]string
	// TLSPortName names the gateway Service port that accepts mTLS.
	TLSPortName string
}

// DefaultOptions returns Istio's conventions.
func DefaultOptions() Options {
	return Options{
		IngressGatewayLabels:  map[string]string{"istio": "ingressgateway"},
		EastWestGatewayLabels: map[string]string{"istio": "eastwestgateway"},
		TLSPortName:           DefaultTLSPortName,
	}
}

// WithDetector returns o with the fields that d sets in their place: d is
// the gateway detection that translation resolved for this cluster from
// the Settings in force (an output snapshot's gateway_detector), which
// wins over the agent's flags. A nil d changes nothing.
func (o Options) WithDetector(d *settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector) Options {
	if l := d.GetIngressGatewayLabels(); len(l) > 0 {
		o.IngressGatewayLabels = l
	}
	if l := d.GetEastWestGatewayLabels(); len(l) > 0 {
		o.EastWestGatewayLabels = l
	}
	if n := d.GetEastWestGatewayTlsPortName(); n != "" {
		o.TLSPortName = n
	}
	return o
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.IngressGatewayLabels == nil {
		o.IngressGatewayLabels = d.IngressGatewayLabels
	}
	if o.EastWestGatewayLabels == nil {
		o.EastWestGatewayLabels = d.EastWestGatewayLabels
	}
	if o.TLSPortName == "" {
		o.TLSPortName = d.TLSPortName
	}
	return o
}

// Discovered is everything the agent found in its cluster.
type Discovered struct {
	Options Options
	// InScope holds the namespaces that the namespace filter lets through,
	// as the adapter evaluated it; nil means every namespace. Workloads,
	// destinations and user resources outside it are left out. Meshes and
	// their gateways are not: a filter that scopes discovery to the
	// application namespaces must not lose istio-system.
	InScope        map[string]bool
	Services       []Service
	Pods           []Pod
	ReplicaSets    []ReplicaSet
	Deployments    []Deployment
	Namespaces     []Namespace
	MeshConfigs    []MeshConfig
	Nodes          []Node
	EndpointSlices []EndpointSlice
	Resources      UserResources
	// IstioObjects are the cluster's VirtualServices and DestinationRules,
	// Meshplane's own included; only the users' go into the snapshot.
	IstioObjects []IstioObject
}

// Identity says who produced a snapshot.
type Identity struct {
	Cluster       string
	AgentVersion  string
	Replica       string
	Namespace     string
	ClusterDomain string
	// Install is the install name: Istio objects labelled
	// meshplane.dev/managed-by with it are Meshplane's, not the users'.
	// The default install when empty.
	Install string
}

// BuildInputSnapshot turns what was discovered into a sealed input snapshot.
// It is deterministic: the same cluster state gives the same version.
func BuildInputSnapshot(id Identity, d Discovered) *snapshotv1.InputSnapshot {
	s := &snapshotv1.InputSnapshot{
		Cluster: id.Cluster,
		Agent:   &snapshotv1.AgentInfo{Version: id.AgentVersion, Replica: id.Replica, Namespace: id.Namespace},
	}
	ix := newIndex(id, d)
	s.Meshes = ix.meshes()
	s.Workloads = ix.workloadProtos()
	s.Destinations = ix.destinations()

	r := d.Resources
	s.VirtualMeshes = inScope(ix, r.VirtualMeshes)
	s.TrafficPolicies = inScope(ix, r.TrafficPolicies)
	s.AccessPolicies = inScope(ix, r.AccessPolicies)
	s.VirtualDestinations = inScope(ix, r.VirtualDestinations)
	s.WasmDeploymentPolicies = inScope(ix, r.WasmDeployments)
	s.AccessLogPolicies = inScope(ix, r.AccessLogPolicies)
	s.Settings = inScope(ix, r.Settings)
	s.UserIstioObjects = userIstioObjects(id.Install, d.IstioObjects)
	snapshots.SealInput(s)
	return s
}

type withMeta interface {
	GetMetadata() *commonv1.ObjectMeta
}

func inScope[T withMeta](ix *index, in []T) []T {
	var out []T
	for _, r := range in {
		if ix.inScope(r.GetMetadata().GetNamespace()) {
			out = append(out, r)
		}
	}
	return out
}

// matches reports whether labels hold every pair of selector. An empty
// selector matches nothing: a Service without one selects no pods.
func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if w, ok := labels[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func cloneLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}
