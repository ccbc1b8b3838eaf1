package snapshots_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// EncodeOutput writes the bytes protobuf-go's deterministic encoding
// writes, for outputs with every field set, empty strings, map entries
// with empty keys and values, and statuses with and without a generation.
func TestEncodeOutput(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	det := proto.MarshalOptions{Deterministic: true}
	for i := range 200 {
		o := randomOutput(r, 1+r.IntN(30))
		if i%2 == 0 {
			o.GeneratedAt = timestamppb.New(timestamppb.Now().AsTime())
			o.InputVersions = map[string]string{"east": "v1", "west": "v2"}
			o.IssuedCertificates = []*snapshotv1.IssuedCertificate{{}, {}}
			o.WasmFilters = []*snapshotv1.WasmFilterConfig{{Name: "w"}}
			o.AccessLogPolicies = []*snapshotv1.AccessLogPolicyConfig{{}}
			o.MissingClusters = []string{"north"}
			o.GatewayDetector = &settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector{
				EastWestGatewayLabels: map[string]string{"istio": "eastwestgateway", "net": "n1"}, EastWestGatewayTlsPortName: "tls",
			}
		}
		if len(o.Objects) > 0 {
			o.Objects[0].Labels[""] = ""
			o.Objects[0].Annotations = nil
			o.Objects[0].Namespace = ""
			o.Objects[len(o.Objects)-1].Spec = nil
		}
		for j, st := range o.Statuses {
			if j%2 == 0 {
				st.ObservedGeneration = 0
			}
		}
		got, err := snapshots.EncodeOutput(o)
		if err != nil {
			t.Fatal(err)
		}
		want, err := det.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d: EncodeOutput wrote %d bytes that are not protobuf's deterministic %d", i, len(got), len(want))
		}
	}
}

// What protobuf refuses to encode, EncodeOutput refuses too; unknown
// fields are kept as protobuf keeps them.
func TestEncodeOutputFallsBack(t *testing.T) {
	o := randomOutput(rand.New(rand.NewPCG(19, 20)), 10)
	o.Objects[0].Labels["bad"] = "\xff"
	if _, err := snapshots.EncodeOutput(o); err == nil {
		t.Fatal("EncodeOutput encoded a label that is not UTF-8")
	}
	o.Objects[0].Labels["bad"] = "good"
	o.Statuses = append(o.Statuses, &snapshotv1.ResourceStatus{Name: "\xff"})
	if _, err := snapshots.EncodeOutput(o); err == nil {
		t.Fatal("EncodeOutput encoded a status name that is not UTF-8")
	}
	o.Statuses = o.Statuses[:len(o.Statuses)-1]
	o.Objects[1].ProtoReflect().SetUnknown([]byte{0xf8, 0x01, 0x01}) // field 31, varint 1
	got, err := snapshots.EncodeOutput(o)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(o)
	if !bytes.Equal(got, want) {
		t.Fatal("an object with unknown fields is not encoded as protobuf encodes it")
	}
}

// BenchmarkEncodeOutput encodes a reference-size output (21,000 objects):
// /hand is EncodeOutput, /protobuf proto.Marshal, which translation used
// to publish an output.
func BenchmarkEncodeOutput(b *testing.B) {
	o := referenceSizeOutput()
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			if _, err := snapshots.EncodeOutput(o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protobuf", func(b *testing.B) {
		for b.Loop() {
			if _, err := proto.Marshal(o); err != nil {
				b.Fatal(err)
			}
		}
	})
}
