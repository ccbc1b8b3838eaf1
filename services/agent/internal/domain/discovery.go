// Package domain holds the agent's rules: how what it sees in its cluster
// becomes an input snapshot, and which applied objects an output snapshot
// makes obsolete. It imports no Kubernetes or RPC package; the kube adapter
// converts API objects into the plain types here.
package domain

import (
	"fmt"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// Service is the part of a Kubernetes Service that discovery uses.
type Service struct {
	Name      string
	Namespace string
	Labels    map[string]string
	Selector  map[string]string
	Type      string // ClusterIP, NodePort, LoadBalancer, ExternalName
	Ports     []ServicePort
}

// ServicePort is one port of a Service.
type ServicePort struct {
	Name        string
	Port        uint32
	Protocol    string
	AppProtocol string
	TargetPort  uint32
	TargetName  string
}

// Discovered is everything the agent found in its cluster.
type Discovered struct {
	Services []Service
}

// Identity says who produced a snapshot.
type Identity struct {
	Cluster       string
	AgentVersion  string
	Replica       string
	Namespace     string
	ClusterDomain string
}

// BuildInputSnapshot turns what was discovered into a sealed input snapshot.
func BuildInputSnapshot(id Identity, d Discovered) *snapshotv1.InputSnapshot {
	s := &snapshotv1.InputSnapshot{
		Cluster: id.Cluster,
		Agent:   &snapshotv1.AgentInfo{Version: id.AgentVersion, Replica: id.Replica, Namespace: id.Namespace},
	}
	for _, svc := range d.Services {
		s.Destinations = append(s.Destinations, destination(id, svc))
	}
	snapshots.SealInput(s)
	return s
}

var serviceTypes = map[string]discoveryv1.DestinationSpec_KubeService_ServiceType{
	"ClusterIP":    discoveryv1.DestinationSpec_KubeService_CLUSTER_IP,
	"NodePort":     discoveryv1.DestinationSpec_KubeService_NODE_PORT,
	"LoadBalancer": discoveryv1.DestinationSpec_KubeService_LOAD_BALANCER,
	"ExternalName": discoveryv1.DestinationSpec_KubeService_EXTERNAL_NAME,
}

func destination(id Identity, svc Service) *discoveryv1.Destination {
	domainSuffix := id.ClusterDomain
	if domainSuffix == "" {
		domainSuffix = "cluster.local"
	}
	ks := &discoveryv1.DestinationSpec_KubeService{
		Ref:                    &commonv1.ClusterObjectRef{Name: svc.Name, Namespace: svc.Namespace, Cluster: id.Cluster},
		WorkloadSelectorLabels: svc.Selector,
		Labels:                 svc.Labels,
		ServiceType:            serviceTypes[svc.Type],
		Hostname:               fmt.Sprintf("%s.%s.svc.%s", svc.Name, svc.Namespace, domainSuffix),
	}
	for _, p := range svc.Ports {
		ks.Ports = append(ks.Ports, &discoveryv1.DestinationSpec_KubeService_KubeServicePort{
			Port: p.Port, Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol,
			TargetPortNumber: p.TargetPort, TargetPortName: p.TargetName,
		})
	}
	return &discoveryv1.Destination{
		Metadata: &commonv1.ObjectMeta{
			// Destinations are named after their Service and cluster, so that
			// names are unique across the estate.
			Name:      fmt.Sprintf("%s-%s-%s", svc.Name, svc.Namespace, id.Cluster),
			Namespace: svc.Namespace,
			Cluster:   id.Cluster,
		},
		Spec: &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: ks}},
	}
}
