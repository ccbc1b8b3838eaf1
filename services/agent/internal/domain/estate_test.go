package domain

import (
	"maps"
	"slices"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

func sidecarPod(ns, name string, labels map[string]string, owner OwnerRef, ip, node string) Pod {
	return Pod{
		Name: name, Namespace: ns, Labels: labels, ServiceAccount: "bookinfo-" + labels["app"],
		Controller: owner, Sidecar: true, Ready: true, IP: ip, NodeName: node,
	}
}

// estate is bookinfo in a cluster with two istiod revisions and gateways.
func estate() Discovered {
	rs := func(name string) OwnerRef { return OwnerRef{Kind: "ReplicaSet", Name: name} }
	d := Discovered{
		Namespaces: []Namespace{
			{Name: "istio-system"},
			{Name: "bookinfo", Labels: map[string]string{"istio-injection": "enabled"}},
			{Name: "canary-apps", Labels: map[string]string{LabelRevision: "canary"}},
			{Name: "plain"},
		},
		Nodes: []Node{
			{Name: "node-a", Labels: map[string]string{LabelRegion: "eu-west-1", LabelZone: "eu-west-1a"}, InternalIP: "192.168.0.1"},
			{Name: "node-b", Labels: map[string]string{LabelRegion: "eu-west-1", LabelZone: "eu-west-1b", LabelSubzone: "rack-7"}, InternalIP: "192.168.0.2", ExternalIP: "203.0.113.2"},
			{Name: "node-c", Labels: map[string]string{LabelRegion: "us-east-1"}, InternalIP: "192.168.0.3"},
		},
		Deployments: []Deployment{
			{Name: "istiod", Namespace: "istio-system", Labels: map[string]string{"app": "istiod", LabelRevision: "default"},
				PodLabels: map[string]string{"app": "istiod", "istio": "pilot"}, ServiceAccount: "istiod", DiscoveryImage: "docker.io/istio/pilot:1.24.0"},
			{Name: "istiod-canary", Namespace: "istio-system", Labels: map[string]string{"app": "istiod"},
				PodLabels: map[string]string{"app": "istiod", LabelRevision: "canary"}, ServiceAccount: "istiod-canary",
				DiscoveryImage: "registry.local:5000/istio/pilot:1.25.1-distroless@sha256:abcd"},
			{Name: "reviews-v1", Namespace: "bookinfo", Labels: map[string]string{"app": "reviews"}},
		},
		MeshConfigs: []MeshConfig{
			{Name: "istio", Namespace: "istio-system", TrustDomain: "east.example"},
			{Name: "istio-canary", Namespace: "istio-system", TrustDomain: "canary.example", DNSCapture: true},
		},
		ReplicaSets: []ReplicaSet{
			{Name: "reviews-v1-abc", Namespace: "bookinfo", Controller: OwnerRef{Kind: "Deployment", Name: "reviews-v1"}},
			{Name: "reviews-v2-def", Namespace: "bookinfo", Controller: OwnerRef{Kind: "Deployment", Name: "reviews-v2"}},
			{Name: "orphan-rs", Namespace: "bookinfo"},
		},
		Pods: []Pod{
			sidecarPod("bookinfo", "reviews-v1-abc-1", map[string]string{"app": "reviews", "version": "v1", "pod-template-hash": "abc"}, rs("reviews-v1-abc"), "10.0.0.1", "node-a"),
			sidecarPod("bookinfo", "reviews-v1-abc-2", map[string]string{"app": "reviews", "version": "v1", "pod-template-hash": "abc"}, rs("reviews-v1-abc"), "10.0.0.2", "node-b"),
			sidecarPod("bookinfo", "reviews-v2-def-1", map[string]string{"app": "reviews", "version": "v2", "pod-template-hash": "def"}, rs("reviews-v2-def"), "10.0.0.3", "node-b"),
			// Its ReplicaSet is not cached yet: the name gives the Deployment.
			sidecarPod("bookinfo", "reviews-v3-ghi-1", map[string]string{"app": "reviews", "version": "v3", "pod-template-hash": "ghi"}, rs("reviews-v3-ghi"), "10.0.0.4", "node-a"),
			sidecarPod("bookinfo", "orphan-rs-1", map[string]string{"app": "orphan"}, rs("orphan-rs"), "10.0.0.9", ""),
			sidecarPod("bookinfo", "details-0", map[string]string{"app": "details", "version": "v1"}, OwnerRef{}, "10.0.0.5", "node-a"),
			{Name: "notmesh-0", Namespace: "bookinfo", Labels: map[string]string{"app": "notmesh"}, Ready: true},
			sidecarPod("canary-apps", "db-0", map[string]string{"app": "db"}, OwnerRef{Kind: "StatefulSet", Name: "db"}, "10.0.1.1", "node-a"),
			sidecarPod("canary-apps", "agent-x", map[string]string{"app": "logs"}, OwnerRef{Kind: "DaemonSet", Name: "logs"}, "10.0.1.2", "node-a"),
			{Name: "pinned-0", Namespace: "bookinfo", Labels: map[string]string{"app": "pinned", LabelRevision: "canary"}, Sidecar: true},
			{Name: "unknown-rev-0", Namespace: "bookinfo", Labels: map[string]string{"app": "unknownrev"}, Sidecar: true, SidecarRevision: "gone"},
			{Name: "eastwest-1", Namespace: "istio-system", Labels: map[string]string{"istio": "eastwestgateway", "app": "istio-eastwestgateway"},
				Controller: OwnerRef{Kind: "ReplicaSet", Name: "eastwest-x"}, Sidecar: true, NodeName: "node-b"},
			{Name: "ingress-1", Namespace: "istio-system", Labels: map[string]string{"istio": "ingressgateway", LabelRevision: "canary"},
				Sidecar: true, NodeName: "node-b"},
		},
		Services: []Service{
			{Name: "reviews", Namespace: "bookinfo", Type: "ClusterIP", Selector: map[string]string{"app": "reviews"},
				Ports: []ServicePort{{Name: "http", Port: 9080, Protocol: "TCP", TargetPort: 9080}}},
			{Name: "details", Namespace: "bookinfo", Type: "ClusterIP", Selector: map[string]string{"app": "details"}},
			{Name: "notmesh", Namespace: "bookinfo", Type: "ClusterIP", Selector: map[string]string{"app": "notmesh"}},
			{Name: "external", Namespace: "bookinfo", Type: "ExternalName", Discover: "true"},
			{Name: "optout", Namespace: "bookinfo", Type: "ClusterIP", Selector: map[string]string{"app": "details"}, Discover: "false"},
			{Name: "db", Namespace: "canary-apps", Type: "ClusterIP", Selector: map[string]string{"app": "db"}},
			{Name: "istio-eastwestgateway", Namespace: "istio-system", Type: "LoadBalancer",
				Selector:     map[string]string{"istio": "eastwestgateway"},
				LoadBalancer: []string{"198.51.100.7"},
				Ports: []ServicePort{
					{Name: "status-port", Port: 15021, TargetPort: 15021, NodePort: 31021},
					{Name: "tls", Port: 15443, TargetPort: 15443, NodePort: 31443},
				}},
			{Name: "istio-ingressgateway", Namespace: "istio-system", Type: "NodePort",
				Selector: map[string]string{"istio": "ingressgateway"},
				Ports:    []ServicePort{{Name: "tls", Port: 443, TargetPort: 8443, NodePort: 30443}}},
		},
		EndpointSlices: []EndpointSlice{
			{Name: "reviews-1", Namespace: "bookinfo", Service: "reviews",
				Ports: []EndpointPort{{Name: "http", Port: 9080, Protocol: "TCP"}},
				Endpoints: []Endpoint{
					{Addresses: []string{"10.0.0.2"}, Ready: true, NodeName: "node-b", Pod: "reviews-v1-abc-2"},
					{Addresses: []string{"10.0.0.1"}, Ready: true, NodeName: "node-a", Pod: "reviews-v1-abc-1"},
					{Addresses: []string{"10.0.0.99"}, Ready: false, NodeName: "node-a"},
				}},
			{Name: "reviews-2", Namespace: "bookinfo", Service: "reviews",
				Ports: []EndpointPort{{Name: "http", Port: 9080, Protocol: "TCP"}},
				Endpoints: []Endpoint{
					{Addresses: []string{"10.0.0.3"}, Ready: true, Pod: "reviews-v2-def-1"},
					{Addresses: []string{"10.0.0.4"}, Ready: true, Zone: "hint-zone"},
				}},
		},
		Resources: UserResources{TrafficPolicies: []*networkingv1.TrafficPolicy{
			{Metadata: &commonv1.ObjectMeta{Name: "retries", Namespace: "bookinfo", Cluster: "east", Generation: 2}},
			{Metadata: &commonv1.ObjectMeta{Name: "other", Namespace: "plain", Cluster: "east"}},
		}},
	}
	return d
}

func meshByName(s interface {
	GetMeshes() []*discoveryv1.Mesh
}, name string) *discoveryv1.Mesh {
	for _, m := range s.GetMeshes() {
		if m.GetMetadata().GetName() == name {
			return m
		}
	}
	return nil
}

func TestMeshes(t *testing.T) {
	s := BuildInputSnapshot(east, estate())
	if got := len(s.GetMeshes()); got != 2 {
		t.Fatalf("%d meshes, want 2: %v", got, s.GetMeshes())
	}
	ewGateway := &discoveryv1.MeshSpec_Gateway{
		WorkloadLabels:   map[string]string{"istio": "eastwestgateway"},
		ExternalAddress:  "198.51.100.7",
		ExternalTlsPort:  15443,
		TlsContainerPort: 15443,
		Service:          &commonv1.ClusterObjectRef{Name: "istio-eastwestgateway", Namespace: "istio-system", Cluster: "east"},
	}
	ingressGateway := &discoveryv1.MeshSpec_Gateway{
		WorkloadLabels: map[string]string{"istio": "ingressgateway"},
		// NodePort: the external address of the gateway pod's node.
		ExternalAddress:  "203.0.113.2",
		ExternalTlsPort:  30443,
		TlsContainerPort: 8443,
		Service:          &commonv1.ClusterObjectRef{Name: "istio-ingressgateway", Namespace: "istio-system", Cluster: "east"},
	}
	tests := []struct {
		name string
		want *discoveryv1.MeshSpec_Istio
	}{
		{"istiod-istio-system-east", &discoveryv1.MeshSpec_Istio{
			Installation: &discoveryv1.MeshSpec_Installation{
				Namespace: "istio-system", Cluster: "east", Version: "1.24.0", Revision: "", Region: "eu-west-1",
				PodLabels: map[string]string{"app": "istiod", "istio": "pilot"},
			},
			TrustDomain: "east.example", IstiodServiceAccount: "istiod",
			EastWestGateways: []*discoveryv1.MeshSpec_Gateway{ewGateway},
		}},
		{"istiod-canary-istio-system-east", &discoveryv1.MeshSpec_Istio{
			Installation: &discoveryv1.MeshSpec_Installation{
				Namespace: "istio-system", Cluster: "east", Version: "1.25.1", Revision: "canary", Region: "eu-west-1",
				PodLabels: map[string]string{"app": "istiod", LabelRevision: "canary"},
			},
			TrustDomain: "canary.example", IstiodServiceAccount: "istiod-canary", SmartDnsProxyingEnabled: true,
			IngressGateways: []*discoveryv1.MeshSpec_Gateway{ingressGateway},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := meshByName(s, tt.name)
			if m == nil {
				t.Fatalf("no mesh %s", tt.name)
			}
			if md := m.GetMetadata(); md.GetNamespace() != "istio-system" || md.GetCluster() != "east" {
				t.Errorf("metadata = %v", md)
			}
			if m.GetSpec().GetAgentInfo().GetAgentNamespace() != "meshplane" {
				t.Errorf("agent info = %v", m.GetSpec().GetAgentInfo())
			}
			if diff := cmpProto(tt.want, m.GetSpec().GetIstio()); diff != "" {
				t.Errorf("istio spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMeshTrustDomainDefaultAndPodOnlyIstiod(t *testing.T) {
	d := Discovered{
		Pods: []Pod{{
			Name: "istiod-7d9-x", Namespace: "istio-system", Labels: map[string]string{"app": "istiod", "pod-template-hash": "7d9"},
			Controller: OwnerRef{Kind: "ReplicaSet", Name: "istiod-7d9"}, ServiceAccount: "istiod", DiscoveryImage: "gcr.io/istio-release/pilot:1.23.2",
		}},
	}
	s := BuildInputSnapshot(east, d)
	m := meshByName(s, "istiod-istio-system-east")
	if m == nil {
		t.Fatalf("meshes = %v, want istiod found from its pod", s.GetMeshes())
	}
	is := m.GetSpec().GetIstio()
	if is.GetTrustDomain() != DefaultTrustDomain || is.GetInstallation().GetVersion() != "1.23.2" || is.GetIstiodServiceAccount() != "istiod" {
		t.Errorf("istio = %v", is)
	}
	if got := is.GetInstallation().GetPodLabels(); !maps.Equal(got, map[string]string{"app": "istiod"}) {
		t.Errorf("pod labels = %v, want per-pod labels dropped", got)
	}
}

func TestIstioVersion(t *testing.T) {
	tests := []struct{ image, want string }{
		{"docker.io/istio/pilot:1.24.0", "1.24.0"},
		{"pilot:1.22.3-distroless", "1.22.3"},
		{"registry.local:5000/istio/pilot:1.25.1@sha256:abcd", "1.25.1"},
		{"registry.local:5000/istio/pilot", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := IstioVersion(tt.image); got != tt.want {
			t.Errorf("IstioVersion(%q) = %q, want %q", tt.image, got, tt.want)
		}
	}
}

func workloadByName(ws []*discoveryv1.Workload, name string) *discoveryv1.Workload {
	for _, w := range ws {
		if w.GetMetadata().GetName() == name {
			return w
		}
	}
	return nil
}

func TestWorkloads(t *testing.T) {
	s := BuildInputSnapshot(east, estate())
	defaultMesh := &commonv1.ObjectRef{Name: "istiod-istio-system-east", Namespace: "istio-system"}
	canaryMesh := &commonv1.ObjectRef{Name: "istiod-canary-istio-system-east", Namespace: "istio-system"}
	tests := []struct {
		name       string
		kind       string
		controller string
		labels     map[string]string
		ready      uint32
		mesh       *commonv1.ObjectRef
	}{
		{"reviews-v1-bookinfo-east", "Deployment", "reviews-v1", map[string]string{"app": "reviews", "version": "v1"}, 2, defaultMesh},
		{"reviews-v2-bookinfo-east", "Deployment", "reviews-v2", map[string]string{"app": "reviews", "version": "v2"}, 1, defaultMesh},
		{"reviews-v3-bookinfo-east", "Deployment", "reviews-v3", map[string]string{"app": "reviews", "version": "v3"}, 1, defaultMesh},
		{"orphan-rs-bookinfo-east", "ReplicaSet", "orphan-rs", map[string]string{"app": "orphan"}, 1, defaultMesh},
		{"details-0-bookinfo-east", "Pod", "details-0", map[string]string{"app": "details", "version": "v1"}, 1, defaultMesh},
		{"db-canary-apps-east", "StatefulSet", "db", map[string]string{"app": "db"}, 1, canaryMesh},
		{"logs-canary-apps-east", "DaemonSet", "logs", map[string]string{"app": "logs"}, 1, canaryMesh},
		{"pinned-0-bookinfo-east", "Pod", "pinned-0", map[string]string{"app": "pinned", LabelRevision: "canary"}, 0, canaryMesh},
		{"unknown-rev-0-bookinfo-east", "Pod", "unknown-rev-0", map[string]string{"app": "unknownrev"}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := workloadByName(s.GetWorkloads(), tt.name)
			if w == nil {
				t.Fatalf("no workload %s", tt.name)
			}
			k := w.GetSpec().GetKubernetes()
			if k.GetControllerKind() != tt.kind || k.GetController().GetName() != tt.controller || k.GetController().GetCluster() != "east" {
				t.Errorf("controller = %s %v, want %s %s", k.GetControllerKind(), k.GetController(), tt.kind, tt.controller)
			}
			if !maps.Equal(k.GetPodLabels(), tt.labels) {
				t.Errorf("labels = %v, want %v", k.GetPodLabels(), tt.labels)
			}
			if k.GetReadyPods() != tt.ready {
				t.Errorf("ready = %d, want %d", k.GetReadyPods(), tt.ready)
			}
			if !proto.Equal(w.GetSpec().GetMesh(), tt.mesh) {
				t.Errorf("mesh = %v, want %v", w.GetSpec().GetMesh(), tt.mesh)
			}
		})
	}
	if w := workloadByName(s.GetWorkloads(), "notmesh-0-bookinfo-east"); w != nil {
		t.Errorf("a pod without a sidecar is a workload: %v", w)
	}
	if w := workloadByName(s.GetWorkloads(), "reviews-v1-bookinfo-east"); w.GetSpec().GetKubernetes().GetServiceAccountName() != "bookinfo-reviews" {
		t.Errorf("service account = %q", w.GetSpec().GetKubernetes().GetServiceAccountName())
	}
}

func destinationByName(ds []*discoveryv1.Destination, name string) *discoveryv1.Destination {
	for _, d := range ds {
		if d.GetMetadata().GetName() == name {
			return d
		}
	}
	return nil
}

func TestDestinations(t *testing.T) {
	s := BuildInputSnapshot(east, estate())
	var got []string
	for _, d := range s.GetDestinations() {
		got = append(got, d.GetMetadata().GetName())
	}
	want := []string{
		"details-bookinfo-east", "external-bookinfo-east", "reviews-bookinfo-east",
		"db-canary-apps-east",
		"istio-eastwestgateway-istio-system-east", "istio-ingressgateway-istio-system-east",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("destinations = %v, want %v (notmesh selects no sidecar pod, optout opts out)", got, want)
	}

	reviews := destinationByName(s.GetDestinations(), "reviews-bookinfo-east")
	ks := reviews.GetSpec().GetKubeService()
	wantSubsets := map[string]*discoveryv1.DestinationSpec_KubeService_Subset{"version": {Values: []string{"v1", "v2", "v3"}}}
	if diff := cmpProtoMap(wantSubsets, ks.GetSubsets()); diff != "" {
		t.Errorf("subsets (-want +got):\n%s", diff)
	}
	if ks.GetRegion() != "eu-west-1" {
		t.Errorf("region = %q", ks.GetRegion())
	}
	if !proto.Equal(reviews.GetSpec().GetMesh(), &commonv1.ObjectRef{Name: "istiod-istio-system-east", Namespace: "istio-system"}) {
		t.Errorf("mesh = %v", reviews.GetSpec().GetMesh())
	}
	wantEndpoints := []*discoveryv1.DestinationSpec_KubeService_EndpointsSubset{{
		Ports: []*discoveryv1.DestinationSpec_KubeService_EndpointsSubset_EndpointPort{{Port: 9080, Name: "http", Protocol: "TCP"}},
		Endpoints: []*discoveryv1.DestinationSpec_KubeService_EndpointsSubset_Endpoint{
			{IpAddress: "10.0.0.1", Labels: map[string]string{"app": "reviews", "version": "v1"},
				SubLocality: &discoveryv1.DestinationSpec_KubeService_SubLocality{Zone: "eu-west-1a"}},
			{IpAddress: "10.0.0.2", Labels: map[string]string{"app": "reviews", "version": "v1"},
				SubLocality: &discoveryv1.DestinationSpec_KubeService_SubLocality{Zone: "eu-west-1b", SubZone: "rack-7"}},
			// No node on the endpoint: the pod's node gives the zone.
			{IpAddress: "10.0.0.3", Labels: map[string]string{"app": "reviews", "version": "v2"},
				SubLocality: &discoveryv1.DestinationSpec_KubeService_SubLocality{Zone: "eu-west-1b", SubZone: "rack-7"}},
			// No node and no pod: the slice's zone hint.
			{IpAddress: "10.0.0.4", SubLocality: &discoveryv1.DestinationSpec_KubeService_SubLocality{Zone: "hint-zone"}},
		},
	}}
	if diff := cmpProtoSlice(wantEndpoints, ks.GetEndpointSubsets()); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}

	if d := destinationByName(s.GetDestinations(), "details-bookinfo-east"); len(d.GetSpec().GetKubeService().GetSubsets()) != 0 {
		t.Errorf("details has one workload, so no subsets: %v", d.GetSpec().GetKubeService().GetSubsets())
	}
	if d := destinationByName(s.GetDestinations(), "external-bookinfo-east"); d.GetSpec().GetMesh() != nil {
		t.Errorf("an annotated service without workloads has mesh %v", d.GetSpec().GetMesh())
	}
	if d := destinationByName(s.GetDestinations(), "db-canary-apps-east"); d.GetSpec().GetMesh().GetName() != "istiod-canary-istio-system-east" {
		t.Errorf("db mesh = %v, want the canary mesh", d.GetSpec().GetMesh())
	}
}

func TestDestinationWithoutIstiod(t *testing.T) {
	d := estate()
	d.Deployments = nil
	s := BuildInputSnapshot(east, d)
	if len(s.GetMeshes()) != 0 {
		t.Fatalf("meshes = %v, want none", s.GetMeshes())
	}
	r := destinationByName(s.GetDestinations(), "reviews-bookinfo-east")
	if r == nil {
		t.Fatal("a Service backed by sidecar pods must be a destination without istiod")
	}
	if r.GetSpec().GetMesh() != nil {
		t.Errorf("mesh = %v, want none", r.GetSpec().GetMesh())
	}
}

func TestNamespaceScope(t *testing.T) {
	tests := []struct {
		name          string
		inScope       map[string]bool
		wantNS        []string
		wantPolicies  []string
		wantMeshCount int
	}{
		{"no filter", nil, []string{"bookinfo", "canary-apps", "istio-system"}, []string{"bookinfo/retries", "plain/other"}, 2},
		{"bookinfo only", map[string]bool{"bookinfo": true}, []string{"bookinfo"}, []string{"bookinfo/retries"}, 2},
		{"nothing", map[string]bool{}, nil, nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := estate()
			d.InScope = tt.inScope
			s := BuildInputSnapshot(east, d)
			var ns []string
			for _, w := range s.GetWorkloads() {
				ns = append(ns, w.GetMetadata().GetNamespace())
			}
			for _, d := range s.GetDestinations() {
				ns = append(ns, d.GetMetadata().GetNamespace())
			}
			slices.Sort(ns)
			ns = slices.Compact(ns)
			if !slices.Equal(ns, tt.wantNS) {
				t.Errorf("namespaces of workloads and destinations = %v, want %v", ns, tt.wantNS)
			}
			var pols []string
			for _, p := range s.GetTrafficPolicies() {
				pols = append(pols, p.GetMetadata().GetNamespace()+"/"+p.GetMetadata().GetName())
			}
			if !slices.Equal(pols, tt.wantPolicies) {
				t.Errorf("traffic policies = %v, want %v", pols, tt.wantPolicies)
			}
			if len(s.GetMeshes()) != tt.wantMeshCount {
				t.Errorf("%d meshes, want %d: the filter never hides control planes", len(s.GetMeshes()), tt.wantMeshCount)
			}
		})
	}
}

func TestEstateVersionIsStable(t *testing.T) {
	a := BuildInputSnapshot(east, estate())
	shuffled := estate()
	slices.Reverse(shuffled.Pods)
	slices.Reverse(shuffled.Services)
	slices.Reverse(shuffled.EndpointSlices)
	slices.Reverse(shuffled.Deployments)
	slices.Reverse(shuffled.Nodes)
	for i := range shuffled.EndpointSlices {
		slices.Reverse(shuffled.EndpointSlices[i].Endpoints)
	}
	b := BuildInputSnapshot(east, shuffled)
	if a.GetVersion() != b.GetVersion() {
		t.Errorf("list order changed the version:\n%s", cmpProto(a, b))
	}
	moved := estate()
	moved.Pods[0].Labels = map[string]string{"app": "reviews", "version": "v9", "pod-template-hash": "abc"}
	if BuildInputSnapshot(east, moved).GetVersion() == a.GetVersion() {
		t.Error("a label change kept the version")
	}
}

// cmpProto returns "" when want and got are equal, else both as text.
func cmpProto(want, got proto.Message) string {
	if proto.Equal(want, got) {
		return ""
	}
	return "- " + prototext.Format(want) + "\n+ " + prototext.Format(got)
}

func cmpProtoSlice[T proto.Message](want, got []T) string {
	if slices.EqualFunc(want, got, func(a, b T) bool { return proto.Equal(a, b) }) {
		return ""
	}
	var out string
	for _, w := range want {
		out += "- " + prototext.Format(w) + "\n"
	}
	for _, g := range got {
		out += "+ " + prototext.Format(g) + "\n"
	}
	return out
}

func cmpProtoMap[T proto.Message](want, got map[string]T) string {
	if maps.EqualFunc(want, got, func(a, b T) bool { return proto.Equal(a, b) }) {
		return ""
	}
	var out string
	for k, w := range want {
		out += "- " + k + ": " + prototext.Format(w) + "\n"
	}
	for k, g := range got {
		out += "+ " + k + ": " + prototext.Format(g) + "\n"
	}
	return out
}

// A gateway detector (from Settings, through the output snapshot) wins
// over the agent's flags field by field; a nil one changes nothing.
func TestOptionsWithDetector(t *testing.T) {
	flags := Options{EastWestGatewayLabels: map[string]string{"gw": "corp"}, TLSPortName: "tls"}
	if got := flags.WithDetector(nil); !maps.Equal(got.EastWestGatewayLabels, flags.EastWestGatewayLabels) || got.TLSPortName != "tls" || got.IngressGatewayLabels != nil {
		t.Fatalf("WithDetector(nil) = %+v, want the flags %+v", got, flags)
	}
	d := estate()
	d.Options = flags
	if gws := meshByName(BuildInputSnapshot(east, d), "istiod-istio-system-east").GetSpec().GetIstio().GetEastWestGateways(); len(gws) != 0 {
		t.Fatalf("with the flags' labels, east-west gateways %v, want none", gws)
	}
	d.Options = flags.WithDetector(&settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector{
		EastWestGatewayLabels: map[string]string{"istio": "eastwestgateway"}, EastWestGatewayTlsPortName: "status-port",
	})
	s := BuildInputSnapshot(east, d)
	gws := meshByName(s, "istiod-istio-system-east").GetSpec().GetIstio().GetEastWestGateways()
	if len(gws) != 1 || gws[0].GetExternalTlsPort() != 15021 || gws[0].GetTlsContainerPort() != 15021 {
		t.Fatalf("with the detector, east-west gateways %v, want istio-eastwestgateway on status-port (15021)", gws)
	}
	// The ingress labels the detector leaves alone keep their default.
	if in := meshByName(s, "istiod-canary-istio-system-east").GetSpec().GetIstio().GetIngressGateways(); len(in) != 1 {
		t.Fatalf("ingress gateways %v, want the default-labelled one", in)
	}
}
