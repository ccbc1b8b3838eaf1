package domain_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// editInputs returns inputs with one random change: mostly a TrafficPolicy
// edited, added or deleted (the incremental path), sometimes a new
// destination (a full translation). Inputs are copied, never modified.
func editInputs(rng *rand.Rand, inputs map[string]*snapshotv1.InputSnapshot, step int) map[string]*snapshotv1.InputSnapshot {
	out := maps.Clone(inputs)
	cluster := []string{"east", "west"}[rng.IntN(2)]
	in := shallowInput(inputs[cluster])
	in.TrafficPolicies = slices.Clone(in.TrafficPolicies)
	src := make([]byte, 48)
	for i := range src {
		src[i] = byte(rng.IntN(256))
	}
	s := &bytesSource{b: src}
	spec := s.trafficPolicySpec
	if rng.IntN(3) == 0 {
		// A shift to subsets of another service: its DestinationRule gets
		// the subsets.
		spec = func() *networkingv1.TrafficPolicySpec {
			from, to := []string{"reviews", "ratings"}[rng.IntN(2)], []string{"reviews", "ratings"}[rng.IntN(2)]
			return &networkingv1.TrafficPolicySpec{
				DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
					KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{Name: from, Namespace: "default"}}},
				}}},
				Policy: &networkingv1.TrafficPolicySpec_Policy{TrafficShift: &networkingv1.TrafficPolicySpec_Policy_MultiDestination{
					Destinations: []*networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination{{
						Weight: 1,
						DestinationType: &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_KubeService{
							KubeService: &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_KubeDestination{
								Name: to, Subset: map[string]string{"version": []string{"v1", "v2"}[rng.IntN(2)]},
							},
						},
					}},
				}},
			}
		}
	}
	if rng.IntN(3) == 0 {
		// An AccessPolicy edited, added or deleted.
		in.AccessPolicies = slices.Clone(in.AccessPolicies)
		switch n := len(in.AccessPolicies); {
		case n > 0 && rng.IntN(3) == 0:
			i := rng.IntN(n)
			in.AccessPolicies = slices.Delete(in.AccessPolicies, i, i+1)
		case n > 0 && rng.IntN(2) == 0:
			i := rng.IntN(n)
			md := proto.CloneOf(in.AccessPolicies[i].GetMetadata())
			md.Generation++
			in.AccessPolicies[i] = &networkingv1.AccessPolicy{Metadata: md, Spec: s.accessPolicySpec()}
		default:
			in.AccessPolicies = append(in.AccessPolicies, &networkingv1.AccessPolicy{
				Metadata: &commonv1.ObjectMeta{Name: fmt.Sprintf("na%d", step), Namespace: "default", Generation: 1,
					CreationTimestamp: &timestamppb.Timestamp{Seconds: int64(rng.IntN(3))}},
				Spec: s.accessPolicySpec(),
			})
		}
		snapshots.SealInput(in)
		out[cluster] = in
		return out
	}
	switch n := len(in.TrafficPolicies); {
	case rng.IntN(10) == 0:
		in.Destinations = append(slices.Clone(in.Destinations), fuzzDestination(cluster, fmt.Sprintf("extra-%d", step)))
	case n > 0 && rng.IntN(3) == 0:
		i := rng.IntN(n)
		in.TrafficPolicies = slices.Delete(in.TrafficPolicies, i, i+1)
	case n > 0 && rng.IntN(2) == 0:
		i := rng.IntN(n)
		old := in.TrafficPolicies[i]
		md := proto.CloneOf(old.GetMetadata())
		md.Generation++
		in.TrafficPolicies[i] = &networkingv1.TrafficPolicy{Metadata: md, Spec: spec()}
	default:
		in.TrafficPolicies = append(in.TrafficPolicies, &networkingv1.TrafficPolicy{
			Metadata: &commonv1.ObjectMeta{Name: fmt.Sprintf("n%d", step), Namespace: "default", Cluster: cluster, Generation: 1,
				CreationTimestamp: &timestamppb.Timestamp{Seconds: int64(rng.IntN(3))}},
			Spec: spec(),
		})
	}
	snapshots.SealInput(in)
	out[cluster] = in
	return out
}

// shallowInput copies an input snapshot's fields, sharing their values:
// the copy's lists can be replaced without touching the original's.
func shallowInput(in *snapshotv1.InputSnapshot) *snapshotv1.InputSnapshot {
	return &snapshotv1.InputSnapshot{
		Cluster: in.GetCluster(), Version: in.GetVersion(), Agent: in.GetAgent(), GeneratedAt: in.GetGeneratedAt(),
		Meshes: in.GetMeshes(), Workloads: in.GetWorkloads(), Destinations: in.GetDestinations(),
		VirtualMeshes: in.GetVirtualMeshes(), TrafficPolicies: in.GetTrafficPolicies(), AccessPolicies: in.GetAccessPolicies(),
		VirtualDestinations: in.GetVirtualDestinations(), Settings: in.GetSettings(), UserIstioObjects: in.GetUserIstioObjects(),
		WasmDeploymentPolicies: in.GetWasmDeploymentPolicies(), AccessLogPolicies: in.GetAccessLogPolicies(),
	}
}

