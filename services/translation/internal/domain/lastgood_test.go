package domain_test

import (
	"strings"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/encoding/protojson"
)

func reviewsSelector() []*networkingv1.DestinationSelector {
	return []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
		KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{
			Name: "reviews", Namespace: "default", Cluster: "east",
		}}},
	}}}
}

// lkgInput is cluster east with the reviews service, a TrafficPolicy that
// retries attempts times and an AccessPolicy that allows method, both at
// generation gen. attempts 0 leaves the TrafficPolicy out and 99 makes it
// invalid; method "" leaves the AccessPolicy out.
func lkgInput(gen int64, attempts int32, method string) *snapshotv1.InputSnapshot {
	in := &snapshotv1.InputSnapshot{Cluster: "east", Destinations: []*discoveryv1.Destination{destination("east", svc{"default", "reviews", ""})}}
	if attempts != 0 {
		if attempts == 99 {
			attempts = -1 // invalid
		}
		in.TrafficPolicies = append(in.TrafficPolicies, &networkingv1.TrafficPolicy{
			Metadata: &commonv1.ObjectMeta{Name: "retries", Namespace: "default", Cluster: "east", Generation: gen},
			Spec: &networkingv1.TrafficPolicySpec{
				DestinationSelector: reviewsSelector(),
				Policy:              &networkingv1.TrafficPolicySpec_Policy{Retries: &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: attempts}},
			},
		})
	}
	if method != "" {
		in.AccessPolicies = append(in.AccessPolicies, &networkingv1.AccessPolicy{
			Metadata: &commonv1.ObjectMeta{Name: "allow", Namespace: "default", Cluster: "east", Generation: gen},
			Spec:     &networkingv1.AccessPolicySpec{DestinationSelector: reviewsSelector(), AllowedMethods: []string{method}},
		})
	}
	snapshots.SealInput(in)
	return in
}

func findObject(out *snapshotv1.OutputSnapshot, kind string) *snapshotv1.Object {
	for _, o := range out.GetObjects() {
		if o.GetKind() == kind {
			return o
		}
	}
	return nil
}

func findStatus(t *testing.T, out *snapshotv1.OutputSnapshot, kind string) *commonv1.ResourceStatus {
	t.Helper()
	for _, s := range out.GetStatuses() {
		if s.GetKind() == kind {
			st := &commonv1.ResourceStatus{}
			if err := protojson.Unmarshal(s.GetStatus(), st); err != nil {
				t.Fatal(err)
			}
			return st
		}
	}
	return nil
}

