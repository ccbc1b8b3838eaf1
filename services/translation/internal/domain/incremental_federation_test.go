package domain_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// withTrafficPolicies returns inputs with cluster's TrafficPolicies
// replaced by edit's result; inputs are not modified.
func withTrafficPolicies(inputs map[string]*snapshotv1.InputSnapshot, cluster string, edit func([]*networkingv1.TrafficPolicy) []*networkingv1.TrafficPolicy) map[string]*snapshotv1.InputSnapshot {
	out := maps.Clone(inputs)
	in := shallowInput(inputs[cluster])
	in.TrafficPolicies = edit(slices.Clone(in.TrafficPolicies))
	snapshots.SealInput(in)
	out[cluster] = in
	return out
}

// objectSpec decodes the spec of the object of kind at namespace/name in
// out, or fails.
func objectSpec(t *testing.T, out *snapshotv1.OutputSnapshot, kind, namespace, name string) map[string]any {
	t.Helper()
	for _, o := range out.GetObjects() {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			var spec map[string]any
			if err := json.Unmarshal(o.GetSpec(), &spec); err != nil {
				t.Fatal(err)
			}
			return spec
		}
	}
	t.Fatalf("cluster %s has no %s %s/%s", out.GetCluster(), kind, namespace, name)
	return nil
}

// TestIncrementalEditReachesClientClusters edits the weights of the
// worked example's traffic shift (reviews in east, 10% to reviews v2 in
// west): the incremental translation rewrites the VirtualService that
// west's clients get for reviews.default.svc.east.global, as a full
// translation does, without a full translation. Adding a subset of a
// federated service changes federation's DestinationRules, which takes a
// full translation.
func TestIncrementalEditReachesClientClusters(t *testing.T) {
	inputs := readInputs(t, filepath.Join(goldenDir, "federation-traffic-shift", "input.yaml"))
	inc := domain.NewIncremental(domain.Options{})
	first, err := inc.Translate(inputs, domain.LastGood{})
	if err != nil {
		t.Fatal(err)
	}
	weights := func(out *snapshotv1.OutputSnapshot) []any {
		spec := objectSpec(t, out, "VirtualService", "istio-system", "reviews.default.svc.east.global")
		var ws []any
		for _, r := range spec["http"].([]any)[0].(map[string]any)["route"].([]any) {
			ws = append(ws, r.(map[string]any)["weight"])
		}
		return ws
	}
	if got := weights(first.Outputs["west"]); fmt.Sprint(got) != "[90 10]" {
		t.Fatalf("west's client VirtualService has weights %v before the edit, want [90 10]", got)
	}

	setWeights := func(list []*networkingv1.TrafficPolicy, local, remote uint32, subset string) []*networkingv1.TrafficPolicy {
		for i, p := range list {
			if p.GetMetadata().GetName() != "reviews-to-west" {
				continue
			}
			p = proto.CloneOf(p)
			p.Metadata.Generation++
			ds := p.GetSpec().GetPolicy().GetTrafficShift().GetDestinations()
			ds[0].Weight, ds[1].Weight = local, remote
			ds[1].GetKubeService().Subset = map[string]string{"version": subset}
			list[i] = p
		}
		return list
	}
	edited := withTrafficPolicies(inputs, "mgmt", func(l []*networkingv1.TrafficPolicy) []*networkingv1.TrafficPolicy {
		return setWeights(l, 80, 20, "v2")
	})
	got, err := inc.Translate(edited, first.LastGood)
	if err != nil {
		t.Fatal(err)
	}
	if full, incremental := inc.Counts(); full != 1 || incremental != 1 {
		t.Fatalf("%d full and %d incremental translations, want the edit incremental", full, incremental)
	}
	want, err := domain.TranslateResult(edited, domain.Options{}, first.LastGood)
	if err != nil {
		t.Fatal(err)
	}
	for c, w := range want.Outputs {
		if got.Outputs[c].GetVersion() != w.GetVersion() {
			t.Errorf("cluster %s: incremental version %s, full %s", c, got.Outputs[c].GetVersion(), w.GetVersion())
		}
	}
	if ws := weights(got.Outputs["west"]); fmt.Sprint(ws) != "[80 20]" {
		t.Fatalf("west's client VirtualService has weights %v after the edit, want [80 20]", ws)
	}
	if got.Outputs["east"].GetVersion() == first.Outputs["east"].GetVersion() || got.Outputs["west"].GetVersion() == first.Outputs["west"].GetVersion() {
		t.Fatal("the edit left the output of east or west as it was")
	}

	// v1 instead of v2: the federated host's subsets change.
	again := withTrafficPolicies(edited, "mgmt", func(l []*networkingv1.TrafficPolicy) []*networkingv1.TrafficPolicy {
		return setWeights(l, 80, 20, "v1")
	})
	got, err = inc.Translate(again, got.LastGood)
	if err != nil {
		t.Fatal(err)
	}
	if full, _ := inc.Counts(); full != 2 {
		t.Fatalf("%d full translations, want a full one for a new subset of a federated service", full)
	}
	dr := objectSpec(t, got.Outputs["east"], "DestinationRule", "istio-system", "reviews.default.svc.west.global")
	if fmt.Sprint(dr["subsets"]) != "[map[name:version-v1]]" {
		t.Fatalf("east's DestinationRule for reviews.default.svc.west.global has subsets %v, want version-v1 alone", dr["subsets"])
	}
}

