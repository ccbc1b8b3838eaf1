package domain

import (
	"strings"
	"testing"
	"time"
)

func TestRotationAnnotationsRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := Rotation{
		Phase: RotationWorkloads, Serial: "0a1b", NewRoot: "ff00", Revisions: []string{"", "canary"},
		StartedAt: at, PhaseStartedAt: at.Add(time.Minute),
		Bounced: map[RotationPhase]int{RotationIstiod: 1, RotationGateways: 2, RotationWorkloads: 7},
	}
	a := r.Annotations()
	if a[AnnotationRotationRevisions] != "default,canary" || a[AnnotationRotationBounced] != "istiod=1,gateways=2,workloads=7" {
		t.Fatalf("annotations %v", a)
	}
	got, err := ParseRotation(a)
	if err != nil {
		t.Fatal(err)
	}
	if got.Phase != r.Phase || got.Serial != r.Serial || got.NewRoot != r.NewRoot || !got.PhaseStartedAt.Equal(r.PhaseStartedAt) ||
		got.Revisions[0] != "" || got.Revisions[1] != "canary" || got.Bounced[RotationWorkloads] != 7 {
		t.Fatalf("round trip %+v, want %+v", got, r)
	}
	if none, err := ParseRotation(nil); err != nil || none.Phase != RotationNone {
		t.Fatalf("no annotations: %+v, %v", none, err)
	}
}

func TestParseRotationRefusesBadState(t *testing.T) {
	for name, tc := range map[string]struct {
		a    map[string]string
		want string
	}{
		"phase":    {map[string]string{AnnotationRotationPhase: "rebooting"}, "unknown phase"},
		"time":     {map[string]string{AnnotationRotationPhase: "istiod", AnnotationRotationPhaseStartedAt: "yesterday"}, AnnotationRotationPhaseStartedAt},
		"no start": {map[string]string{AnnotationRotationPhase: "gateways"}, "is missing"},
		"bounced":  {map[string]string{AnnotationRotationBounced: "istiod=-1"}, "bad entry"},
	} {
		if _, err := ParseRotation(tc.a); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", name, err, tc.want)
		}
	}
}

func TestRotationPhasesFollowEachOther(t *testing.T) {
	var got []RotationPhase
	for p := RotationIstiod; p != RotationDone; p = p.Next(true) {
		got = append(got, p)
	}
	if len(got) != 4 || got[3] != RotationDropOldRoot {
		t.Fatalf("phases with an old root %v", got)
	}
	if RotationWorkloads.Next(false) != RotationDone {
		t.Fatal("without an old root the workloads end the rotation")
	}
}

func TestBounceScopePhaseOf(t *testing.T) {
	s := BounceScope{Namespace: "istio-system", Revisions: []string{""}, GatewayLabels: []map[string]string{{"istio": "ingressgateway"}, {}}}
	for _, tc := range []struct {
		name string
		p    BouncePod
		want RotationPhase
	}{
		{"istiod here", BouncePod{Namespace: "istio-system", Istiod: true}, RotationIstiod},
		{"istiod elsewhere", BouncePod{Namespace: "istio-other", Istiod: true}, RotationNone},
		{"gateway", BouncePod{Namespace: "gw", Labels: map[string]string{"istio": "ingressgateway"}, Sidecar: true}, RotationGateways},
		{"workload", BouncePod{Namespace: "app", Sidecar: true, SidecarRevision: "default"}, RotationWorkloads},
		{"other revision", BouncePod{Namespace: "app", Sidecar: true, SidecarRevision: "canary"}, RotationNone},
		{"no sidecar", BouncePod{Namespace: "app"}, RotationNone},
		{"finished job", BouncePod{Namespace: "app", Sidecar: true, Finished: true}, RotationNone},
	} {
		if got := s.PhaseOf(tc.p); got != tc.want {
			t.Errorf("%s: phase %q, want %q", tc.name, got, tc.want)
		}
	}
	if revs := IstiodRevisions([]BouncePod{{Namespace: "istio-system", Istiod: true, Labels: map[string]string{LabelRevision: "1-30"}}, {Namespace: "istio-system", Istiod: true}}, "istio-system"); len(revs) != 2 || revs[0] != "" || revs[1] != "1-30" {
		t.Errorf("revisions %q", revs)
	}
}

func TestPlanBounceWaitsForReadyReplacements(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rs := OwnerRef{Kind: "ReplicaSet", Name: "istiod"}
	old := BouncePod{Namespace: "istio-system", Name: "istiod-a", Controller: rs, Ready: true, CreatedAt: start.Add(-time.Hour)}
	expected := map[string]int{}
	if p := PlanBounce([]BouncePod{old}, start, expected, 0.25); len(p.Delete) != 1 || p.Done {
		t.Fatalf("plan %+v, want the old pod deleted", p)
	}
	// Deleted, its replacement not there yet: nothing to do, not done.
	if p := PlanBounce(nil, start, expected, 0.25); len(p.Delete) != 0 || p.Done || p.Waiting != 1 {
		t.Fatalf("plan %+v, want a wait for one pod", p)
	}
	repl := BouncePod{Namespace: "istio-system", Name: "istiod-b", Controller: rs, CreatedAt: start}
	if p := PlanBounce([]BouncePod{repl}, start, expected, 0.25); p.Done || p.Waiting != 1 {
		t.Fatalf("plan %+v, want a wait for the replacement to be Ready", p)
	}
	repl.Ready = true
	if p := PlanBounce([]BouncePod{repl}, start, expected, 0.25); !p.Done || p.Waiting != 0 {
		t.Fatalf("plan %+v, want done", p)
	}
	// An old pod that is not Ready goes at once, whatever the budget.
	sick := BouncePod{Namespace: "app", Name: "a", Controller: OwnerRef{Kind: "ReplicaSet", Name: "x"}, CreatedAt: start.Add(-time.Hour)}
	healthy := sick
	healthy.Name, healthy.Ready = "b", true
	if p := PlanBounce([]BouncePod{sick, healthy}, start, map[string]int{}, 0.25); len(p.Delete) != 1 || p.Delete[0].Name != "a" {
		t.Fatalf("plan %+v, want only the pod that is not Ready deleted", p)
	}
}
