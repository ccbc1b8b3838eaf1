package domain_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/meshview"
	"github.com/meshplane/meshplane/services/console/internal/domain"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestSessionPolicy(t *testing.T) {
	p := domain.SessionPolicy{TTL: 8 * time.Hour, Idle: 30 * time.Minute}
	s := domain.Session{Created: t0, LastSeen: t0}
	for _, tc := range []struct {
		name     string
		lastSeen time.Time
		at       time.Time
		want     bool
	}{
		{"fresh", t0, t0.Add(time.Minute), true},
		{"idle", t0, t0.Add(31 * time.Minute), false},
		{"used recently, within TTL", t0.Add(7*time.Hour + 50*time.Minute), t0.Add(7*time.Hour + 55*time.Minute), true},
		{"used recently, past TTL", t0.Add(7*time.Hour + 59*time.Minute), t0.Add(8*time.Hour + time.Second), false},
	} {
		s.LastSeen = tc.lastSeen
		if got := p.Valid(s, tc.at); got != tc.want {
			t.Errorf("%s: Valid = %v, want %v (expires %s)", tc.name, got, tc.want, p.ExpiresAt(s))
		}
	}
}

func TestFailureLimiter(t *testing.T) {
	l := domain.FailureLimiter{Max: 3, Window: time.Minute}
	for i := range 3 {
		if !l.Allowed("1.2.3.4", t0) {
			t.Fatalf("refused after %d failures", i)
		}
		l.Fail("1.2.3.4", t0)
	}
	if l.Allowed("1.2.3.4", t0.Add(time.Second)) {
		t.Error("allowed a fourth try within the window")
	}
	if !l.Allowed("5.6.7.8", t0) {
		t.Error("another client was refused")
	}
	if !l.Allowed("1.2.3.4", t0.Add(time.Minute)) {
		t.Error("refused after the window ended")
	}
}

func TestViewAttributes(t *testing.T) {
	if got := domain.OutputAttributes("east").String(); got != "get kubernetesclusters.multicluster.meshplane.dev/output east" {
		t.Errorf("output attributes = %q", got)
	}
	k, _ := domain.PolicyKindOf("TrafficPolicy")
	if got := domain.PolicyAttributes(k, "").String(); got != "list trafficpolicies.networking.meshplane.dev" {
		t.Errorf("policy attributes = %q", got)
	}
	for _, v := range domain.Views {
		if len(domain.ViewAttributes(v)) == 0 {
			t.Errorf("view %s has no checks", v)
		}
	}
	if _, err := domain.DescribeKind("pods"); err == nil {
		t.Error("DescribeKind(pods) succeeded")
	}
	if k, err := domain.DescribeKind("destination"); err != nil || k.Resource != "destinations" {
		t.Errorf("DescribeKind(destination) = %+v, %v", k, err)
	}
}

func TestOverviewProblemsFirst(t *testing.T) {
	rep := meshview.ClusterReport{
		SafeMode: &meshview.SafeMode{On: true, Waiting: []string{"west"}},
		Clusters: []meshview.ClusterCheck{
			{Cluster: "a-ok", Push: "connected", Pull: "connected", Applied: "current", Healthy: true},
			{Cluster: "b-behind", Push: "connected", Pull: "connected", Applied: "behind"},
			{Cluster: "c-never", Push: "never", Pull: "never", Applied: "-"},
		},
	}
	o := domain.NewOverview([]domain.ServiceHealth{{Name: "ingest", Status: "SERVING"}, {Name: "translation", Status: "NOT_SERVING"}}, rep, nil, t0)
	if o.OK {
		t.Error("OK with problems")
	}
	var order []string
	for _, c := range o.Clusters {
		order = append(order, c.Cluster)
	}
	if got := strings.Join(order, ","); got != "c-never,b-behind,a-ok" {
		t.Errorf("cluster order = %s, want never seen, unhealthy, healthy", got)
	}
	if len(o.Problems) < 4 || !strings.Contains(o.Problems[0], "translation") || !strings.Contains(o.Problems[1], "safe mode") || !strings.Contains(o.Problems[2], "c-never") {
		t.Errorf("problems = %q", o.Problems)
	}
}

func TestHistoryBounded(t *testing.T) {
	h := domain.NewHistory(2)
	for _, v := range []string{"v1", "v2", "v2", "v3"} {
		h.Add(&snapshotv1.OutputSnapshot{Version: v})
	}
	if got := strings.Join(h.Versions(), ","); got != "v3,v2" {
		t.Errorf("versions = %s, want v3,v2", got)
	}
	if _, ok := h.Get("v1"); ok {
		t.Error("v1 kept beyond the bound")
	}
	if o, ok := h.Get(""); !ok || o.GetVersion() != "v3" {
		t.Errorf("latest = %v", o)
	}
}

