package snapshots_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// discovered is a sealed snapshot of cluster with a mesh, a workload and
// destinations whose metadata name metaCluster and whose Service refs name
// refCluster, with labels (maps, whose encoding order matters).
func discovered(cluster, metaCluster, refCluster string) *snapshotv1.InputSnapshot {
	s := input("pod-1", "b", "a")
	s.Cluster = cluster
	s.Meshes = []*discoveryv1.Mesh{{Metadata: &commonv1.ObjectMeta{Name: "istiod", Namespace: "meshplane", Cluster: metaCluster}}}
	s.Workloads = []*discoveryv1.Workload{{
		Metadata: &commonv1.ObjectMeta{Name: "w", Namespace: "meshplane", Cluster: metaCluster},
		Spec: &discoveryv1.WorkloadSpec{Type: &discoveryv1.WorkloadSpec_Kubernetes_{Kubernetes: &discoveryv1.WorkloadSpec_Kubernetes{
			PodLabels: map[string]string{"app": "w", "version": "v1", "tier": "web", "team": "a"},
		}}},
	}}
	for _, d := range s.Destinations {
		d.Metadata.Cluster = metaCluster
		d.Spec = &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
			Ref:    &commonv1.ClusterObjectRef{Name: d.GetMetadata().GetName(), Namespace: "ns", Cluster: refCluster},
			Labels: map[string]string{"app": "x", "b": "1", "c": "2", "d": "3"},
		}}}
	}
	snapshots.SealInput(s)
	return s
}

// withUserResources adds user resources of every kind to s, a different
// number of each, so that a count read from the wrong field shows.
func withUserResources(s *snapshotv1.InputSnapshot) *snapshotv1.InputSnapshot {
	meta := func(i int) *commonv1.ObjectMeta {
		return &commonv1.ObjectMeta{Name: fmt.Sprintf("r%d", i), Namespace: "ns", Cluster: s.GetCluster()}
	}
	for i := range 1 {
		s.VirtualMeshes = append(s.VirtualMeshes, &networkingv1.VirtualMesh{Metadata: meta(i)})
	}
	for i := range 2 {
		s.TrafficPolicies = append(s.TrafficPolicies, &networkingv1.TrafficPolicy{Metadata: meta(i)})
	}
	for i := range 3 {
		s.AccessPolicies = append(s.AccessPolicies, &networkingv1.AccessPolicy{Metadata: meta(i)})
	}
	for i := range 4 {
		s.VirtualDestinations = append(s.VirtualDestinations, &networkingv1.VirtualDestination{Metadata: meta(i)})
	}
	for i := range 5 {
		s.Settings = append(s.Settings, &settingsv1.Settings{Metadata: meta(i)})
	}
	for i := range 6 {
		s.WasmDeploymentPolicies = append(s.WasmDeploymentPolicies, &networkingv1.WasmDeploymentPolicy{Metadata: meta(i)})
	}
	for i := range 7 {
		s.AccessLogPolicies = append(s.AccessLogPolicies, &observabilityv1.AccessLogPolicy{Metadata: meta(i)})
	}
	for i := range 8 {
		s.UserIstioObjects = append(s.UserIstioObjects, &snapshotv1.UserIstioObject{Kind: "VirtualService", Namespace: "ns", Name: fmt.Sprintf("vs%d", i)})
	}
	snapshots.SealInput(s)
	return s
}

func TestReadInputMatchesEncodeInput(t *testing.T) {
	for name, s := range map[string]*snapshotv1.InputSnapshot{
		"discovered":           discovered("east", "east", "east"),
		"refs without cluster": discovered("east", "east", ""),
		"foreign claims":       discovered("east", "west", "west"),
		"user resources":       withUserResources(discovered("east", "east", "east")),
		"without agent":        {Cluster: "east"},
		"empty":                {},
	} {
		t.Run(name, func(t *testing.T) {
			snapshots.SealInput(s)
			e, err := snapshots.EncodeInput(s)
			if err != nil {
				t.Fatal(err)
			}
			h, err := snapshots.ReadInput(e.Data)
			if err != nil {
				t.Fatal(err)
			}
			if h.EncodedVersion != s.GetVersion() || h.Version != s.GetVersion() {
				t.Fatalf("ReadInput: encoded version %s, claimed %s; want both %s", h.EncodedVersion, h.Version, s.GetVersion())
			}
			checkHead(t, h, s)
			// A deterministic encoding of the sealed snapshot is canonical too.
			det, err := proto.MarshalOptions{Deterministic: true}.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if h, err := snapshots.ReadInput(det); err != nil || h.EncodedVersion != s.GetVersion() {
				t.Fatalf("deterministic encoding: version %s, error %v; want %s", h.EncodedVersion, err, s.GetVersion())
			}
		})
	}
}

