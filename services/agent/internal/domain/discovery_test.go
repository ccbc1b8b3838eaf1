package domain

import (
	"slices"
	"strings"
	"testing"

	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

var east = Identity{Cluster: "east", AgentVersion: "1.0.0", Replica: "agent-0", Namespace: "meshplane"}

func reviews() Service {
	return Service{
		Name: "reviews", Namespace: "bookinfo", Type: "ClusterIP", Discover: "true",
		Labels:   map[string]string{"app": "reviews"},
		Selector: map[string]string{"app": "reviews"},
		Ports: []ServicePort{
			{Name: "http", Port: 9080, Protocol: "TCP", AppProtocol: "http", TargetPort: 9080},
			{Name: "grpc", Port: 9090, Protocol: "TCP", TargetName: "grpc-port"},
		},
	}
}

func ratings() Service {
	return Service{Name: "ratings", Namespace: "bookinfo", Type: "NodePort", Discover: "true",
		Ports: []ServicePort{{Name: "http", Port: 9080, Protocol: "TCP", TargetPort: 8080}}}
}

func details() Service {
	return Service{Name: "details", Namespace: "shop", Type: "LoadBalancer", Discover: "true",
		Ports: []ServicePort{{Name: "http", Port: 80, Protocol: "TCP", TargetPort: 8080}}}
}

func kubeService(t *testing.T, d *discoveryv1.Destination) *discoveryv1.DestinationSpec_KubeService {
	t.Helper()
	ks := d.GetSpec().GetKubeService()
	if ks == nil {
		t.Fatalf("destination %s has no kube service", d.GetMetadata().GetName())
	}
	return ks
}

func TestBuildInputSnapshotDestination(t *testing.T) {
	tests := []struct {
		name         string
		id           Identity
		svc          Service
		wantName     string
		wantHost     string
		wantType     discoveryv1.DestinationSpec_KubeService_ServiceType
		wantPorts    []*discoveryv1.DestinationSpec_KubeService_KubeServicePort
		wantSelector map[string]string
	}{
		{
			name:     "numeric and named target ports, default cluster domain",
			id:       east,
			svc:      reviews(),
			wantName: "reviews-bookinfo-east",
			wantHost: "reviews.bookinfo.svc.cluster.local",
			wantType: discoveryv1.DestinationSpec_KubeService_CLUSTER_IP,
			wantPorts: []*discoveryv1.DestinationSpec_KubeService_KubeServicePort{
				{Port: 9080, Name: "http", Protocol: "TCP", AppProtocol: "http", TargetPortNumber: 9080},
				{Port: 9090, Name: "grpc", Protocol: "TCP", TargetPortName: "grpc-port"},
			},
			wantSelector: map[string]string{"app": "reviews"},
		},
		{
			name:     "custom cluster domain and another cluster",
			id:       Identity{Cluster: "west", ClusterDomain: "west.example"},
			svc:      ratings(),
			wantName: "ratings-bookinfo-west",
			wantHost: "ratings.bookinfo.svc.west.example",
			wantType: discoveryv1.DestinationSpec_KubeService_NODE_PORT,
			wantPorts: []*discoveryv1.DestinationSpec_KubeService_KubeServicePort{
				{Port: 9080, Name: "http", Protocol: "TCP", TargetPortNumber: 8080},
			},
		},
		{
			name:     "load balancer",
			id:       east,
			svc:      details(),
			wantName: "details-shop-east",
			wantHost: "details.shop.svc.cluster.local",
			wantType: discoveryv1.DestinationSpec_KubeService_LOAD_BALANCER,
			wantPorts: []*discoveryv1.DestinationSpec_KubeService_KubeServicePort{
				{Port: 80, Name: "http", Protocol: "TCP", TargetPortNumber: 8080},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := BuildInputSnapshot(tt.id, Discovered{Services: []Service{tt.svc}})
			if s.GetCluster() != tt.id.Cluster {
				t.Errorf("cluster = %q, want %q", s.GetCluster(), tt.id.Cluster)
			}
			if !strings.HasPrefix(s.GetVersion(), snapshots.VersionPrefix) {
				t.Errorf("version = %q, want a sealed content hash", s.GetVersion())
			}
			if got := len(s.GetDestinations()); got != 1 {
				t.Fatalf("%d destinations, want 1", got)
			}
			d := s.GetDestinations()[0]
			md := d.GetMetadata()
			if md.GetName() != tt.wantName || md.GetNamespace() != tt.svc.Namespace || md.GetCluster() != tt.id.Cluster {
				t.Errorf("metadata = %v, want name %q namespace %q cluster %q", md, tt.wantName, tt.svc.Namespace, tt.id.Cluster)
			}
			ks := kubeService(t, d)
			if ks.GetHostname() != tt.wantHost {
				t.Errorf("hostname = %q, want %q", ks.GetHostname(), tt.wantHost)
			}
			if ks.GetServiceType() != tt.wantType {
				t.Errorf("service type = %v, want %v", ks.GetServiceType(), tt.wantType)
			}
			ref := ks.GetRef()
			if ref.GetName() != tt.svc.Name || ref.GetNamespace() != tt.svc.Namespace || ref.GetCluster() != tt.id.Cluster {
				t.Errorf("ref = %v", ref)
			}
			if !slices.EqualFunc(ks.GetPorts(), tt.wantPorts, func(a, b *discoveryv1.DestinationSpec_KubeService_KubeServicePort) bool {
				return proto.Equal(a, b)
			}) {
				t.Errorf("ports = %v, want %v", ks.GetPorts(), tt.wantPorts)
			}
			if tt.wantSelector != nil && !mapsEqual(ks.GetWorkloadSelectorLabels(), tt.wantSelector) {
				t.Errorf("selector = %v, want %v", ks.GetWorkloadSelectorLabels(), tt.wantSelector)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestBuildInputSnapshotVersion(t *testing.T) {
	base := BuildInputSnapshot(east, Discovered{Services: []Service{reviews(), ratings(), details()}})

	changedPort := reviews()
	changedPort.Ports[1].TargetName = "grpc-alt"
	changedLabel := ratings()
	changedLabel.Labels = map[string]string{"version": "v2"}

	tests := []struct {
		name string
		id   Identity
		d    Discovered
		same bool
	}{
		{"same content, other order", east, Discovered{Services: []Service{details(), ratings(), reviews()}}, true},
		{"same content, another replica", Identity{Cluster: "east", AgentVersion: "1.0.0", Replica: "agent-1", Namespace: "meshplane"},
			Discovered{Services: []Service{reviews(), ratings(), details()}}, true},
		{"a service fewer", east, Discovered{Services: []Service{reviews(), ratings()}}, false},
		{"a named target port changed", east, Discovered{Services: []Service{changedPort, ratings(), details()}}, false},
		{"a label changed", east, Discovered{Services: []Service{reviews(), changedLabel, details()}}, false},
		{"another cluster", Identity{Cluster: "west", AgentVersion: "1.0.0", Namespace: "meshplane"},
			Discovered{Services: []Service{reviews(), ratings(), details()}}, false},
		{"another agent version", Identity{Cluster: "east", AgentVersion: "1.1.0", Namespace: "meshplane"},
			Discovered{Services: []Service{reviews(), ratings(), details()}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BuildInputSnapshot(tt.id, tt.d)
			if same := got.GetVersion() == base.GetVersion(); same != tt.same {
				t.Errorf("version %s vs %s: same = %v, want %v", got.GetVersion(), base.GetVersion(), same, tt.same)
			}
			if tt.same && !proto.Equal(stripVolatile(got), stripVolatile(base)) {
				t.Errorf("same version but different content:\n%v\n%v", got, base)
			}
		})
	}
}

func stripVolatile[T proto.Message](m T) T {
	c := proto.Clone(m)
	r := c.ProtoReflect()
	for _, f := range []string{"agent", "version"} {
		r.Clear(r.Descriptor().Fields().ByName(protoreflect.Name(f)))
	}
	return c.(T)
}
