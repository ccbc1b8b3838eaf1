package domain_test

import (
	"strings"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	multiclusterv1 "github.com/meshplane/meshplane/libs/gen/meshplane/multicluster/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
)

// applyFailureEstate: a TrafficPolicy in east selecting reviews in east and
// in west, so that it has a VirtualService in each cluster.
func applyFailureEstate(t *testing.T, timeout int64) map[string]*snapshotv1.OutputSnapshot {
	t.Helper()
	east := input("east", "r", svc{"default", "reviews", ""})
	west := input("west", "r", svc{"default", "reviews", ""})
	east.TrafficPolicies = []*networkingv1.TrafficPolicy{{
		Metadata: &commonv1.ObjectMeta{Name: "timeout", Namespace: "default", Cluster: "east", Generation: 2},
		Spec: &networkingv1.TrafficPolicySpec{
			DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceMatcher_{
				KubeServiceMatcher: &networkingv1.DestinationSelector_KubeServiceMatcher{Namespaces: []string{"default"}},
			}}},
			Policy: &networkingv1.TrafficPolicySpec_Policy{RequestTimeout: &durationpb.Duration{Seconds: timeout}},
		},
	}}
	snapshots.SealInput(east)
	return translate(t, domain.Options{}, east, west, grantAll("east"))
}

// grantAll is the management cluster's input with a ScopeGrant that lets
// the resources of clusters change every cluster.
func grantAll(clusters ...string) *snapshotv1.InputSnapshot {
	in := &snapshotv1.InputSnapshot{Cluster: "meshplane", ScopeGrants: []*multiclusterv1.ScopeGrant{{
		Metadata: &commonv1.ObjectMeta{Name: "all", Namespace: "meshplane", Generation: 1},
		Spec:     &multiclusterv1.ScopeGrantSpec{Clusters: clusters, Targets: []*multiclusterv1.ScopeGrantSpec_Target{{}}},
	}}}
	snapshots.SealInput(in)
	return in
}

func object(t *testing.T, out *snapshotv1.OutputSnapshot, kind string) *snapshotv1.Object {
	t.Helper()
	for _, o := range out.GetObjects() {
		if o.GetKind() == kind {
			return o
		}
	}
	t.Fatalf("no %s in the output of %s", kind, out.GetCluster())
	return nil
}

func policyStatus(t *testing.T, out *snapshotv1.OutputSnapshot, name string) *commonv1.ResourceStatus {
	t.Helper()
	for _, st := range out.GetStatuses() {
		if st.GetKind() == domain.KindTrafficPolicy && st.GetName() == name {
			var s commonv1.ResourceStatus
			if err := protojson.Unmarshal(st.GetStatus(), &s); err != nil {
				t.Fatal(err)
			}
			return &s
		}
	}
	t.Fatalf("no status of TrafficPolicy %s in %s", name, out.GetCluster())
	return nil
}

// An object that west's agent could not apply makes the policy in east
// FAILED for west's destination, with the API server's message; east's
// destination stays ACCEPTED. The same failures give the same versions,
// and a failure of an object that has since changed is not reported.
func TestMarkApplyFailures(t *testing.T) {
	outputs := applyFailureEstate(t, 2)
	vs := object(t, outputs["west"], domain.KindVirtualService)
	ack := []*snapshotv1.ApplyResult{
		{Ref: &snapshotv1.ObjectRef{ApiVersion: vs.GetApiVersion(), Kind: vs.GetKind(), Namespace: vs.GetNamespace(), Name: vs.GetName()},
			Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED, Error: `spec.http[0].timeout: Invalid value: "x"`},
		{Ref: &snapshotv1.ObjectRef{ApiVersion: "networking.istio.io/v1", Kind: "DestinationRule", Namespace: "default", Name: "reviews"},
			Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED},
		{Ref: &snapshotv1.ObjectRef{ApiVersion: domain.NetworkingV1, Kind: domain.KindTrafficPolicy, Namespace: "default", Name: "other"},
			Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED, Error: "write status: not found"},
	}
	failures := domain.ApplyFailures(outputs["west"], ack)
	if len(failures) != 1 || failures[0].Object != vs {
		t.Fatalf("ApplyFailures = %+v, want the VirtualService only", failures)
	}
	before := map[string]string{"east": outputs["east"].GetVersion(), "west": outputs["west"].GetVersion()}
	changed, err := domain.MarkApplyFailures(outputs, map[string][]domain.ApplyFailure{"west": failures})
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 1 || changed[0] != "east" || outputs["east"].GetVersion() == before["east"] || outputs["west"].GetVersion() != before["west"] {
		t.Fatalf("changed = %v; versions %v -> east %s west %s; want only east's output changed", changed, before, outputs["east"].GetVersion(), outputs["west"].GetVersion())
	}
	s := policyStatus(t, outputs["east"], "timeout")
	if s.GetState() != commonv1.ApprovalState_FAILED || len(s.GetErrors()) != 1 ||
		!strings.Contains(s.GetErrors()[0], "reviews.default.west") || !strings.Contains(s.GetErrors()[0], `Invalid value: "x"`) {
		t.Errorf("policy status = %v, want FAILED naming west's destination and the API server's message", s)
	}
	if w := s.GetDestinations()["reviews.default.west"]; w.GetState() != commonv1.ApprovalState_FAILED || len(w.GetErrors()) != 1 {
		t.Errorf("west destination = %v, want FAILED with the message", w)
	}
	if e := s.GetDestinations()["reviews.default.east"]; e.GetState() != commonv1.ApprovalState_ACCEPTED {
		t.Errorf("east destination = %v, want ACCEPTED", e)
	}

	// Deterministic: translating again with the same failures gives the
	// same version.
	again := applyFailureEstate(t, 2)
	if _, err := domain.MarkApplyFailures(again, map[string][]domain.ApplyFailure{"west": failures}); err != nil {
		t.Fatal(err)
	}
	if again["east"].GetVersion() != outputs["east"].GetVersion() {
		t.Errorf("the same failures gave versions %s and %s", again["east"].GetVersion(), outputs["east"].GetVersion())
	}

	// An edit changes the VirtualService: the old failure no longer counts.
	edited := applyFailureEstate(t, 3)
	want := edited["east"].GetVersion()
	changed, err = domain.MarkApplyFailures(edited, map[string][]domain.ApplyFailure{"west": failures})
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 0 || edited["east"].GetVersion() != want {
		t.Errorf("a failure of an object that changed since was reported: changed %v", changed)
	}
	if s := policyStatus(t, edited["east"], "timeout"); s.GetState() != commonv1.ApprovalState_ACCEPTED {
		t.Errorf("edited policy status = %v, want ACCEPTED", s)
	}
	if !domain.SameApplyFailures(failures, domain.ApplyFailures(outputs["west"], ack)) {
		t.Error("the same ack gave different failures")
	}
}
