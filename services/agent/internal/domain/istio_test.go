package domain

import (
	"slices"
	"testing"
)

func TestUserIstioObjects(t *testing.T) {
	d := Discovered{InScope: map[string]bool{"bookinfo": true}, IstioObjects: []IstioObject{
		{Kind: KindVirtualService, Namespace: "other", Name: "user-vs", Hosts: []string{"reviews.bookinfo.svc.cluster.local"}, ExportTo: []string{"."}},
		{Kind: KindDestinationRule, Namespace: "bookinfo", Name: "reviews", ManagedBy: "meshplane", Hosts: []string{"reviews.bookinfo.svc.cluster.local"}},
		{Kind: KindDestinationRule, Namespace: "bookinfo", Name: "other-install", ManagedBy: "staging", Hosts: []string{"reviews"}},
		{Kind: KindDestinationRule, Namespace: "bookinfo", Name: "a-user-dr", Hosts: []string{"ratings"}},
		{Kind: "Gateway", Namespace: "bookinfo", Name: "gw"},
	}}
	s := BuildInputSnapshot(east, d)
	var got []string
	for _, o := range s.GetUserIstioObjects() {
		got = append(got, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	// The install's own DestinationRule is left out; another install's
	// is the user's as far as this one knows. Namespace scope does not
	// apply: a user object anywhere affects its clients.
	want := []string{"DestinationRule bookinfo/a-user-dr", "DestinationRule bookinfo/other-install", "VirtualService other/user-vs"}
	if !slices.Equal(got, want) {
		t.Fatalf("user Istio objects %q, want %q", got, want)
	}
	vs := s.GetUserIstioObjects()[2]
	if !slices.Equal(vs.GetHosts(), []string{"reviews.bookinfo.svc.cluster.local"}) || !slices.Equal(vs.GetExportTo(), []string{"."}) {
		t.Fatalf("hosts %q, exportTo %q", vs.GetHosts(), vs.GetExportTo())
	}
	d.IstioObjects[0].Hosts = []string{"ratings"}
	if BuildInputSnapshot(east, d).GetVersion() == s.GetVersion() {
		t.Fatal("a user object's hosts are content: the version must change")
	}
}
