package domain

import (
	"fmt"
	"testing"

	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

func endpointsAt(localities ...string) []*istiov1alpha3.WorkloadEntry {
	var out []*istiov1alpha3.WorkloadEntry
	for i, l := range localities {
		out = append(out, &istiov1alpha3.WorkloadEntry{Address: fmt.Sprintf("ep%d", i), Locality: l})
	}
	return out
}

// lbPriority is Istio's locality priority of an endpoint for a client in
// region/zone (pilot/pkg/networking/core/loadbalancer, applyLocalityFailover):
// 0 same region, zone; 2 same region; 3 the failover target of the
// client's region; 4 any other (the subzone level is left out).
func lbPriority(region, zone, locality string, failover []*istiov1alpha3.LocalityLoadBalancerSetting_Failover) int {
	r, z := locality, ""
	for i := range locality {
		if locality[i] == '/' {
			r, z = locality[:i], locality[i+1:]
			break
		}
	}
	switch {
	case r == region && z == zone:
		return 0
	case r == region:
		return 2
	}
	for _, f := range failover {
		if f.GetFrom() == region {
			if f.GetTo() == r {
				return 3
			}
			return 4
		}
	}
	return 3
}

// A static list resolved by DNS gets Istio priorities in list order for a
// client anywhere in its cluster's region, local service first or not.
func TestStaticDNSLocalitiesOrderByList(t *testing.T) {
	for _, tc := range []struct {
		name       string
		localities []string
	}{
		{"remote first", []string{"us-west-1", "us-east-1/us-east-1a"}},
		{"local first", []string{"us-east-1/us-east-1b", "us-west-1", "eu-south-1"}},
		{"unknown localities", []string{"", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eps := endpointsAt(tc.localities...)
			fo := staticDNSLocalities(eps, "us-east-1")
			for _, zone := range []string{"us-east-1a", "us-east-1b", ""} {
				prev := -1
				for i, ep := range eps {
					p := lbPriority("us-east-1", zone, ep.GetLocality(), fo)
					if p <= prev {
						t.Errorf("client in zone %q: endpoint %d (%s) has priority %d, not after %d", zone, i, ep.GetLocality(), p, prev)
					}
					prev = p
				}
			}
			if len(fo) != 1 || fo[0].GetFrom() == fo[0].GetTo() {
				t.Errorf("failover %v", fo)
			}
		})
	}
	// A local service first keeps its own zone, so nearer clients prefer it.
	eps := endpointsAt("us-east-1/us-east-1b", "us-west-1")
	staticDNSLocalities(eps, "us-east-1")
	if got := eps[0].GetLocality(); got != "us-east-1/us-east-1b" {
		t.Errorf("first endpoint's locality %q, want its own", got)
	}
}

// A static list resolved by EDS is ordered with failoverPriority: the i-th
// endpoint matches the first n-1-i labels.
func TestStaticFailoverPriorityLabels(t *testing.T) {
	eps := endpointsAt("a", "b", "c")
	got := staticFailoverPriority(eps)
	want := []string{LabelFailoverRankPrefix + "1=true", LabelFailoverRankPrefix + "2=true"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("failoverPriority %v, want %v", got, want)
	}
	for i, n := range []int{2, 1, 0} {
		if len(eps[i].GetLabels()) != n {
			t.Errorf("endpoint %d labels %v, want %d rank labels", i, eps[i].GetLabels(), n)
		}
	}
}
