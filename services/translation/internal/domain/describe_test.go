package domain_test

import (
	"path/filepath"
	"slices"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
)

func appliedNames(ps []*commonv1.AppliedPolicy) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.GetRef().GetName()+"@"+string(rune('0'+p.GetAcceptanceOrder())))
	}
	return out
}

func TestDescribe(t *testing.T) {
	inputs := readInputs(t, filepath.Join(goldenDir, "traffic-shift-virtual-destination", "input.yaml"))
	r, err := domain.TranslateResult(inputs, domain.Options{}, domain.LastGood{})
	if err != nil {
		t.Fatal(err)
	}

	east := r.Applied.Describe(domain.Filter{Cluster: "east", Name: "reviews"})
	if len(east.Destinations) != 1 || len(east.Meshes) != 0 || len(east.Workloads) != 0 {
		t.Fatalf("filter cluster=east name=reviews: %d meshes, %d workloads, %d destinations; want one destination", len(east.Meshes), len(east.Workloads), len(east.Destinations))
	}
	st := east.Destinations[0].GetStatus()
	if got, want := appliedNames(st.GetAppliedTrafficPolicies()), []string{"reviews-to-global@0", "productpage-to-east-only@1"}; !slices.Equal(got, want) {
		t.Errorf("east reviews: applied traffic policies %q, want %q", got, want)
	}
	if st.GetLocalFqdn() != "reviews.default.svc.cluster.local" {
		t.Errorf("local FQDN %q", st.GetLocalFqdn())
	}

	west := r.Applied.Describe(domain.Filter{Cluster: "west"})
	if len(west.Meshes) != 1 || len(west.Workloads) != 1 || len(west.Destinations) != 1 {
		t.Fatalf("filter cluster=west: %d meshes, %d workloads, %d destinations; want one of each", len(west.Meshes), len(west.Workloads), len(west.Destinations))
	}
	// The policy that is INVALID for west's reviews is not applied there.
	if got, want := appliedNames(west.Destinations[0].GetStatus().GetAppliedTrafficPolicies()), []string{"reviews-to-global@0"}; !slices.Equal(got, want) {
		t.Errorf("west reviews: applied traffic policies %q, want %q", got, want)
	}
	ms := west.Meshes[0].GetStatus()
	if ms.GetAppliedVirtualMesh().GetName() != "vm" {
		t.Errorf("west mesh: applied virtual mesh %v, want vm", ms.GetAppliedVirtualMesh())
	}
	if got, want := appliedNames(ms.GetAppliedVirtualDestinations()), []string{"reviews-global@0"}; !slices.Equal(got, want) {
		t.Errorf("west mesh: applied virtual destinations %q, want %q", got, want)
	}
	eastMesh := r.Applied.Describe(domain.Filter{Cluster: "east", Namespace: "istio-system"}).Meshes
	if len(eastMesh) != 1 {
		t.Fatalf("east meshes: %d", len(eastMesh))
	}
	if got, want := appliedNames(eastMesh[0].GetStatus().GetAppliedVirtualDestinations()), []string{"reviews-global@0", "east-only@1"}; !slices.Equal(got, want) {
		t.Errorf("east mesh: applied virtual destinations %q, want %q", got, want)
	}

	all := r.Applied.Describe(domain.Filter{})
	if len(all.Destinations) != 3 || len(all.Meshes) != 2 || len(all.Workloads) != 3 {
		t.Errorf("no filter: %d meshes, %d workloads, %d destinations; want 2, 3, 3", len(all.Meshes), len(all.Workloads), len(all.Destinations))
	}
	for i := 1; i < len(all.Destinations); i++ {
		a, b := all.Destinations[i-1].GetMetadata(), all.Destinations[i].GetMetadata()
		if a.GetCluster()+"/"+a.GetNamespace()+"/"+a.GetName() > b.GetCluster()+"/"+b.GetNamespace()+"/"+b.GetName() {
			t.Errorf("destinations not sorted: %s before %s", a.GetName(), b.GetName())
		}
	}
	// Describing returns copies: the translation's inputs keep no status.
	for _, in := range inputs {
		for _, d := range in.GetDestinations() {
			if d.GetStatus() != nil {
				t.Fatalf("Describe wrote a status into the input of %s", d.GetMetadata().GetName())
			}
		}
	}

	var none *domain.Applied
	if d := none.Describe(domain.Filter{}); len(d.Meshes)+len(d.Workloads)+len(d.Destinations) != 0 {
		t.Error("a nil Applied describes something")
	}
}
