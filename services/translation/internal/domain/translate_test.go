package domain_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
)

const destinationKind = "discovery.meshplane.dev/v1, Kind=Destination"

type svc struct{ namespace, name, hostname string }

func destination(cluster string, s svc) *discoveryv1.Destination {
	return &discoveryv1.Destination{
		Metadata: &commonv1.ObjectMeta{Name: s.name + "-" + s.namespace + "-" + cluster, Namespace: s.namespace, Cluster: cluster},
		Spec: &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
			Ref:      &commonv1.ClusterObjectRef{Name: s.name, Namespace: s.namespace, Cluster: cluster},
			Hostname: s.hostname,
		}}},
	}
}

func input(cluster, replica string, services ...svc) *snapshotv1.InputSnapshot {
	in := &snapshotv1.InputSnapshot{Cluster: cluster, Agent: &snapshotv1.AgentInfo{Version: "v1", Replica: replica}}
	for _, s := range services {
		in.Destinations = append(in.Destinations, destination(cluster, s))
	}
	snapshots.SealInput(in)
	return in
}

func translate(t *testing.T, opts domain.Options, inputs ...*snapshotv1.InputSnapshot) map[string]*snapshotv1.OutputSnapshot {
	t.Helper()
	m := map[string]*snapshotv1.InputSnapshot{}
	for _, in := range inputs {
		m[in.GetCluster()] = in
	}
	out, err := domain.Translate(m, opts)
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	return out
}

// wantDR is what one DestinationRule must hold.
type wantDR struct {
	namespace, name, host string
}

func TestTranslateDestinationRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    domain.Options
		cluster string
		in      []svc
		install string
		want    []wantDR
	}{
		{
			name: "one DestinationRule per destination, FQDN from the default cluster domain",
			in:   []svc{{"default", "reviews", ""}, {"shop", "cart", ""}},
			want: []wantDR{
				{"default", "reviews", "reviews.default.svc.cluster.local"},
				{"shop", "cart", "cart.shop.svc.cluster.local"},
			},
			install: snapshots.DefaultInstall,
		},
		{
			name:    "custom cluster domain and install",
			opts:    domain.Options{Install: "prod", ClusterDomain: "east.example"},
			in:      []svc{{"default", "reviews", ""}},
			want:    []wantDR{{"default", "reviews", "reviews.default.svc.east.example"}},
			install: "prod",
		},
		{
			name:    "hostname from discovery wins",
			in:      []svc{{"default", "reviews", "reviews.default.svc.corp.local"}},
			want:    []wantDR{{"default", "reviews", "reviews.default.svc.corp.local"}},
			install: snapshots.DefaultInstall,
		},
		{
			name:    "destination without a Service reference gets nothing",
			in:      []svc{{"", "reviews", ""}, {"default", "", ""}},
			want:    nil,
			install: snapshots.DefaultInstall,
		},
		{
			name:    "no destinations",
			want:    nil,
			install: snapshots.DefaultInstall,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input("east", "agent-0", tc.in...)
			out := translate(t, tc.opts, in)["east"]
			if out == nil {
				t.Fatal("no output for east")
			}
			if out.GetCluster() != "east" || out.GetInputVersions()["east"] != in.GetVersion() {
				t.Fatalf("output cluster %q, input versions %v", out.GetCluster(), out.GetInputVersions())
			}
			if out.GetVersion() != snapshots.OutputVersion(out) {
				t.Fatalf("output version %s is not its content hash", out.GetVersion())
			}
			if got := len(out.GetObjects()); got != len(tc.want) {
				t.Fatalf("%d objects, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				checkDR(t, out.GetObjects()[i], w, "east", tc.install)
			}
		})
	}
}

func checkDR(t *testing.T, obj *snapshotv1.Object, w wantDR, cluster, install string) {
	t.Helper()
	if obj.GetApiVersion() != "networking.istio.io/v1" || obj.GetKind() != "DestinationRule" {
		t.Errorf("object is %s %s, want networking.istio.io/v1 DestinationRule", obj.GetApiVersion(), obj.GetKind())
	}
	if obj.GetNamespace() != w.namespace || obj.GetName() != w.name {
		t.Errorf("object is %s/%s, want %s/%s", obj.GetNamespace(), obj.GetName(), w.namespace, w.name)
	}
	wantLabels := map[string]string{"meshplane.dev/managed-by": install, "meshplane.dev/cluster": cluster}
	if !maps.Equal(obj.GetLabels(), wantLabels) {
		t.Errorf("labels %v, want %v", obj.GetLabels(), wantLabels)
	}

	var parents map[string][]struct{ Name, Namespace, Cluster string }
	if err := json.Unmarshal([]byte(obj.GetAnnotations()["meshplane.dev/parents"]), &parents); err != nil {
		t.Fatalf("parents annotation %q: %v", obj.GetAnnotations()["meshplane.dev/parents"], err)
	}
	if len(parents) != 1 || len(parents[destinationKind]) != 1 {
		t.Fatalf("parents %v, want one %s", parents, destinationKind)
	}
	if p := parents[destinationKind][0]; p.Name != w.name || p.Namespace != w.namespace || p.Cluster != cluster {
		t.Errorf("parent %+v, want %s/%s in %s", p, w.namespace, w.name, cluster)
	}

	// The spec is what the agent applies: Kubernetes JSON field names...
	var raw struct {
		Host          string `json:"host"`
		TrafficPolicy struct {
			TLS struct {
				Mode string `json:"mode"`
			} `json:"tls"`
		} `json:"trafficPolicy"`
	}
	if err := json.Unmarshal(obj.GetSpec(), &raw); err != nil {
		t.Fatalf("spec is not JSON: %v", err)
	}
	if raw.Host != w.host || raw.TrafficPolicy.TLS.Mode != "ISTIO_MUTUAL" {
		t.Errorf("spec %s: host %q tls mode %q, want %q ISTIO_MUTUAL", obj.GetSpec(), raw.Host, raw.TrafficPolicy.TLS.Mode, w.host)
	}
	// ...and a valid Istio DestinationRule.
	var dr networkingv1alpha3.DestinationRule
	if err := protojson.Unmarshal(obj.GetSpec(), &dr); err != nil {
		t.Fatalf("spec is not a DestinationRule: %v", err)
	}
	if dr.GetHost() != w.host || dr.GetTrafficPolicy().GetTls().GetMode() != networkingv1alpha3.ClientTLSSettings_ISTIO_MUTUAL {
		t.Errorf("DestinationRule %v, want host %s with ISTIO_MUTUAL", &dr, w.host)
	}
}

