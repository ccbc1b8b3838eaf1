package domain

import (
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

// retentionInput is one cluster with one destination and a TrafficPolicy
// for it with attempts retries.
func retentionInput(attempts int32) map[string]*snapshotv1.InputSnapshot {
	in := &snapshotv1.InputSnapshot{Cluster: "east", Version: "v"}
	in.Destinations = []*discoveryv1.Destination{{
		Metadata: &commonv1.ObjectMeta{Name: "reviews-default-east", Namespace: "default", Cluster: "east"},
		Spec: &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
			Ref:   &commonv1.ClusterObjectRef{Name: "reviews", Namespace: "default", Cluster: "east"},
			Ports: []*discoveryv1.DestinationSpec_KubeService_KubeServicePort{{Port: 9080, Name: "http", Protocol: "TCP"}},
		}}},
	}}
	in.TrafficPolicies = []*networkingv1.TrafficPolicy{{
		Metadata: &commonv1.ObjectMeta{Name: "retries", Namespace: "default", Cluster: "east", Generation: int64(attempts)},
		Spec: &networkingv1.TrafficPolicySpec{
			DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
				KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{Name: "reviews", Namespace: "default", Cluster: "east"}}},
			}}},
			Policy: &networkingv1.TrafficPolicySpec_Policy{Retries: &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: attempts}},
		},
	}}
	return map[string]*snapshotv1.InputSnapshot{"east": in}
}

// The state a translation keeps for the next one does not hold the
// LastGood it was given: that one names the policies of the translation
// before, deleted ones included, and their specs would stay in memory
// until the next translation (after a cluster shrinks, for as long as
// nothing else changes).
func TestTranslationStateDropsThePreviousLastGood(t *testing.T) {
	gone := ObjectKey{Cluster: "east", Namespace: "default", Name: "deleted-policy"}
	last := LastGood{Traffic: map[ObjectKey]LastGoodTraffic{gone: {Generation: 1, Spec: &networkingv1.TrafficPolicySpec{}}}}
	in := NewIncremental(Options{})
	res, err := in.Translate(retentionInput(2), last)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.LastGood.Traffic[gone]; ok {
		t.Fatal("the new LastGood keeps a deleted policy")
	}
	if lg := res.Applied.traffic.lastGood; lg != nil {
		t.Fatalf("a full translation's state holds the LastGood it was given (%d policies)", len(lg))
	}
	// A policy edit: the incremental path.
	res, err = in.Translate(retentionInput(3), res.LastGood)
	if err != nil {
		t.Fatal(err)
	}
	if full, inc := in.Counts(); full != 1 || inc != 1 {
		t.Fatalf("%d full and %d incremental translations, want 1 and 1", full, inc)
	}
	if lg := res.Applied.traffic.lastGood; lg != nil {
		t.Fatalf("an incremental translation's state holds the previous LastGood (%d policies)", len(lg))
	}
}