// checkHead holds h to what decoding gives.
func checkHead(t *testing.T, h snapshots.InputHead, s *snapshotv1.InputSnapshot) {
	t.Helper()
	if h.Cluster != s.GetCluster() || h.Version != s.GetVersion() {
		t.Fatalf("head cluster %q version %q, decoded %q %q", h.Cluster, h.Version, s.GetCluster(), s.GetVersion())
	}
	if !proto.Equal(h.Agent, s.GetAgent()) || (h.Agent == nil) != (s.GetAgent() == nil) {
		t.Fatalf("head agent %v, decoded %v", h.Agent, s.GetAgent())
	}
	if h.InputCounts != snapshots.CountInput(s) {
		t.Fatalf("head counts %+v, decoded %+v", h.InputCounts, snapshots.CountInput(s))
	}
	var meta, refs []string
	add := func(set []string, v string) []string {
		if !slices.Contains(set, v) {
			set = append(set, v)
		}
		return set
	}
	for _, m := range s.GetMeshes() {
		meta = add(meta, m.GetMetadata().GetCluster())
	}
	for _, w := range s.GetWorkloads() {
		meta = add(meta, w.GetMetadata().GetCluster())
	}
	for _, d := range s.GetDestinations() {
		meta = add(meta, d.GetMetadata().GetCluster())
		refs = add(refs, d.GetSpec().GetKubeService().GetRef().GetCluster())
	}
	sorted := func(s []string) []string { return slices.Sorted(slices.Values(s)) }
	if !slices.Equal(sorted(h.DiscoveredClusters), sorted(meta)) || !slices.Equal(sorted(h.ServiceRefClusters), sorted(refs)) {
		t.Fatalf("head claims %q and refs %q, decoded %q and %q", h.DiscoveredClusters, h.ServiceRefClusters, meta, refs)
	}
}

func TestReadInputVersionsOtherEncodingsApart(t *testing.T) {
	s := discovered("east", "east", "east")
	e, err := snapshots.EncodeInput(s)
	if err != nil {
		t.Fatal(err)
	}
	// The same content, with the cluster field sent twice (the last wins
	// when decoded): valid, but not the canonical encoding.
	twice := protowire.AppendTag(slices.Clone(e.Data), 1, protowire.BytesType)
	twice = protowire.AppendString(twice, "east")
	h, err := snapshots.ReadInput(twice)
	if err != nil {
		t.Fatal(err)
	}
	if h.EncodedVersion == s.GetVersion() {
		t.Fatal("a non-canonical encoding got the canonical version")
	}
	if h.Cluster != "east" || h.Version != s.GetVersion() {
		t.Fatalf("head %q %q", h.Cluster, h.Version)
	}
}

func TestReadInputRefusesWhatDecodingRefuses(t *testing.T) {
	s := discovered("east", "east", "east")
	e, err := snapshots.EncodeInput(s)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"truncated":      e.Data[:len(e.Data)-3],
		"garbage":        []byte("this is not a snapshot"),
		"bad utf-8":      {0x0a, 0x01, 0xff},
		"bad utf-8 deep": slices.Concat(e.Data, []byte{0x62, 0x05, 0x0a, 0x03, 0x0a, 0x01, 0xff}),
		"field zero":     {0x02, 0x00},
		"too long":       {0x0a, 0x7f, 'e'},
		"lone end group": {0x0c},
	} {
		t.Run(name, func(t *testing.T) {
			decodeErr := proto.Unmarshal(data, &snapshotv1.InputSnapshot{})
			if decodeErr == nil {
				t.Fatal("the case is not invalid: proto.Unmarshal accepts it")
			}
			_, err := snapshots.ReadInput(data)
			if !errors.Is(err, snapshots.ErrMalformed) {
				t.Fatalf("ReadInput error %v, want ErrMalformed (proto.Unmarshal: %v)", err, decodeErr)
			}
		})
	}
}

