package snapshots_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Every encoding protobuf-go writes of an output (its map order changes
// from one encoding to the next) scans to the index of the decoded output,
// and the delta cut from it is the delta of the decoded outputs, which the
// receiver turns into the next version.
func TestScanOutputOfAnyEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for i := range 100 {
		base, next := randomOutput(r, 1+r.IntN(30)), randomOutput(r, 1+r.IntN(30))
		next.IssuedCertificates = []*snapshotv1.IssuedCertificate{{}, {}}
		next.InputVersions = map[string]string{"east": "v1", "west": "v2", "mgmt": "v3"}
		snapshots.SealOutput(next)
		want := snapshots.IndexOutput(next)
		for range 5 {
			b, err := proto.Marshal(next)
			if err != nil {
				t.Fatal(err)
			}
			scan, err := snapshots.ScanOutput(b)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if !slices.Equal(scan.Index.Objects, want.Objects) || !slices.Equal(scan.Index.Statuses, want.Statuses) {
				t.Fatalf("case %d: the scan's index is not the decoded output's", i)
			}
			if scan.Version != next.GetVersion() || scan.Objects != len(next.GetObjects()) || scan.Statuses != len(next.GetStatuses()) || scan.IssuedCertificates != 2 || scan.Size() != len(b) {
				t.Fatalf("case %d: scan read version %s, %d objects, %d statuses, %d certificates, %d bytes", i, scan.Version, scan.Objects, scan.Statuses, scan.IssuedCertificates, scan.Size())
			}
			d := &snapshotv1.OutputDelta{}
			if err := proto.Unmarshal(cutDelta(t, scan, base.GetVersion(), snapshots.IndexOutput(base)), d); err != nil {
				t.Fatalf("case %d: the delta does not decode: %v", i, err)
			}
			got, err := snapshots.ApplyDelta(base, d)
			if err != nil || !proto.Equal(got, next) {
				t.Fatalf("case %d: the delta cut from the encoding does not make the next version: %v", i, err)
			}
		}
	}
}

// A delta between two encodings of one version carries no change, and the
// delta of one edited object carries it alone.
func TestScanOutputDeltaOfOneEdit(t *testing.T) {
	base := &snapshotv1.OutputSnapshot{Cluster: "east"}
	for i := range 500 {
		base.Objects = append(base.Objects, deltaObject("VirtualService", i, `{"hosts":["h"]}`))
	}
	snapshots.SealOutput(base)
	scan := func(o *snapshotv1.OutputSnapshot) *snapshots.OutputScan {
		b, _ := proto.Marshal(o)
		s, err := snapshots.ScanOutput(b)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	baseIdx := scan(base).Index
	d := &snapshotv1.OutputDelta{}
	if err := proto.Unmarshal(cutDelta(t, scan(base), base.GetVersion(), baseIdx), d); err != nil {
		t.Fatal(err)
	}
	if len(d.GetObjects())+len(d.GetRemovedObjects()) != 0 {
		t.Fatalf("a delta between two encodings of one version carries %d objects, %d removals", len(d.GetObjects()), len(d.GetRemovedObjects()))
	}
	next := proto.Clone(base).(*snapshotv1.OutputSnapshot)
	edited := next.Objects[250]
	edited.Annotations["meshplane.dev/digest"] = "other"
	snapshots.SealOutput(next)
	if err := proto.Unmarshal(cutDelta(t, scan(next), base.GetVersion(), baseIdx), d); err != nil {
		t.Fatal(err)
	}
	if len(d.GetObjects()) != 1 || d.GetObjects()[0].GetName() != edited.GetName() {
		t.Fatalf("the delta carries %d objects, want %s alone", len(d.GetObjects()), edited.GetName())
	}
}

// What proto.Unmarshal refuses, ScanOutput refuses: distribution never
// sends an agent bytes it cannot decode.
func TestScanOutputRefusesMalformed(t *testing.T) {
	good, _ := proto.Marshal(randomOutput(rand.New(rand.NewPCG(13, 14)), 5))
	badUTF8 := protowire.AppendTag(nil, 4, protowire.BytesType)
	badUTF8 = protowire.AppendBytes(badUTF8, protowire.AppendString(protowire.AppendTag(nil, 4, protowire.BytesType), "\xff"))
	for name, b := range map[string][]byte{
		"truncated":            good[:len(good)-1],
		"an object's bad name": badUTF8,
		"a bad tag":            {0x00},
	} {
		if _, err := snapshots.ScanOutput(b); !errors.Is(err, snapshots.ErrMalformed) {
			t.Errorf("%s: ScanOutput = %v, want ErrMalformed", name, err)
		}
	}
}

// FuzzScanOutput: any bytes are refused, or scan to what decoding them
// finds, and the delta cut from them decodes.
func FuzzScanOutput(f *testing.F) {
	r := rand.New(rand.NewPCG(15, 16))
	base := randomOutput(r, 6)
	seed, _ := proto.Marshal(randomOutput(r, 6))
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		scan, err := snapshots.ScanOutput(b)
		decoded := &snapshotv1.OutputSnapshot{}
		if uerr := proto.Unmarshal(b, decoded); (err == nil) != (uerr == nil) {
			t.Fatalf("ScanOutput: %v, proto.Unmarshal: %v", err, uerr)
		}
		if err != nil {
			return
		}
		if scan.Objects != len(decoded.GetObjects()) || scan.Statuses != len(decoded.GetStatuses()) {
			t.Fatalf("scan counted %d objects and %d statuses, decoding %d and %d", scan.Objects, scan.Statuses, len(decoded.GetObjects()), len(decoded.GetStatuses()))
		}
		d := &snapshotv1.OutputDelta{}
		if err := proto.Unmarshal(cutDelta(t, scan, base.GetVersion(), snapshots.IndexOutput(base)), d); err != nil {
			t.Fatalf("the delta does not decode: %v", err)
		}
	})
}