func TestTranslateClustersAreSeparate(t *testing.T) {
	east := input("east", "a", svc{"default", "reviews", ""})
	west := input("west", "a", svc{"default", "ratings", ""}, svc{"default", "details", ""})
	out := translate(t, domain.Options{}, east, west)
	if got := slices.Sorted(maps.Keys(out)); !slices.Equal(got, []string{"east", "west"}) {
		t.Fatalf("outputs for %v, want east and west", got)
	}
	for cluster, want := range map[string][]string{"east": {"reviews"}, "west": {"details", "ratings"}} {
		o := out[cluster]
		var names []string
		for _, obj := range o.GetObjects() {
			names = append(names, obj.GetName())
			if obj.GetLabels()["meshplane.dev/cluster"] != cluster {
				t.Errorf("object %s in %s's output is labelled for cluster %s", obj.GetName(), cluster, obj.GetLabels()["meshplane.dev/cluster"])
			}
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s's objects %v, want %v", cluster, names, want)
		}
	}
}

func TestTranslateIsDeterministic(t *testing.T) {
	services := []svc{{"default", "reviews", ""}, {"default", "ratings", ""}, {"shop", "cart", ""}, {"shop", "checkout", ""}}
	base := translate(t, domain.Options{}, input("east", "agent-0", services...), input("west", "agent-0", services[:2]...))

	reversed := slices.Clone(services)
	slices.Reverse(reversed)
	shuffled := input("east", "agent-0", services...)
	// An input whose lists arrive in another order (not sealed again).
	slices.Reverse(shuffled.Destinations)

	for _, tc := range []struct {
		name   string
		inputs []*snapshotv1.InputSnapshot
	}{
		{"same inputs again", []*snapshotv1.InputSnapshot{input("east", "agent-0", services...), input("west", "agent-0", services[:2]...)}},
		{"inputs in another order", []*snapshotv1.InputSnapshot{input("west", "agent-0", services[:2]...), input("east", "agent-0", reversed...)}},
		{"destinations in another order", []*snapshotv1.InputSnapshot{shuffled, input("west", "agent-0", services[:2]...)}},
		{"pushed by other agent replicas", []*snapshotv1.InputSnapshot{input("east", "agent-1", services...), input("west", "agent-2", services[:2]...)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 3 { // map iteration differs between runs
				got := translate(t, domain.Options{}, tc.inputs...)
				for cluster, want := range base {
					if got[cluster].GetVersion() != want.GetVersion() {
						t.Fatalf("%s: version %s, want %s", cluster, got[cluster].GetVersion(), want.GetVersion())
					}
					if !proto.Equal(stripInputVersions(got[cluster]), stripInputVersions(want)) {
						t.Fatalf("%s: same version but different content", cluster)
					}
				}
			}
		})
	}
}

func stripInputVersions(o *snapshotv1.OutputSnapshot) *snapshotv1.OutputSnapshot {
	c := proto.Clone(o).(*snapshotv1.OutputSnapshot)
	c.InputVersions = nil
	return c
}

func TestTranslateRemovedDestination(t *testing.T) {
	before := translate(t, domain.Options{}, input("east", "a", svc{"default", "reviews", ""}, svc{"default", "ratings", ""}))["east"]
	after := translate(t, domain.Options{}, input("east", "a", svc{"default", "reviews", ""}))["east"]
	if before.GetVersion() == after.GetVersion() {
		t.Fatal("removing a destination did not change the output version")
	}
	if len(after.GetObjects()) != 1 || after.GetObjects()[0].GetName() != "reviews" {
		var names []string
		for _, o := range after.GetObjects() {
			names = append(names, o.GetName())
		}
		t.Fatalf("objects after removing ratings: %v, want [reviews]", names)
	}
	empty := translate(t, domain.Options{}, input("east", "a"))["east"]
	if len(empty.GetObjects()) != 0 {
		t.Fatalf("%d objects after removing every destination, want none", len(empty.GetObjects()))
	}
}