// FuzzReadInput holds ReadInput to proto.Unmarshal: it accepts exactly what
// decoding accepts, and its head is what decoding gives. For a canonical
// encoding, its version is InputVersion's.
func FuzzReadInput(f *testing.F) {
	for _, s := range []*snapshotv1.InputSnapshot{
		discovered("east", "east", "east"), discovered("east", "west", ""), {Cluster: "east"}, {},
	} {
		e, err := snapshots.EncodeInput(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(e.Data)
		f.Add(e.Data[:len(e.Data)/2])
		plain, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(plain)
	}
	f.Add([]byte{0x0a, 0x04, 'e', 'a', 's', 't', 0x0a, 0x04, 'w', 'e', 's', 't'})
	f.Add([]byte{0x1a, 0x02, 0x0a, 0x00, 0x1a, 0x02, 0x12, 0x00}) // agent twice: merged
	f.Add([]byte{0x08, 0x01})                                     // cluster with a varint: unknown
	f.Add([]byte{0x0b, 0x0c})                                     // an empty group
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x7f, 0x00})             // field number too large
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := snapshots.ReadInput(data)
		s := &snapshotv1.InputSnapshot{}
		decodeErr := proto.Unmarshal(data, s)
		if (err == nil) != (decodeErr == nil) {
			t.Fatalf("ReadInput error %v, proto.Unmarshal error %v", err, decodeErr)
		}
		if err != nil {
			return
		}
		checkHead(t, h, s)
		e, err := snapshots.EncodeInput(s)
		if err != nil {
			t.Fatal(err)
		}
		canon, err := snapshots.ReadInput(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		if canon.EncodedVersion != e.Version {
			t.Fatalf("canonical encoding: ReadInput version %s, EncodeInput %s", canon.EncodedVersion, e.Version)
		}
	})
}