// An edit that makes a policy invalid keeps its last valid translation in
// force and says so; a valid edit replaces it; deleting the policy removes
// its outputs.
func TestLastKnownGood(t *testing.T) {
	last := domain.LastGood{}
	steps := []struct {
		name     string
		in       *snapshotv1.InputSnapshot
		wantVS   string // substring of the VirtualService spec; "" for none
		wantTP   commonv1.ApprovalState
		wantLKG  bool
		wantMsg  string
		wantAPGE string // AccessPolicy: expected message, "" for accepted
	}{
		{name: "v1 valid", in: lkgInput(1, 3, "GET"), wantVS: `"attempts":3`, wantTP: commonv1.ApprovalState_ACCEPTED},
		{name: "v2 invalid", in: lkgInput(2, 99, "FETCH"), wantVS: `"attempts":3`, wantTP: commonv1.ApprovalState_INVALID, wantLKG: true,
			wantMsg: "the last valid version (generation 1) stays in force", wantAPGE: "the last valid version (generation 1) stays in force"},
		{name: "v3 invalid again", in: lkgInput(3, 99, "FETCH"), wantVS: `"attempts":3`, wantTP: commonv1.ApprovalState_INVALID, wantLKG: true,
			wantMsg: "the last valid version (generation 1) stays in force", wantAPGE: "the last valid version (generation 1) stays in force"},
		{name: "v4 valid", in: lkgInput(4, 5, "POST"), wantVS: `"attempts":5`, wantTP: commonv1.ApprovalState_ACCEPTED},
		{name: "deleted", in: lkgInput(5, 0, ""), wantVS: ""},
		{name: "recreated invalid: nothing to keep", in: lkgInput(1, 99, "FETCH"), wantVS: "", wantTP: commonv1.ApprovalState_INVALID},
	}
	for _, step := range steps {
		outs, next, err := domain.TranslateWithLastGood(map[string]*snapshotv1.InputSnapshot{"east": step.in}, domain.Options{}, last)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		last = next
		out := outs["east"]
		vs := findObject(out, domain.KindVirtualService)
		switch {
		case step.wantVS == "" && vs != nil:
			t.Errorf("%s: VirtualService %s, want none", step.name, vs.GetSpec())
		case step.wantVS != "" && vs == nil:
			t.Errorf("%s: no VirtualService, want one with %s", step.name, step.wantVS)
		case step.wantVS != "" && !strings.Contains(string(vs.GetSpec()), step.wantVS):
			t.Errorf("%s: VirtualService %s, want %s", step.name, vs.GetSpec(), step.wantVS)
		}
		tp := findStatus(t, out, domain.KindTrafficPolicy)
		if step.wantTP == commonv1.ApprovalState_PENDING {
			if tp != nil {
				t.Errorf("%s: status of a deleted TrafficPolicy: %v", step.name, tp)
			}
			if len(last.Traffic) != 0 || len(last.Access) != 0 {
				t.Errorf("%s: last valid versions of deleted policies kept: %v", step.name, last)
			}
			continue
		}
		if tp.GetState() != step.wantTP || tp.GetLastKnownGood() != step.wantLKG {
			t.Errorf("%s: TrafficPolicy state %v lastKnownGood %v, want %v %v", step.name, tp.GetState(), tp.GetLastKnownGood(), step.wantTP, step.wantLKG)
		}
		if errs := strings.Join(tp.GetErrors(), "\n"); step.wantMsg != "" && (!strings.Contains(errs, step.wantMsg) || !strings.Contains(errs, "retries.attempts")) {
			t.Errorf("%s: TrafficPolicy errors %q, want the validation error and %q", step.name, errs, step.wantMsg)
		}
		if step.wantLKG {
			if len(tp.GetDestinations()) != 1 {
				t.Errorf("%s: destinations %v, want the one the last valid version selects", step.name, tp.GetDestinations())
			}
		}
		ap := findStatus(t, out, domain.KindAccessPolicy)
		errs := strings.Join(ap.GetErrors(), "\n")
		if step.wantAPGE == "" {
			if ap.GetLastKnownGood() || (step.wantTP == commonv1.ApprovalState_ACCEPTED && ap.GetState() != commonv1.ApprovalState_ACCEPTED) {
				t.Errorf("%s: AccessPolicy status %v", step.name, ap)
			}
		} else if ap.GetState() != commonv1.ApprovalState_INVALID || !ap.GetLastKnownGood() || !strings.Contains(errs, step.wantAPGE) || len(ap.GetDestinations()) != 1 {
			t.Errorf("%s: AccessPolicy status %v, want INVALID, lastKnownGood and %q", step.name, ap, step.wantAPGE)
		}
	}
}

// The same inputs and last valid versions give the same outputs: Translate
// stays a pure function.
func TestLastKnownGoodIsPure(t *testing.T) {
	first, last, err := domain.TranslateWithLastGood(map[string]*snapshotv1.InputSnapshot{"east": lkgInput(1, 3, "GET")}, domain.Options{}, domain.LastGood{})
	if err != nil {
		t.Fatal(err)
	}
	_ = first
	invalid := map[string]*snapshotv1.InputSnapshot{"east": lkgInput(2, 99, "FETCH")}
	a, _, err := domain.TranslateWithLastGood(invalid, domain.Options{}, last)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := domain.TranslateWithLastGood(invalid, domain.Options{}, last)
	if err != nil {
		t.Fatal(err)
	}
	if a["east"].GetVersion() != b["east"].GetVersion() {
		t.Fatal("the same inputs and last valid versions gave different outputs")
	}
	if len(last.Traffic) != 1 || last.Traffic[domain.ObjectKey{Cluster: "east", Namespace: "default", Name: "retries"}].Generation != 1 {
		t.Fatalf("last valid versions %v", last)
	}
	// Without them, the invalid policy is not translated.
	c, err := domain.Translate(invalid, domain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if findObject(c["east"], domain.KindVirtualService) != nil {
		t.Fatal("an invalid policy without a last valid version was translated")
	}
}
