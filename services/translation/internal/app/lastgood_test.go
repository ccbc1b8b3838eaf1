package app_test

import (
	"strings"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
)

// withRetries is input east with service reviews and a TrafficPolicy at
// generation gen that retries attempts times (negative is invalid).
func withRetries(gen int64, attempts int32) *snapshotv1.InputSnapshot {
	in := input("east", "reviews")
	in.TrafficPolicies = []*networkingv1.TrafficPolicy{{
		Metadata: &commonv1.ObjectMeta{Name: "retries", Namespace: "default", Cluster: "east", Generation: gen},
		Spec: &networkingv1.TrafficPolicySpec{
			DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
				KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{Name: "reviews", Namespace: "default", Cluster: "east"}}},
			}}},
			Policy: &networkingv1.TrafficPolicySpec_Policy{Retries: &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: attempts}},
		},
	}}
	snapshots.SealInput(in)
	return in
}

// The translator remembers the last valid version of each policy between
// translations: an invalid edit keeps the published VirtualService.
func TestLastKnownGoodKept(t *testing.T) {
	outputs := snapstore.NewMemory(newOutput)
	tr := newTranslator(t, snapstore.NewMemory(newInput), outputs)
	run(t, tr)

	published := func(in *snapshotv1.InputSnapshot) *snapshotv1.OutputSnapshot {
		t.Helper()
		if err := tr.Submit("east", in); err != nil {
			t.Fatal(err)
		}
		// Wait for the translation of in, whatever its version.
		var o *snapshotv1.OutputSnapshot
		waitUntil(t, "the input to be translated", func() bool {
			got, ok := tr.Output("east")
			if ok && got.GetInputVersions()["east"] == in.GetVersion() {
				o = got
				return true
			}
			return false
		})
		waitVersion(t, outputs, "east", o.GetVersion())
		return o
	}
	vs := func(o *snapshotv1.OutputSnapshot) string {
		for _, obj := range o.GetObjects() {
			if obj.GetKind() == "VirtualService" {
				return string(obj.GetSpec())
			}
		}
		return ""
	}
	status := func(o *snapshotv1.OutputSnapshot) string {
		for _, s := range o.GetStatuses() {
			if s.GetKind() == "TrafficPolicy" {
				return string(s.GetStatus())
			}
		}
		return ""
	}

	v1 := published(withRetries(1, 3))
	if !strings.Contains(vs(v1), `"attempts":3`) {
		t.Fatalf("v1 VirtualService %q", vs(v1))
	}
	v2 := published(withRetries(2, -1))
	if vs(v2) != vs(v1) {
		t.Fatalf("v2 (invalid) VirtualService %q, want v1's %q", vs(v2), vs(v1))
	}
	if st := status(v2); !strings.Contains(st, `"state":"INVALID"`) || !strings.Contains(st, `"lastKnownGood":true`) || !strings.Contains(st, "generation 1") {
		t.Fatalf("v2 status %s", st)
	}
	v3 := published(withRetries(3, 5))
	if !strings.Contains(vs(v3), `"attempts":5`) || strings.Contains(status(v3), "lastKnownGood") {
		t.Fatalf("v3 VirtualService %q status %s", vs(v3), status(v3))
	}
	gone := published(input("east", "reviews"))
	if vs(gone) != "" {
		t.Fatalf("deleted policy still has VirtualService %q", vs(gone))
	}
}
