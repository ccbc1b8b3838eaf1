package domain

import (
	"fmt"
	"testing"
)

// scaledEstate is the estate of the adapter's BenchmarkDiscovery10kPods as
// plain structs: 1,000 Services, 2,000 Deployments, 10,000 sidecar pods.
func scaledEstate() Discovered {
	d := Discovered{
		Deployments: []Deployment{{Name: "istiod", Namespace: "istio-system", Labels: map[string]string{"app": "istiod"},
			PodLabels: map[string]string{"app": "istiod"}, ServiceAccount: "istiod", DiscoveryImage: "pilot:1.24.0"}},
		Nodes: []Node{
			{Name: "node-0", Labels: map[string]string{LabelRegion: "r", LabelZone: "a"}},
			{Name: "node-1", Labels: map[string]string{LabelRegion: "r", LabelZone: "b"}},
			{Name: "node-2", Labels: map[string]string{LabelRegion: "r", LabelZone: "c"}},
		},
	}
	for s := range 1000 {
		ns, app := fmt.Sprintf("apps-%d", s%10), fmt.Sprintf("svc-%d", s)
		d.Services = append(d.Services, Service{Name: app, Namespace: ns, Type: "ClusterIP", Labels: map[string]string{"app": app},
			Selector: map[string]string{"app": app}, Ports: []ServicePort{{Name: "http", Port: 9080, Protocol: "TCP", TargetPort: 9080}}})
		es := EndpointSlice{Name: app + "-x", Namespace: ns, Service: app, Ports: []EndpointPort{{Name: "http", Port: 9080, Protocol: "TCP"}}}
		for _, v := range []string{"v1", "v2"} {
			rs := app + "-" + v + "-abc"
			d.ReplicaSets = append(d.ReplicaSets, ReplicaSet{Name: rs, Namespace: ns, Controller: OwnerRef{Kind: "Deployment", Name: app + "-" + v}})
			for p := range 5 {
				name := fmt.Sprintf("%s-%d", rs, p)
				ip := fmt.Sprintf("10.%d.%d.%d", s/250, s%250, len(es.Endpoints)+1)
				node := fmt.Sprintf("node-%d", p%3)
				d.Pods = append(d.Pods, Pod{Name: name, Namespace: ns, Labels: map[string]string{"app": app, "version": v, "pod-template-hash": "abc"},
					ServiceAccount: "default", Controller: OwnerRef{Kind: "ReplicaSet", Name: rs}, Sidecar: true, SidecarRevision: "default",
					Ready: true, IP: ip, NodeName: node})
				es.Endpoints = append(es.Endpoints, Endpoint{Addresses: []string{ip}, Ready: true, NodeName: node, Pod: name})
			}
		}
		d.EndpointSlices = append(d.EndpointSlices, es)
	}
	return d
}

func BenchmarkBuildInputSnapshot10kPods(b *testing.B) {
	d := scaledEstate()
	b.ReportAllocs()
	for b.Loop() {
		s := BuildInputSnapshot(east, d)
		if len(s.GetWorkloads()) != 2000 || len(s.GetDestinations()) != 1000 {
			b.Fatalf("%d workloads, %d destinations", len(s.GetWorkloads()), len(s.GetDestinations()))
		}
	}
}
