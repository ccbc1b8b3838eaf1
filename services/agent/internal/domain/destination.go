package domain

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
)

type (
	kubeServiceSpec = discoveryv1.DestinationSpec_KubeService
	endpointsSubset = discoveryv1.DestinationSpec_KubeService_EndpointsSubset
	endpointProto   = discoveryv1.DestinationSpec_KubeService_EndpointsSubset_Endpoint
	endpointPort    = discoveryv1.DestinationSpec_KubeService_EndpointsSubset_EndpointPort
)

var serviceTypes = map[string]discoveryv1.DestinationSpec_KubeService_ServiceType{
	"ClusterIP":    discoveryv1.DestinationSpec_KubeService_CLUSTER_IP,
	"NodePort":     discoveryv1.DestinationSpec_KubeService_NODE_PORT,
	"LoadBalancer": discoveryv1.DestinationSpec_KubeService_LOAD_BALANCER,
	"ExternalName": discoveryv1.DestinationSpec_KubeService_EXTERNAL_NAME,
}

// destinations are the in-scope Services that select mesh workloads, or
// that are annotated to be discovered. A Service backed by sidecar pods is a
// destination even when no istiod is found; its mesh is then empty.
func (ix *index) destinations() []*discoveryv1.Destination {
	bySvc := ix.slicesByService()
	var out []*discoveryv1.Destination
	for i := range ix.d.Services {
		svc := &ix.d.Services[i]
		if !ix.inScope(svc.Namespace) || svc.Discover == "false" {
			continue
		}
		backing := ix.backingWorkloads(svc)
		if len(backing) == 0 && svc.Discover != "true" {
			continue
		}
		out = append(out, ix.destination(svc, backing, bySvc[nsName{svc.Namespace, svc.Name}]))
	}
	return out
}

// backingWorkloads are the workloads of the sidecar pods svc selects.
func (ix *index) backingWorkloads(svc *Service) []*workload {
	var out []*workload
	for _, p := range ix.selected(svc.Namespace, svc.Selector) {
		if w := ix.ofPod[p]; w != nil && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

func (ix *index) slicesByService() map[nsName][]*EndpointSlice {
	out := map[nsName][]*EndpointSlice{}
	for i := range ix.d.EndpointSlices {
		es := &ix.d.EndpointSlices[i]
		k := nsName{es.Namespace, es.Service}
		out[k] = append(out[k], es)
	}
	return out
}

func (ix *index) destination(svc *Service, backing []*workload, eps []*EndpointSlice) *discoveryv1.Destination {
	domainSuffix := cmp.Or(ix.id.ClusterDomain, "cluster.local")
	ks := &kubeServiceSpec{
		Ref:                    &commonv1.ClusterObjectRef{Name: svc.Name, Namespace: svc.Namespace, Cluster: ix.id.Cluster},
		WorkloadSelectorLabels: cloneLabels(svc.Selector),
		Labels:                 cloneLabels(svc.Labels),
		ServiceType:            serviceTypes[svc.Type],
		Hostname:               fmt.Sprintf("%s.%s.svc.%s", svc.Name, svc.Namespace, domainSuffix),
		Region:                 ix.region,
		Subsets:                subsets(backing),
		EndpointSubsets:        ix.endpointSubsets(eps),
	}
	for _, p := range svc.Ports {
		ks.Ports = append(ks.Ports, &discoveryv1.DestinationSpec_KubeService_KubeServicePort{
			Port: p.Port, Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol,
			TargetPortNumber: p.TargetPort, TargetPortName: p.TargetName,
		})
	}
	spec := &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: ks}}
	for _, w := range backing {
		if w.mesh != nil {
			spec.Mesh = w.mesh.ref(ix.id.Cluster)
			break
		}
	}
	return &discoveryv1.Destination{
		Metadata: &commonv1.ObjectMeta{
			// Destinations are named after their Service and cluster, so that
			// names are unique across the estate.
			Name:      fmt.Sprintf("%s-%s-%s", svc.Name, svc.Namespace, ix.id.Cluster),
			Namespace: svc.Namespace,
			Cluster:   ix.id.Cluster,
		},
		Spec: spec,
	}
}

// subsets are the label keys that take more than one value among the
// backing workloads, with those values sorted.
func subsets(backing []*workload) map[string]*discoveryv1.DestinationSpec_KubeService_Subset {
	values := map[string][]string{}
	for _, w := range backing {
		for k, v := range w.labels {
			if !slices.Contains(values[k], v) {
				values[k] = append(values[k], v)
			}
		}
	}
	var out map[string]*discoveryv1.DestinationSpec_KubeService_Subset
	for k, vs := range values {
		if len(vs) < 2 {
			continue
		}
		slices.Sort(vs)
		if out == nil {
			out = map[string]*discoveryv1.DestinationSpec_KubeService_Subset{}
		}
		out[k] = &discoveryv1.DestinationSpec_KubeService_Subset{Values: vs}
	}
	return out
}

// endpointSubsets merges the slices of one Service by port set. Endpoints
// that are known not to be ready are left out.
func (ix *index) endpointSubsets(eps []*EndpointSlice) []*endpointsSubset {
	byPorts := map[string]*endpointsSubset{}
	for _, es := range eps {
		key := portsKey(es.Ports)
		sub := byPorts[key]
		if sub == nil {
			sub = &endpointsSubset{}
			for _, p := range es.Ports {
				sub.Ports = append(sub.Ports, &endpointPort{Port: p.Port, Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol})
			}
			slices.SortFunc(sub.Ports, func(a, b *endpointPort) int {
				return cmp.Or(cmp.Compare(a.GetName(), b.GetName()), cmp.Compare(a.GetPort(), b.GetPort()))
			})
			byPorts[key] = sub
		}
		for _, e := range es.Endpoints {
			if !e.Ready {
				continue
			}
			var labels map[string]string
			nodeName := e.NodeName
			if p := ix.pods[nsName{es.Namespace, e.Pod}]; e.Pod != "" && p != nil {
				labels = podLabels(p)
				nodeName = cmp.Or(nodeName, p.NodeName)
			}
			loc := &discoveryv1.DestinationSpec_KubeService_SubLocality{Zone: e.Zone}
			if n := ix.nodes[nodeName]; n != nil {
				loc.Zone = cmp.Or(n.Labels[LabelZone], n.Labels["failure-domain.beta.kubernetes.io/zone"], e.Zone)
				loc.SubZone = n.Labels[LabelSubzone]
			}
			if loc.Zone == "" && loc.SubZone == "" {
				loc = nil
			}
			for _, addr := range e.Addresses {
				sub.Endpoints = append(sub.Endpoints, &endpointProto{IpAddress: addr, Labels: labels, SubLocality: loc})
			}
		}
	}
	keys := make([]string, 0, len(byPorts))
	for k := range byPorts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]*endpointsSubset, 0, len(keys))
	for _, k := range keys {
		sub := byPorts[k]
		if len(sub.Endpoints) == 0 {
			continue
		}
		slices.SortFunc(sub.Endpoints, func(a, b *endpointProto) int { return strings.Compare(a.GetIpAddress(), b.GetIpAddress()) })
		sub.Endpoints = slices.CompactFunc(sub.Endpoints, func(a, b *endpointProto) bool { return a.GetIpAddress() == b.GetIpAddress() })
		out = append(out, sub)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func portsKey(ports []EndpointPort) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		parts = append(parts, p.Name+"/"+strconv.FormatUint(uint64(p.Port), 10)+"/"+p.Protocol+"/"+p.AppProtocol)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