// BenchmarkReadInput checks and hashes a 100-service snapshot shaped like
// discovery's (labels on every endpoint), as ingest does per push; the
// decoding and canonical encoding it replaces are measured alongside.
func BenchmarkReadInput(b *testing.B) {
	s := &snapshotv1.InputSnapshot{Cluster: "east", Agent: &snapshotv1.AgentInfo{Version: "v1", Replica: "agent-0"}}
	for i := range 100 {
		name := fmt.Sprintf("svc-%03d", i)
		var endpoints []*discoveryv1.DestinationSpec_KubeService_EndpointsSubset_Endpoint
		for e := range 4 {
			endpoints = append(endpoints, &discoveryv1.DestinationSpec_KubeService_EndpointsSubset_Endpoint{
				IpAddress: fmt.Sprintf("10.0.%d.%d", i, e),
				Labels:    map[string]string{"app": name, "version": fmt.Sprintf("v%d", e%2)},
			})
		}
		s.Workloads = append(s.Workloads, &discoveryv1.Workload{
			Metadata: &commonv1.ObjectMeta{Name: name, Namespace: "ns", Cluster: "east"},
			Spec: &discoveryv1.WorkloadSpec{Type: &discoveryv1.WorkloadSpec_Kubernetes_{Kubernetes: &discoveryv1.WorkloadSpec_Kubernetes{
				PodLabels: map[string]string{"app": name, "version": "v1"}, ServiceAccountName: name,
			}}},
		})
		s.Destinations = append(s.Destinations, &discoveryv1.Destination{
			Metadata: &commonv1.ObjectMeta{Name: name, Namespace: "ns", Cluster: "east"},
			Spec: &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
				Ref:                    &commonv1.ClusterObjectRef{Name: name, Namespace: "ns", Cluster: "east"},
				WorkloadSelectorLabels: map[string]string{"app": name},
				Labels:                 map[string]string{"app": name},
				EndpointSubsets:        []*discoveryv1.DestinationSpec_KubeService_EndpointsSubset{{Endpoints: endpoints}},
				Hostname:               name + ".ns.svc.cluster.local",
			}}},
		})
	}
	snapshots.SealInput(s)
	e, err := snapshots.EncodeInput(s)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ReadInput", func(b *testing.B) {
		b.SetBytes(int64(len(e.Data)))
		b.ReportAllocs()
		for b.Loop() {
			h, err := snapshots.ReadInput(e.Data)
			if err != nil || h.EncodedVersion != s.GetVersion() {
				b.Fatalf("ReadInput: %v, version %s", err, h.EncodedVersion)
			}
		}
	})
	b.Run("decode+EncodeInput", func(b *testing.B) {
		b.SetBytes(int64(len(e.Data)))
		b.ReportAllocs()
		for b.Loop() {
			d := &snapshotv1.InputSnapshot{}
			if err := proto.Unmarshal(e.Data, d); err != nil {
				b.Fatal(err)
			}
			if _, err := snapshots.EncodeInput(d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// ReadPolicies finds the bytes each policy of the decoded snapshot was
// decoded from, wherever its occurrence is in the encoding, and leaves out
// an occurrence that the decoder keeps as an unknown field.
func TestReadPoliciesMatchesDecoding(t *testing.T) {
	s := withUserResources(discovered("east", "east", "east"))
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	canonical := snapshots.ReadPolicies(data)
	for i, p := range s.GetTrafficPolicies() {
		want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(p)
		if string(canonical.Traffic[i]) != string(want) {
			t.Fatalf("traffic policy %d: %x, its encoding is %x", i, canonical.Traffic[i], want)
		}
	}
	// Occurrences after other fields, and field numbers of the two lists
	// with a wire type that their kind does not take.
	late := &networkingv1.AccessPolicy{Metadata: &commonv1.ObjectMeta{Name: "late", Namespace: "ns"}}
	lateData, _ := proto.Marshal(late)
	tpNum := protowire.Number(s.ProtoReflect().Descriptor().Fields().ByName("traffic_policies").Number())
	apNum := protowire.Number(s.ProtoReflect().Descriptor().Fields().ByName("access_policies").Number())
	mixed := slices.Clone(data)
	mixed = protowire.AppendTag(mixed, tpNum, protowire.VarintType)
	mixed = protowire.AppendVarint(mixed, 7)
	mixed = protowire.AppendTag(mixed, apNum, protowire.BytesType)
	mixed = protowire.AppendBytes(mixed, lateData)
	mixed = protowire.AppendTag(mixed, apNum, protowire.Fixed32Type)
	mixed = protowire.AppendFixed32(mixed, 7)
	decoded := &snapshotv1.InputSnapshot{}
	if err := proto.Unmarshal(mixed, decoded); err != nil {
		t.Fatal(err)
	}
	got := snapshots.ReadPolicies(mixed)
	check := func(kind string, encs [][]byte, want []proto.Message, fresh func() proto.Message) {
		t.Helper()
		if len(encs) != len(want) {
			t.Fatalf("%s: %d encodings for %d decoded", kind, len(encs), len(want))
		}
		for i, b := range encs {
			m := fresh()
			if err := proto.Unmarshal(b, m); err != nil || !proto.Equal(m, want[i]) {
				t.Fatalf("%s %d: encoding decodes to %v (%v), the snapshot holds %v", kind, i, m, err, want[i])
			}
		}
	}
	var tps, aps []proto.Message
	for _, p := range decoded.GetTrafficPolicies() {
		tps = append(tps, p)
	}
	for _, p := range decoded.GetAccessPolicies() {
		aps = append(aps, p)
	}
	if len(aps) != len(s.GetAccessPolicies())+1 {
		t.Fatalf("decoded %d access policies, want the late one too", len(aps))
	}
	check("traffic policy", got.Traffic, tps, func() proto.Message { return &networkingv1.TrafficPolicy{} })
	check("access policy", got.Access, aps, func() proto.Message { return &networkingv1.AccessPolicy{} })
}