// referenceSizeOutput is an output of the reference estate's size for
// one cluster: 21,000 objects of about 600 bytes (13 MB), each with the
// labels and annotations translation writes.
func referenceSizeOutput() *snapshotv1.OutputSnapshot {
	o := &snapshotv1.OutputSnapshot{Cluster: "cluster-000"}
	spec := `{"hosts":["reviews.bookinfo.svc.cluster.local"],"http":[{"route":[{"destination":{"host":"reviews.bookinfo.svc.cluster.local","subset":"v1"},"weight":90},{"destination":{"host":"reviews.bookinfo.svc.cluster.local","subset":"v2"},"weight":10}],"retries":{"attempts":3,"perTryTimeout":"2s"},"timeout":"10s"}]}`
	for i := range 21000 {
		o.Objects = append(o.Objects, deltaObject([]string{"VirtualService", "DestinationRule", "ServiceEntry"}[i%3], i, spec))
	}
	snapshots.SortOutput(o)
	snapshots.SealOutput(o)
	return o
}

// BenchmarkScanOutput is distribution's work for one edited object of a
// reference-size output: /scan walks the stored bytes and cuts the delta
// from them (what distribution does); /decode only decodes the output and
// encodes a one-object delta, the least a path through the decoded
// output costs.
func BenchmarkScanOutput(b *testing.B) {
	base := referenceSizeOutput()
	next := proto.Clone(base).(*snapshotv1.OutputSnapshot)
	next.Objects[10500].Spec = []byte(`{"hosts":["edited"]}`)
	snapshots.SealOutput(next)
	data, err := proto.Marshal(next)
	if err != nil {
		b.Fatal(err)
	}
	baseIdx := snapshots.IndexOutput(base)
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		var delta []byte
		for b.Loop() {
			scan, err := snapshots.ScanOutput(data)
			if err != nil {
				b.Fatal(err)
			}
			if delta, err = scan.AppendDelta(delta[:0], base.GetVersion(), baseIdx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(delta)), "delta-B")
	})
	// /table is the same from the encoding's table, as translation
	// stores it beside the encoding (OutputEncoder).
	var enc snapshots.OutputEncoder
	if _, _, err := enc.Encode(base); err != nil {
		b.Fatal(err)
	}
	tdata, table, err := enc.Encode(next)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("table", func(b *testing.B) {
		b.SetBytes(int64(len(tdata)))
		var delta []byte
		for b.Loop() {
			scan, err := snapshots.ScanOutputTable(tdata, table)
			if err != nil {
				b.Fatal(err)
			}
			if delta, err = scan.AppendDelta(delta[:0], base.GetVersion(), baseIdx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(delta)), "delta-B")
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			o := &snapshotv1.OutputSnapshot{}
			if err := proto.Unmarshal(data, o); err != nil {
				b.Fatal(err)
			}
			if _, err := proto.Marshal(&snapshotv1.OutputDelta{Version: o.GetVersion(), Objects: o.GetObjects()[10500:10501]}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// cutDelta is scan.AppendDelta, which must not fail.
func cutDelta(t testing.TB, scan *snapshots.OutputScan, baseVersion string, base snapshots.OutputIndex) []byte {
	t.Helper()
	b, err := scan.AppendDelta(nil, baseVersion, base)
	if err != nil {
		t.Fatalf("cut a delta: %v", err)
	}
	return b
}
