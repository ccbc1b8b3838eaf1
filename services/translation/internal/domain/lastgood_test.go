package domain_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
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

// An edit that makes a policy conflict with one accepted earlier keeps its
// last valid version in force for the destination: the VirtualService
// keeps both policies' fields, and the edited policy is INVALID with
// lastKnownGood, naming the field and the policy that owns it.
func TestLastKnownGoodOnConflict(t *testing.T) {
	policy := func(name string, created, gen int64, p *networkingv1.TrafficPolicySpec_Policy) *networkingv1.TrafficPolicy {
		return &networkingv1.TrafficPolicy{
			Metadata: &commonv1.ObjectMeta{Name: name, Namespace: "default", Cluster: "east", Generation: gen, CreationTimestamp: timestamppb.New(time.Unix(created, 0))},
			Spec:     &networkingv1.TrafficPolicySpec{DestinationSelector: reviewsSelector(), Policy: p},
		}
	}
	in := func(b *networkingv1.TrafficPolicy) map[string]*snapshotv1.InputSnapshot {
		s := &snapshotv1.InputSnapshot{Cluster: "east", Destinations: []*discoveryv1.Destination{destination("east", svc{"default", "reviews", ""})},
			TrafficPolicies: []*networkingv1.TrafficPolicy{
				policy("a-retries", 1, 1, &networkingv1.TrafficPolicySpec_Policy{Retries: &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: 3}}),
				b,
			}}
		snapshots.SealInput(s)
		return map[string]*snapshotv1.InputSnapshot{"east": s}
	}
	timeout := &networkingv1.TrafficPolicySpec_Policy{RequestTimeout: durationpb.New(2 * time.Second)}
	first, err := domain.TranslateResult(in(policy("b-timeout", 2, 1, timeout)), domain.Options{}, domain.LastGood{})
	if err != nil {
		t.Fatal(err)
	}
	want := string(findObject(first.Outputs["east"], domain.KindVirtualService).GetSpec())
	if !strings.Contains(want, `"attempts":3`) || !strings.Contains(want, `"timeout":"2s"`) {
		t.Fatalf("VirtualService %s, want both policies' fields", want)
	}
	// b now sets retries too, which a-retries owns.
	both := &networkingv1.TrafficPolicySpec_Policy{RequestTimeout: durationpb.New(5 * time.Second), Retries: &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: 9}}
	second, err := domain.TranslateResult(in(policy("b-timeout", 2, 2, both)), domain.Options{}, first.LastGood)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(findObject(second.Outputs["east"], domain.KindVirtualService).GetSpec()); got != want {
		t.Errorf("VirtualService %s, want the last valid one %s", got, want)
	}
	var st *commonv1.ResourceStatus
	for _, s := range second.Outputs["east"].GetStatuses() {
		if s.GetName() == "b-timeout" {
			st = &commonv1.ResourceStatus{}
			if err := protojson.Unmarshal(s.GetStatus(), st); err != nil {
				t.Fatal(err)
			}
		}
	}
	errs := strings.Join(st.GetErrors(), "\n")
	if st.GetState() != commonv1.ApprovalState_INVALID || !st.GetLastKnownGood() || st.GetObservedGeneration() != 2 ||
		!strings.Contains(errs, "spec.policy.retries: conflicts with TrafficPolicy") || !strings.Contains(errs, "generation 1") {
		t.Errorf("status %v, want INVALID, lastKnownGood, generation 2, the conflict and generation 1 in force", st)
	}
	if g := second.LastGood.Traffic[domain.ObjectKey{Cluster: "east", Namespace: "default", Name: "b-timeout"}]; g.Generation != 1 {
		t.Errorf("last valid version of b-timeout is generation %d, want 1", g.Generation)
	}
}

