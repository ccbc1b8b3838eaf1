package domain_test

import (
	"fmt"
	"strings"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
)

// referenceEstate builds the traffic part of the DESIGN.md reference
// estate: c clusters with s services each, two workloads (v1, v2) per
// service, and p TrafficPolicies, applied in the first cluster, each
// selecting one service with 3 retries and a 50/50 shift to v1/v2.
func referenceEstate(c, s, p int) map[string]*snapshotv1.InputSnapshot {
	inputs := map[string]*snapshotv1.InputSnapshot{}
	for ci := range c {
		cluster := fmt.Sprintf("cluster-%03d", ci)
		in := &snapshotv1.InputSnapshot{Cluster: cluster}
		for si := range s {
			name := fmt.Sprintf("svc-%04d", si)
			in.Destinations = append(in.Destinations, fuzzDestination(cluster, name))
			for _, v := range []string{"v1", "v2"} {
				in.Workloads = append(in.Workloads, fuzzWorkload(cluster, name+"-"+v, map[string]string{"app": name, "version": v}))
			}
		}
		inputs[cluster] = in
	}
	first := "cluster-000"
	for pi := range p {
		ci, si := pi%c, (pi/c)%s
		shift := func(v string) *networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination {
			return &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination{
				Weight: 50,
				DestinationType: &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_KubeService{
					KubeService: &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_KubeDestination{
						Name: fmt.Sprintf("svc-%04d", si), Subset: map[string]string{"version": v},
					},
				},
			}
		}
		inputs[first].TrafficPolicies = append(inputs[first].TrafficPolicies, &networkingv1.TrafficPolicy{
			Metadata: &commonv1.ObjectMeta{Name: fmt.Sprintf("policy-%05d", pi), Namespace: "default", Cluster: first, Generation: 1},
			Spec: &networkingv1.TrafficPolicySpec{
				DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
					KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{
						Name: fmt.Sprintf("svc-%04d", si), Namespace: "default", Cluster: fmt.Sprintf("cluster-%03d", ci),
					}}},
				}}},
				Policy: &networkingv1.TrafficPolicySpec_Policy{
					Retries:      &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: 3},
					TrafficShift: &networkingv1.TrafficPolicySpec_Policy_MultiDestination{Destinations: []*networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination{shift("v1"), shift("v2")}},
				},
			},
		})
	}
	for _, in := range inputs {
		snapshots.SealInput(in)
	}
	return inputs
}

func BenchmarkTranslate(b *testing.B) {
	for _, e := range []struct{ c, s, p int }{{10, 100, 100}, {10, 1000, 1000}} {
		b.Run(fmt.Sprintf("C=%d/S=%d/P=%d", e.c, e.s, e.p), func(b *testing.B) {
			inputs := referenceEstate(e.c, e.s, e.p)
			b.ReportAllocs()
			var objects int
			for b.Loop() {
				out, err := domain.Translate(inputs, domain.Options{})
				if err != nil {
					b.Fatal(err)
				}
				objects = 0
				for _, o := range out {
					objects += len(o.GetObjects())
				}
			}
			b.ReportMetric(float64(objects), "objects")
		})
	}
}

// TestReferenceEstate checks the benchmark's estate translates as meant:
// every policy accepted, one VirtualService per policy.
func TestReferenceEstate(t *testing.T) {
	out, err := domain.Translate(referenceEstate(3, 10, 12), domain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	vs := 0
	for _, o := range out {
		for _, obj := range o.GetObjects() {
			if obj.GetKind() == "VirtualService" {
				vs++
			}
		}
		for _, st := range o.GetStatuses() {
			if got := string(st.GetStatus()); !strings.Contains(got, `"state":"ACCEPTED"`) || strings.Contains(got, "INVALID") {
				t.Errorf("%s: %s", st.GetName(), got)
			}
		}
	}
	if vs != 12 {
		t.Fatalf("%d VirtualServices, want 12", vs)
	}
}