func TestRenderYAMLSorted(t *testing.T) {
	y, err := domain.RenderYAML(&snapshotv1.OutputSnapshot{Objects: []*snapshotv1.Object{
		{ApiVersion: "networking.istio.io/v1", Kind: "VirtualService", Namespace: "b", Name: "r", Spec: []byte(`{"hosts":["r"]}`)},
		{ApiVersion: "networking.istio.io/v1", Kind: "DestinationRule", Namespace: "a", Name: "r", Labels: map[string]string{"x": "y"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(y, "---\n")
	if len(docs) != 2 || !strings.Contains(docs[0], "kind: DestinationRule") || !strings.Contains(docs[1], "spec:\n  hosts:\n    - r") {
		t.Errorf("yaml =\n%s", y)
	}
	if _, err := domain.RenderYAML(&snapshotv1.OutputSnapshot{Objects: []*snapshotv1.Object{{Kind: "X", Name: "bad", Spec: []byte("{")}}}); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Errorf("bad spec error = %v, want one naming the object", err)
	}
}

func TestTrafficWindow(t *testing.T) {
	w := domain.NewTrafficWindow(time.Minute)
	entry := func(at time.Time, code uint32) *observabilityv1.AccessLogEntry {
		return &observabilityv1.AccessLogEntry{Cluster: "east", Direction: "outbound", Authority: "reviews.bookinfo.svc.cluster.local:9080", ResponseCode: code,
			Workload: &commonv1.ClusterObjectRef{Name: "productpage", Namespace: "bookinfo"}, StartTime: timestamppb.New(at)}
	}
	w.Add([]*observabilityv1.AccessLogEntry{entry(t0.Add(-2*time.Minute), 200), entry(t0.Add(-10*time.Second), 200), entry(t0.Add(-5*time.Second), 503), {Direction: "inbound", Authority: "x"}})
	w.Prune(t0)
	got := w.Counts(t0, 30*time.Second)
	if len(got) != 1 || got[0].Requests != 2 || got[0].Errors != 1 || got[0].Source.Cluster != "east" {
		t.Errorf("counts = %+v, want 2 requests, 1 error from east", got)
	}
}

// estate builds n destinations in two clusters, each cluster's output
// holding a ServiceEntry for each destination of the other.
func estate(n int) domain.GraphInput {
	in := domain.GraphInput{Outputs: map[string]*snapshotv1.OutputSnapshot{"east": {}, "west": {}}, Window: time.Minute}
	for _, cl := range []string{"east", "west"} {
		in.Meshes = append(in.Meshes, &discoveryv1.Mesh{Metadata: &commonv1.ObjectMeta{Name: "istiod", Namespace: "istio-system", Cluster: cl}})
	}
	for i := range n {
		cl, other := "east", "west"
		if i%2 == 1 {
			cl, other = "west", "east"
		}
		name := fmt.Sprintf("svc%d", i)
		in.Destinations = append(in.Destinations, &discoveryv1.Destination{
			Metadata: &commonv1.ObjectMeta{Cluster: cl},
			Spec: &discoveryv1.DestinationSpec{Mesh: &commonv1.ObjectRef{Name: "istiod", Namespace: "istio-system"},
				Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{Ref: &commonv1.ClusterObjectRef{Name: name, Namespace: "ns", Cluster: cl}}}},
			Status: &discoveryv1.DestinationStatus{LocalFqdn: name + ".ns.svc.cluster.local"},
		})
		in.Outputs[other].Objects = append(in.Outputs[other].Objects, &snapshotv1.Object{Kind: "ServiceEntry", Namespace: "istio-system", Name: name + "-" + cl,
			Annotations: map[string]string{snapshots.AnnotationParents: fmt.Sprintf(`{%q:[{"name":%q,"namespace":"ns","cluster":%q}]}`, meshview.ParentDestination, name, cl)}})
	}
	in.Outputs["east"].Statuses = []*snapshotv1.ResourceStatus{
		{Kind: "VirtualDestination", Namespace: "ns", Name: "global", Status: []byte(`{"state":"ACCEPTED","selectedDestinations":[{"name":"svc0","namespace":"ns","cluster":"east"},{"name":"svc1","namespace":"ns","cluster":"west"}]}`)},
		{Kind: "AccessPolicy", Namespace: "ns", Name: "allow", Status: []byte(`{"state":"ACCEPTED","destinations":{"svc0.ns.east":{"state":"ACCEPTED"},"svc1.ns.west":{"state":"INVALID"}},"workloads":[{"name":"web","namespace":"ns","cluster":"east"}]}`)},
	}
	in.Traffic = []domain.TrafficCount{{Source: meshview.Ref{Name: "web", Namespace: "ns", Cluster: "east"}, Host: "svc1.ns.svc.cluster.local:80", Requests: 120, Errors: 6}}
	return in
}

func TestBuildGraph(t *testing.T) {
	g := domain.BuildGraph(estate(4))
	edges := map[string]domain.Edge{}
	for _, e := range g.Edges {
		edges[e.Kind+" "+e.Source+" -> "+e.Target] = e
	}
	for _, want := range []string{
		"federation mesh/istiod.istio-system.west -> destination/svc0.ns.east",
		"federation mesh/istiod.istio-system.east -> destination/svc1.ns.west",
		"access workload/web.ns.east -> destination/svc0.ns.east",
		"traffic workload/web.ns.east -> destination/svc1.ns.west",
	} {
		if _, ok := edges[want]; !ok {
			t.Errorf("missing edge %s; have %v", want, g.Edges)
		}
	}
	if _, ok := edges["access workload/web.ns.east -> destination/svc1.ns.west"]; ok {
		t.Error("access edge for a destination the policy was INVALID for")
	}
	if e := edges["failover virtualdestination/global.ns.east -> destination/svc1.ns.west"]; e.Order != 2 {
		t.Errorf("failover to svc1 order = %d, want 2", e.Order)
	}
	if e := edges["traffic workload/web.ns.east -> destination/svc1.ns.west"]; e.RequestRate != 2 || e.ErrorRate != 0.1 {
		t.Errorf("traffic rates = %v, %v, want 2 and 0.1 per second", e.RequestRate, e.ErrorRate)
	}
	if again := domain.BuildGraph(estate(4)); fmt.Sprint(again) != fmt.Sprint(g) {
		t.Error("two builds of the same state differ")
	}
}

func BenchmarkBuildGraph(b *testing.B) {
	in := estate(2000)
	b.ReportAllocs()
	for b.Loop() {
		domain.BuildGraph(in)
	}
}
