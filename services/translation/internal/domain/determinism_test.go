package domain_test

import (
	"slices"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
)

// Duplicate entries for one object, which a buggy agent could send, are
// resolved by content: the order they arrive in does not change the output.
func TestTranslateDuplicatesAreResolvedByContent(t *testing.T) {
	policy := func(gen int64, attempts int32) *networkingv1.TrafficPolicy {
		return &networkingv1.TrafficPolicy{
			Metadata: &commonv1.ObjectMeta{Name: "retries", Namespace: "default", Cluster: "east", Generation: gen},
			Spec: &networkingv1.TrafficPolicySpec{Policy: &networkingv1.TrafficPolicySpec_Policy{
				Retries: &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: attempts},
			}},
		}
	}
	build := func(reverse bool) map[string]*snapshotv1.InputSnapshot {
		in := fuzzEstate(nil)
		in["east"].TrafficPolicies = []*networkingv1.TrafficPolicy{policy(1, 2), policy(2, 2), policy(1, 3)}
		d := fuzzDestination("east", "reviews")
		d.GetSpec().GetKubeService().Hostname = "reviews.default.svc.other.local"
		in["east"].Destinations = append(in["east"].Destinations, d)
		w := fuzzWorkload("east", "reviews-v1", map[string]string{"app": "reviews", "version": "v3"})
		in["east"].Workloads = append(in["east"].Workloads, w)
		if reverse {
			slices.Reverse(in["east"].TrafficPolicies)
			slices.Reverse(in["east"].Destinations)
			slices.Reverse(in["east"].Workloads)
		}
		return in
	}
	a, err := domain.Translate(build(false), domain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := domain.Translate(build(true), domain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for c := range a {
		if !proto.Equal(stripInputVersions(a[c]), stripInputVersions(b[c])) {
			t.Errorf("%s: outputs differ with the duplicates in another order", c)
		}
	}
	if n := len(a["east"].GetStatuses()); n != 1 {
		t.Errorf("%d statuses for one policy sent three times, want 1", n)
	}
}
