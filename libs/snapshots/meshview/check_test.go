package meshview_test

import (
	"testing"
	"time"

	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/meshview"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestCheckClusters(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := meshview.CheckInput{
		Now: now,
		Clusters: []*ingestv1.ClusterConnectivity{
			{Cluster: "east", Connected: true, Version: "i1"},
			{Cluster: "west", Connected: true},
			{Cluster: "mgmt", Connected: true, Management: true},
		},
		Acks: []*distributionv1.ClusterAck{
			{Cluster: "east", Connected: true, AckedVersion: "v1", LatestVersion: "v1"},
			{Cluster: "west", Connected: true, AckedVersion: "v0", LatestVersion: "v1"},
		},
		Records: []*registrationv1.Cluster{
			{Name: "east", Status: registrationv1.ClusterStatus_CLUSTER_STATUS_APPROVED, CertificateExpiresAt: timestamppb.New(now.Add(time.Hour))},
			{Name: "north", Status: registrationv1.ClusterStatus_CLUSTER_STATUS_APPROVED},
			{Name: "gone", Status: registrationv1.ClusterStatus_CLUSTER_STATUS_DEREGISTERED},
		},
		Translation: &translationv1.GetStatusResponse{MissingClusters: []string{"south"}},
	}
	rep := meshview.CheckClusters(in)
	if rep.OK {
		t.Error("OK with a cluster behind and two never seen")
	}
	want := map[string]struct {
		applied string
		healthy bool
	}{"east": {"current", true}, "west": {"behind", false}, "mgmt": {"-", true}, "north": {"-", false}, "south": {"-", false}}
	if len(rep.Clusters) != len(want) {
		t.Fatalf("clusters = %+v, want %d", rep.Clusters, len(want))
	}
	for _, c := range rep.Clusters {
		w, ok := want[c.Cluster]
		if !ok || c.Applied != w.applied || (c.Push != "never" && c.Healthy != w.healthy) {
			t.Errorf("cluster %s: applied %q healthy %v, want %+v", c.Cluster, c.Applied, c.Healthy, w)
		}
	}
	if got := rep.Clusters[3].Cluster + "," + rep.Clusters[4].Cluster; got != "north,south" {
		t.Errorf("never-seen clusters = %s, want north,south after ingest's", got)
	}
	if rep.Clusters[0].Registration != "APPROVED" || rep.Clusters[0].CertExpires == nil {
		t.Errorf("east registration = %q, cert %v", rep.Clusters[0].Registration, rep.Clusters[0].CertExpires)
	}
}

func TestObjectsWithParentAndStatus(t *testing.T) {
	outs := map[string]*snapshotv1.OutputSnapshot{"east": {Objects: []*snapshotv1.Object{
		{Kind: "ServiceEntry", Name: "a", Annotations: map[string]string{snapshots.AnnotationParents: `{"discovery.meshplane.dev/v1, Kind=Destination":[{"name":"r","namespace":"n","cluster":"west"}]}`}},
		{Kind: "ServiceEntry", Name: "b", Annotations: map[string]string{snapshots.AnnotationParents: `not json`}},
	}}}
	got := meshview.ObjectsWithParent([]string{"east"}, outs, meshview.ParentDestination, meshview.Ref{Name: "r", Namespace: "n", Cluster: "west"})
	if len(got) != 1 || got[0].Name != "a" || got[0].Cluster != "east" {
		t.Errorf("ObjectsWithParent = %+v, want ServiceEntry a in east", got)
	}
	if st := meshview.ParseStatus(&snapshotv1.ResourceStatus{}); st.State != "PENDING" {
		t.Errorf("empty status state = %q, want PENDING", st.State)
	}
	st := meshview.ParseStatus(&snapshotv1.ResourceStatus{Status: []byte(`{"state":"INVALID","errors":["spec.retries: bad"]}`)})
	if st.State != "INVALID" || len(st.Errors) != 1 {
		t.Errorf("status = %+v", st)
	}
}