// decodedWithIDs returns inputs decoded afresh from their encodings, with
// the SourceIDs that the encodings give.
func decodedWithIDs(t *testing.T, inputs map[string]*snapshotv1.InputSnapshot) (map[string]*snapshotv1.InputSnapshot, map[string]domain.SourceIDs) {
	t.Helper()
	out := make(map[string]*snapshotv1.InputSnapshot, len(inputs))
	ids := make(map[string]domain.SourceIDs, len(inputs))
	for c, in := range inputs {
		data, err := proto.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		fresh := &snapshotv1.InputSnapshot{}
		if err := proto.Unmarshal(data, fresh); err != nil {
			t.Fatal(err)
		}
		p := snapshots.ReadPolicies(data)
		out[c], ids[c] = fresh, domain.SourceIDs{Traffic: p.Traffic, Access: p.Access}
	}
	return out, ids
}

// TestIncrementalMatchesFull runs random sequences of edits through
// Incremental and through a full translation: every step must give the
// same output versions (objects and statuses) and the same last-known-good
// policies.
func TestIncrementalMatchesFull(t *testing.T) {
	seeds := fuzzSeeds()
	seedRNG := rand.New(rand.NewPCG(1, 2))
	for range 30 {
		b := make([]byte, 40+seedRNG.IntN(200))
		for i := range b {
			b[i] = byte(seedRNG.IntN(256))
		}
		seeds = append(seeds, b)
	}
	for seedIndex, seed := range seeds {
		// Odd seeds get their inputs as translation does from ingest and
		// the store: decoded afresh at every step, with the SourceIDs of
		// their encodings, so that unchanged policies are told by those.
		encoded := seedIndex%2 == 1
		t.Run(fmt.Sprint(seedIndex), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seedIndex), 7))
			inputs := fuzzEstate(seed)
			if seedIndex%2 == 1 {
				// A user's own DestinationRule for ratings: policies that
				// add subsets to it get conflicts.
				east := shallowInput(inputs["east"])
				east.UserIstioObjects = append(slices.Clone(east.UserIstioObjects), &snapshotv1.UserIstioObject{Kind: "DestinationRule", Namespace: "default", Name: "ratings-mine", Hosts: []string{"ratings"}})
				snapshots.SealInput(east)
				inputs = maps.Clone(inputs)
				inputs["east"] = east
			}
			inc := domain.NewIncremental(domain.Options{})
			// Every output that changed was handed to OnSealed sealed, as
			// it is returned.
			var sealedMu sync.Mutex
			sealed, last := map[string]string{}, map[string]string{}
			inc.OnSealed(func(o *snapshotv1.OutputSnapshot) {
				sealedMu.Lock()
				defer sealedMu.Unlock()
				sealed[o.GetCluster()] = o.GetVersion()
			})
			var incLast, fullLast domain.LastGood
			for step := range 40 {
				var ids map[string]domain.SourceIDs
				if encoded {
					inputs, ids = decodedWithIDs(t, inputs)
				}
				got, err := inc.TranslateWithIDs(inputs, ids, incLast)
				if err != nil {
					t.Fatalf("step %d: incremental: %v", step, err)
				}
				for c, o := range got.Outputs {
					if o.GetVersion() != last[c] && sealed[c] != o.GetVersion() {
						t.Fatalf("step %d: the output of %s is %s, but OnSealed was given %q", step, c, o.GetVersion(), sealed[c])
					}
					last[c] = o.GetVersion()
				}
				clear(sealed)
				want, err := domain.TranslateResult(inputs, domain.Options{}, fullLast)
				if err != nil {
					t.Fatalf("step %d: full: %v", step, err)
				}
				if len(got.Outputs) != len(want.Outputs) {
					t.Fatalf("step %d: %d outputs, want %d", step, len(got.Outputs), len(want.Outputs))
				}
				for c, w := range want.Outputs {
					g := got.Outputs[c]
					if g.GetVersion() != w.GetVersion() {
						t.Fatalf("step %d: cluster %s: incremental version %s, full %s\nincremental:\n%s\nfull:\n%s", step, c, g.GetVersion(), w.GetVersion(), g, w)
					}
					if g.GetInputVersions()[c] != inputs[c].GetVersion() {
						t.Fatalf("step %d: cluster %s: output names input %s, want %s", step, c, g.GetInputVersions()[c], inputs[c].GetVersion())
					}
				}
				if !maps.EqualFunc(got.LastGood.Traffic, want.LastGood.Traffic, func(a, b domain.LastGoodTraffic) bool { return a.Generation == b.Generation }) {
					t.Fatalf("step %d: last good %v, want %v", step, slices.Collect(maps.Keys(got.LastGood.Traffic)), slices.Collect(maps.Keys(want.LastGood.Traffic)))
				}
				gd, wd := got.Applied.Describe(domain.Filter{}), want.Applied.Describe(domain.Filter{})
				for i := range wd.Destinations {
					ga, wa := gd.Destinations[i].GetStatus().GetAppliedTrafficPolicies(), wd.Destinations[i].GetStatus().GetAppliedTrafficPolicies()
					if len(ga) != len(wa) {
						t.Fatalf("step %d: destination %d: %d applied policies described, want %d", step, i, len(ga), len(wa))
					}
				}
				incLast, fullLast = got.LastGood, want.LastGood
				inputs = editInputs(rng, inputs, step)
			}
			full, incremental := inc.Counts()
			t.Logf("%d full, %d incremental translations", full, incremental)
			if incremental < 15 {
				t.Fatalf("only %d of 40 translations were incremental", incremental)
			}
		})
	}
}