// crossClusterPolicy is a random TrafficPolicy of the management cluster
// over the federation estates: a shift to the same service in the other
// cluster (with or without a subset), a mirror there, or route settings
// for the clients of one cluster.
func crossClusterPolicy(rng *rand.Rand, name string) *networkingv1.TrafficPolicy {
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	svc, cluster := pick("reviews", "ratings", "productpage"), pick("east", "west")
	other := map[string]string{"east": "west", "west": "east"}[cluster]
	pol := &networkingv1.TrafficPolicySpec_Policy{}
	var sources []*networkingv1.WorkloadSelector
	switch rng.IntN(3) {
	case 0:
		remote := &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_KubeDestination{Name: pick(svc, "reviews"), Cluster: other, Port: 9080}
		if rng.IntN(2) == 0 {
			remote.Subset = map[string]string{"version": pick("v1", "v2")}
		}
		pol.TrafficShift = &networkingv1.TrafficPolicySpec_Policy_MultiDestination{Destinations: []*networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination{
			{Weight: uint32(rng.IntN(100)), DestinationType: &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_KubeService{
				KubeService: &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_KubeDestination{Name: svc, Port: 9080}}},
			{Weight: uint32(1 + rng.IntN(100)), DestinationType: &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_KubeService{KubeService: remote}},
		}}
	case 1:
		pol.Mirror = &networkingv1.TrafficPolicySpec_Policy_Mirror{
			DestinationType: &networkingv1.TrafficPolicySpec_Policy_Mirror_KubeService{KubeService: &commonv1.ClusterObjectRef{Name: pick("reviews", "ratings", "productpage"), Namespace: "default", Cluster: pick(cluster, other)}},
			Percentage:      float64(rng.IntN(100)), Port: 9080,
		}
	default:
		pol.RequestTimeout = durationpb.New(time.Duration(1+rng.IntN(5)) * time.Second)
		if rng.IntN(2) == 0 {
			sources = []*networkingv1.WorkloadSelector{{Type: &networkingv1.WorkloadSelector_KubeWorkloadMatcher_{KubeWorkloadMatcher: &networkingv1.WorkloadSelector_KubeWorkloadMatcher{Clusters: []string{pick("east", "west")}}}}}
		}
	}
	return &networkingv1.TrafficPolicy{
		Metadata: &commonv1.ObjectMeta{Name: name, Namespace: "default", Cluster: "mgmt", Generation: 1, CreationTimestamp: &timestamppb.Timestamp{Seconds: int64(rng.IntN(3))}},
		Spec: &networkingv1.TrafficPolicySpec{
			DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
				KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{Name: svc, Namespace: "default", Cluster: cluster}}},
			}}},
			SourceSelector: sources,
			Policy:         pol,
		},
	}
}

