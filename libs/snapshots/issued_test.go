package snapshots_test

import (
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

func issued(ns, name string) *snapshotv1.IssuedCertificate {
	return &snapshotv1.IssuedCertificate{
		Mesh:            &commonv1.ObjectRef{Namespace: ns, Name: name},
		SecretNamespace: ns, SecretName: "cacerts",
	}
}

// Issued certificates are content: their order must not change the version,
// and a different set must.
func TestSortOutputOrdersIssuedCertificates(t *testing.T) {
	a := &snapshotv1.OutputSnapshot{Cluster: "east", IssuedCertificates: []*snapshotv1.IssuedCertificate{
		issued("istio-system", "istiod-canary"), issued("istio-a", "istiod"), issued("istio-system", "istiod"),
	}}
	b := &snapshotv1.OutputSnapshot{Cluster: "east", IssuedCertificates: []*snapshotv1.IssuedCertificate{
		issued("istio-system", "istiod"), issued("istio-system", "istiod-canary"), issued("istio-a", "istiod"),
	}}
	va, vb := snapshots.SealOutput(a), snapshots.SealOutput(b)
	if va != vb {
		t.Fatalf("same issued certificates in another order, different versions: %s vs %s", va, vb)
	}
	want := []string{"istio-a/istiod", "istio-system/istiod", "istio-system/istiod-canary"}
	for i, ic := range a.GetIssuedCertificates() {
		if got := ic.GetMesh().GetNamespace() + "/" + ic.GetMesh().GetName(); got != want[i] {
			t.Errorf("issued_certificates[%d] = %s, want %s", i, got, want[i])
		}
	}
	c := &snapshotv1.OutputSnapshot{Cluster: "east", IssuedCertificates: []*snapshotv1.IssuedCertificate{issued("istio-system", "istiod")}}
	if snapshots.SealOutput(c) == va {
		t.Fatal("different issued certificates, same version")
	}
}
