package app_test

import (
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// withTimeout is in with one TrafficPolicy that sets a request timeout on
// reviews (none when seconds is 0).
func withTimeout(in *snapshotv1.InputSnapshot, seconds int64) *snapshotv1.InputSnapshot {
	out := &snapshotv1.InputSnapshot{Cluster: in.GetCluster(), Destinations: in.GetDestinations()}
	if seconds > 0 {
		out.TrafficPolicies = []*networkingv1.TrafficPolicy{{
			Metadata: &commonv1.ObjectMeta{Name: "reviews-timeout", Namespace: "default", Generation: seconds},
			Spec: &networkingv1.TrafficPolicySpec{
				DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
					KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{Name: "reviews"}}},
				}}},
				Policy: &networkingv1.TrafficPolicySpec_Policy{RequestTimeout: &durationpb.Duration{Seconds: seconds}},
			},
		}}
	}
	snapshots.SealInput(out)
	return out
}

// Successive TrafficPolicy edits (translated incrementally) publish what a
// full translation of the same inputs gives, and Describe follows them.
func TestIncrementalEditsPublishFullResult(t *testing.T) {
	inputs, outputs := snapstore.NewMemory(newInput), snapstore.NewMemory(newOutput)
	tr := newTranslator(t, inputs, outputs)
	run(t, tr)
	base := input("east", "reviews", "ratings")
	for _, seconds := range []int64{0, 2, 3, 0, 5} {
		in := withTimeout(base, seconds)
		if err := tr.Submit("east", in); err != nil {
			t.Fatalf("Submit: %v", err)
		}
		waitVersion(t, outputs, "east", expected(t, in).GetVersion())
		d := tr.Describe(domain.Filter{Name: "reviews"})
		if len(d.Destinations) != 1 {
			t.Fatalf("timeout %ds: Describe found %d destinations named reviews", seconds, len(d.Destinations))
		}
		applied := d.Destinations[0].GetStatus().GetAppliedTrafficPolicies()
		if want := map[bool]int{true: 1, false: 0}[seconds > 0]; len(applied) != want || want == 1 && applied[0].GetObservedGeneration() != seconds {
			t.Fatalf("timeout %ds: applied traffic policies %v", seconds, applied)
		}
	}
}

// Edits that arrive encoded, as from ingest and the store, are told from
// the unchanged policies by their encodings (with the first-seen time
// each is stamped with), and publish what a full translation gives.
func TestEncodedEditsPublishFullResult(t *testing.T) {
	inputs, outputs := snapstore.NewMemory(newInput), snapstore.NewMemory(newOutput)
	tr := newTranslator(t, inputs, outputs)
	run(t, tr)
	base := input("east", "reviews", "ratings")
	for _, seconds := range []int64{2, 3, 3, 0, 5, 2} {
		in := withTimeout(base, seconds)
		data, err := proto.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		decoded := &snapshotv1.InputSnapshot{}
		if err := proto.Unmarshal(data, decoded); err != nil {
			t.Fatal(err)
		}
		claim, err := tr.ClaimInput(t.Context(), "east", decoded.GetVersion())
		if err != nil {
			t.Fatal(err)
		}
		if claim != nil {
			if err := claim.SubmitEncoded(decoded, data); err != nil {
				t.Fatalf("SubmitEncoded: %v", err)
			}
		}
		waitVersion(t, outputs, "east", expected(t, in).GetVersion())
		applied := tr.Describe(domain.Filter{Name: "reviews"}).Destinations[0].GetStatus().GetAppliedTrafficPolicies()
		if want := map[bool]int{true: 1, false: 0}[seconds > 0]; len(applied) != want || want == 1 && applied[0].GetObservedGeneration() != seconds {
			t.Fatalf("timeout %ds: applied traffic policies %v", seconds, applied)
		}
	}
}
