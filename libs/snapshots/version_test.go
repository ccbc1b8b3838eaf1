package snapshots_test

import (
	"strings"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func output(cluster, name string) *snapshotv1.OutputSnapshot {
	s := &snapshotv1.OutputSnapshot{Cluster: cluster, Objects: []*snapshotv1.Object{{ApiVersion: "v1", Kind: "K", Name: name}}}
	snapshots.SealOutput(s)
	return s
}

func input(replica string, names ...string) *snapshotv1.InputSnapshot {
	s := &snapshotv1.InputSnapshot{Cluster: "east", Agent: &snapshotv1.AgentInfo{Version: "1.0", Replica: replica}, GeneratedAt: timestamppb.Now()}
	for _, n := range names {
		s.Destinations = append(s.Destinations, &discoveryv1.Destination{Metadata: &commonv1.ObjectMeta{Name: n, Namespace: "ns", Cluster: "east"}})
	}
	return s
}

func TestInputVersionIgnoresOrderTimeAndReplica(t *testing.T) {
	a := input("pod-1", "a", "b")
	b := input("pod-2", "b", "a")
	va, vb := snapshots.SealInput(a), snapshots.SealInput(b)
	if va != vb {
		t.Fatalf("same content, different versions: %s vs %s", va, vb)
	}
	if !strings.HasPrefix(va, snapshots.VersionPrefix) {
		t.Fatalf("version %q lacks prefix", va)
	}
	if snapshots.InputVersion(a) != va {
		t.Fatal("InputVersion must not depend on the version field itself")
	}
	c := input("pod-1", "a", "b", "c")
	if snapshots.SealInput(c) == va {
		t.Fatal("different content, same version")
	}
	d := input("pod-1", "a", "b")
	d.Agent.Version = "2.0"
	if snapshots.SealInput(d) == va {
		t.Fatal("the agent version is content and must change the version")
	}
}

func TestOutputVersionIgnoresInputVersions(t *testing.T) {
	a := output("east", "x")
	b := output("east", "x")
	b.InputVersions = map[string]string{"east": "sha256:1"}
	b.GeneratedAt = timestamppb.Now()
	if snapshots.OutputVersion(a) != snapshots.OutputVersion(b) {
		t.Fatal("diagnostic fields changed the output version")
	}
	if snapshots.OutputVersion(a) == snapshots.OutputVersion(output("east", "y")) {
		t.Fatal("different objects, same version")
	}
}

// An output built without an expected cluster's input is another version
// than the complete one with the same objects, so that the complete one
// reaches the agent, which garbage-collects only on complete outputs. Both
// ways of computing the version agree.
func TestOutputVersionCoversMissingClusters(t *testing.T) {
	complete := output("east", "x")
	incomplete := output("east", "x")
	incomplete.MissingClusters = []string{"west"}
	other := output("east", "x")
	other.MissingClusters = []string{"north", "west"}
	versions := map[string]bool{}
	for _, o := range []*snapshotv1.OutputSnapshot{complete, incomplete, other} {
		v := snapshots.OutputVersion(o)
		if r := snapshots.ReflectOutputVersion(o); r != v {
			t.Fatalf("missing %v: OutputVersion %s, ReflectOutputVersion %s", o.MissingClusters, v, r)
		}
		versions[v] = true
	}
	if len(versions) != 3 {
		t.Fatalf("missing clusters do not change the version: %d distinct versions of 3 outputs", len(versions))
	}
}

// The gateway detector an output brings its agent is part of its version:
// a change of Settings that changes only the detector reaches the agent.
// Both ways of computing the version agree.
func TestOutputVersionCoversGatewayDetector(t *testing.T) {
	none := output("east", "x")
	labels := output("east", "x")
	labels.GatewayDetector = &settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector{EastWestGatewayLabels: map[string]string{"gw": "corp"}}
	port := output("east", "x")
	port.GatewayDetector = &settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector{EastWestGatewayLabels: map[string]string{"gw": "corp"}, EastWestGatewayTlsPortName: "mtls"}
	versions := map[string]bool{}
	for _, o := range []*snapshotv1.OutputSnapshot{none, labels, port} {
		v := snapshots.OutputVersion(o)
		if r := snapshots.ReflectOutputVersion(o); r != v {
			t.Fatalf("detector %v: OutputVersion %s, ReflectOutputVersion %s", o.GatewayDetector, v, r)
		}
		versions[v] = true
	}
	if len(versions) != 3 {
		t.Fatalf("the gateway detector does not change the version: %d distinct versions of 3 outputs", len(versions))
	}
}

func TestInputVersionCoversUserIstioObjects(t *testing.T) {
	user := func(names ...string) *snapshotv1.InputSnapshot {
		s := input("pod-1", "a")
		for _, n := range names {
			s.UserIstioObjects = append(s.UserIstioObjects, &snapshotv1.UserIstioObject{Kind: "VirtualService", Namespace: "ns", Name: n, Hosts: []string{n}})
		}
		return s
	}
	a, b := user("x", "y"), user("y", "x")
	va, vb := snapshots.SealInput(a), snapshots.SealInput(b)
	if va != vb {
		t.Fatalf("same user objects in another order, different versions: %s vs %s", va, vb)
	}
	if a.GetUserIstioObjects()[0].GetName() != "x" || b.GetUserIstioObjects()[0].GetName() != "x" {
		t.Fatal("SortInput must sort user Istio objects by kind, namespace and name")
	}
	if snapshots.SealInput(user("x")) == va {
		t.Fatal("a removed user object must change the version")
	}
	c := user("x", "y")
	c.UserIstioObjects[1].Hosts = []string{"other"}
	if snapshots.SealInput(c) == va {
		t.Fatal("the hosts of a user object must change the version")
	}
}