// A VirtualMesh that never was valid claims no mesh and writes nothing,
// so a later valid VirtualMesh for the same mesh is accepted. One that was
// valid keeps its last valid version in force through an invalid edit,
// meshes included: that is its last valid version holding them, and a
// VirtualMesh accepted after it is still refused the mesh.
func TestNeverValidVirtualMeshClaimsNothing(t *testing.T) {
	const mesh = "istiod-istio-system-east"
	vm := func(name string, created, gen int64, meshes ...string) *networkingv1.VirtualMesh {
		spec := &networkingv1.VirtualMeshSpec{GlobalAccessPolicy: networkingv1.VirtualMeshSpec_ENABLED}
		for _, m := range meshes {
			spec.Meshes = append(spec.Meshes, &commonv1.ObjectRef{Name: m, Namespace: "istio-system"})
		}
		return &networkingv1.VirtualMesh{
			Metadata: &commonv1.ObjectMeta{Name: name, Namespace: "meshplane", Cluster: "meshplane", Generation: gen, CreationTimestamp: timestamppb.New(time.Unix(created, 0))},
			Spec:     spec,
		}
	}
	inputs := func(vms ...*networkingv1.VirtualMesh) map[string]*snapshotv1.InputSnapshot {
		east := &snapshotv1.InputSnapshot{Cluster: "east", Meshes: []*discoveryv1.Mesh{fuzzMesh("east", "east.local")}}
		mgmt := &snapshotv1.InputSnapshot{Cluster: "meshplane", VirtualMeshes: vms}
		snapshots.SealInput(east)
		snapshots.SealInput(mgmt)
		return map[string]*snapshotv1.InputSnapshot{"east": east, "meshplane": mgmt}
	}
	// owner is the VirtualMesh named as the parent of east's deny-all
	// policy, or "" when there is none.
	owner := func(out *snapshotv1.OutputSnapshot) string {
		for _, o := range out.GetObjects() {
			if o.GetName() == domain.GlobalAccessPolicyName {
				var parents map[string][]domain.ParentRef
				if err := json.Unmarshal([]byte(o.GetAnnotations()[snapshots.AnnotationParents]), &parents); err != nil {
					t.Fatal(err)
				}
				return parents["networking.meshplane.dev/v1, Kind=VirtualMesh"][0].Name
			}
		}
		return ""
	}
	status := func(out *snapshotv1.OutputSnapshot, name string) *networkingv1.VirtualMeshStatus {
		for _, s := range out.GetStatuses() {
			if s.GetName() == name {
				st := &networkingv1.VirtualMeshStatus{}
				if err := protojson.Unmarshal(s.GetStatus(), st); err != nil {
					t.Fatal(err)
				}
				return st
			}
		}
		t.Fatalf("no status for VirtualMesh %s", name)
		return nil
	}

	// a, seen first, never was valid (it names a mesh no cluster has): it
	// claims nothing; b, valid, gets the mesh.
	first, err := domain.TranslateResult(inputs(vm("a", 1, 1, mesh, "nosuch"), vm("b", 2, 1, mesh)), domain.Options{}, domain.LastGood{})
	if err != nil {
		t.Fatal(err)
	}
	if got := owner(first.Outputs["east"]); got != "b" {
		t.Errorf("east's deny-all policy is VirtualMesh %q's, want b's", got)
	}
	a := status(first.Outputs["meshplane"], "a")
	if a.GetState() != commonv1.ApprovalState_INVALID || a.GetLastKnownGood() || !strings.Contains(strings.Join(a.GetErrors(), "\n"), "spec.meshes[1]: mesh nosuch.istio-system not found") {
		t.Errorf("a: %v, want INVALID naming spec.meshes[1], no last known good", a)
	}
	if as := a.GetMeshes()[mesh+".istio-system"]; as != nil {
		t.Errorf("a's status lists mesh %s as %v; it holds no mesh", mesh, as)
	}
	if b := status(first.Outputs["meshplane"], "b"); b.GetState() != commonv1.ApprovalState_ACCEPTED {
		t.Errorf("b: %v, want ACCEPTED", b)
	}

	// b's edit is invalid: its last valid version keeps the mesh, and c,
	// accepted after it, is refused the mesh.
	second, err := domain.TranslateResult(inputs(vm("b", 2, 2, mesh, "nosuch"), vm("c", 3, 1, mesh)), domain.Options{}, first.LastGood)
	if err != nil {
		t.Fatal(err)
	}
	if got := owner(second.Outputs["east"]); got != "b" {
		t.Errorf("after b's invalid edit, east's deny-all policy is VirtualMesh %q's, want b's last valid version's", got)
	}
	if b := status(second.Outputs["meshplane"], "b"); b.GetState() != commonv1.ApprovalState_INVALID || !b.GetLastKnownGood() {
		t.Errorf("b: %v, want INVALID with its last known good in force", b)
	}
	c := status(second.Outputs["meshplane"], "c")
	if c.GetState() != commonv1.ApprovalState_INVALID || !strings.Contains(strings.Join(c.GetErrors(), "\n"), "already belongs to VirtualMesh b.meshplane.meshplane") {
		t.Errorf("c: %v, want INVALID: the mesh belongs to b", c)
	}
}
