package app_test

import (
	"log/slog"
	"strings"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/translation/internal/app"
	"google.golang.org/protobuf/types/known/durationpb"
)

// policyState returns the state in the TrafficPolicy status of out.
func policyState(out *snapshotv1.OutputSnapshot) string {
	for _, st := range out.GetStatuses() {
		if st.GetKind() == "TrafficPolicy" {
			return string(st.GetStatus())
		}
	}
	return ""
}

// The apply-result loop: an ack of the current output that rejects an
// object makes the policy FAILED in a new version; an ack of an older
// version is ignored; an ack that applies the object brings back the
// original output, version and all.
func TestApplyFailuresReachStatus(t *testing.T) {
	in := input("east", "reviews")
	in.TrafficPolicies = []*networkingv1.TrafficPolicy{{
		Metadata: &commonv1.ObjectMeta{Name: "timeout", Namespace: "default", Cluster: "east", Generation: 1},
		Spec:     &networkingv1.TrafficPolicySpec{Policy: &networkingv1.TrafficPolicySpec_Policy{RequestTimeout: &durationpb.Duration{Seconds: 2}}},
	}}
	snapshots.SealInput(in)
	inputs := snapstore.NewMemory(newInput)
	outputs := snapstore.NewMemory(newOutput)
	acks := snapstore.NewMemoryAcks()
	if err := inputs.Put(t.Context(), "east", in.GetVersion(), in); err != nil {
		t.Fatal(err)
	}
	tr := app.NewTranslator(app.Config{}, inputs, outputs, nil, slog.New(slog.NewTextHandler(t.Output(), nil)), app.WithApplyReports(acks))
	run(t, tr)

	v1 := expected(t, in)
	waitVersion(t, outputs, "east", v1.GetVersion())
	var vs *snapshotv1.Object
	for _, o := range v1.GetObjects() {
		if o.GetKind() == "VirtualService" {
			vs = o
		}
	}
	if vs == nil {
		t.Fatal("no VirtualService in the output")
	}
	ack := func(version string, outcome snapshotv1.ApplyOutcome) {
		t.Helper()
		err := acks.PutAck(t.Context(), snapshots.Ack{Cluster: "east", Version: version, Results: []*snapshotv1.ApplyResult{{
			Ref:     &snapshotv1.ObjectRef{ApiVersion: vs.GetApiVersion(), Kind: vs.GetKind(), Namespace: vs.GetNamespace(), Name: vs.GetName()},
			Outcome: outcome, Error: "spec.hosts: must be of type array",
		}}})
		if err != nil {
			t.Fatal(err)
		}
	}

	// An ack of a version translation does not hold is ignored; the next
	// one, of the current version, is used.
	ack("sha256:old", snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED)
	ack(v1.GetVersion(), snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED)
	var v2 *snapshotv1.OutputSnapshot
	waitUntil(t, "a FAILED status", func() bool {
		o, ok := tr.Output("east")
		v2 = o
		return ok && strings.Contains(policyState(o), `"state":"FAILED"`) && strings.Contains(policyState(o), "must be of type array")
	})
	waitVersion(t, outputs, "east", v2.GetVersion())
	if len(v2.GetObjects()) != len(v1.GetObjects()) {
		t.Errorf("the FAILED version has %d objects, want the same %d", len(v2.GetObjects()), len(v1.GetObjects()))
	}

	// The object applies: back to the original output.
	ack(v2.GetVersion(), snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED)
	waitVersion(t, outputs, "east", v1.GetVersion())
}