// TestIncrementalMatchesFullAcrossClusters is TestIncrementalMatchesFull
// over the federation golden estates, with policies that reach clients in
// other clusters and services in other clusters: every step gives the
// versions and last valid versions a full translation gives, and passes
// the fuzz test's checks (the fuzz estates seldom federate).
func TestIncrementalMatchesFullAcrossClusters(t *testing.T) {
	for _, name := range []string{"federation-traffic-shift", "federation-route-policies", "federation-permissive"} {
		for seed := range 8 {
			t.Run(fmt.Sprintf("%s/%d", name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(seed), 16))
				inputs := readInputs(t, filepath.Join(goldenDir, name, "input.yaml"))
				if inputs["mgmt"] == nil {
					t.Fatal("the case has no mgmt input")
				}
				inc := domain.NewIncremental(domain.Options{})
				var incLast, fullLast domain.LastGood
				for step := range 30 {
					got, err := inc.Translate(inputs, incLast)
					if err != nil {
						t.Fatalf("step %d: incremental: %v", step, err)
					}
					want, err := domain.TranslateResult(inputs, domain.Options{}, fullLast)
					if err != nil {
						t.Fatalf("step %d: full: %v", step, err)
					}
					for c, w := range want.Outputs {
						if g := got.Outputs[c]; g.GetVersion() != w.GetVersion() {
							t.Fatalf("step %d: cluster %s: incremental version %s, full %s:\n%s", step, c, g.GetVersion(), w.GetVersion(), outputDiff(g, w))
						}
					}
					if !maps.EqualFunc(got.LastGood.Traffic, want.LastGood.Traffic, func(a, b domain.LastGoodTraffic) bool { return a.Generation == b.Generation }) {
						t.Fatalf("step %d: last good %v, want %v", step, slices.Collect(maps.Keys(got.LastGood.Traffic)), slices.Collect(maps.Keys(want.LastGood.Traffic)))
					}
					// Deterministic, decodable, protojson's bytes.
					checkInputs(t, inputs)
					incLast, fullLast = got.LastGood, want.LastGood
					inputs = withTrafficPolicies(inputs, "mgmt", func(l []*networkingv1.TrafficPolicy) []*networkingv1.TrafficPolicy {
						switch n := len(l); {
						case n > 0 && rng.IntN(4) == 0:
							i := rng.IntN(n)
							return slices.Delete(l, i, i+1)
						case n > 0 && rng.IntN(2) == 0:
							i := rng.IntN(n)
							p := crossClusterPolicy(rng, l[i].GetMetadata().GetName())
							p.Metadata = proto.CloneOf(l[i].GetMetadata())
							p.Metadata.Generation++
							l[i] = p
							return l
						default:
							return append(l, crossClusterPolicy(rng, fmt.Sprintf("x%d", step)))
						}
					})
				}
				full, incremental := inc.Counts()
				t.Logf("%d full, %d incremental translations", full, incremental)
				if incremental < 10 {
					t.Fatalf("only %d of 30 translations were incremental", incremental)
				}
			})
		}
	}
}

// outputDiff lists the objects and statuses that differ between two
// outputs: those of got and want with no equal counterpart in the other.
func outputDiff(got, want *snapshotv1.OutputSnapshot) string {
	text := func(out *snapshotv1.OutputSnapshot) map[string]bool {
		m := map[string]bool{}
		for _, o := range out.GetObjects() {
			m[fmt.Sprintf("%s %s/%s %s %s", o.GetKind(), o.GetNamespace(), o.GetName(), o.GetAnnotations(), o.GetSpec())] = true
		}
		for _, s := range out.GetStatuses() {
			m[fmt.Sprintf("status %s %s/%s %s", s.GetKind(), s.GetNamespace(), s.GetName(), s.GetStatus())] = true
		}
		return m
	}
	g, w := text(got), text(want)
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(g)) {
		if !w[k] {
			b = fmt.Appendf(b, "- incremental: %s\n", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(w)) {
		if !g[k] {
			b = fmt.Appendf(b, "+ full:        %s\n", k)
		}
	}
	return string(b)
}
