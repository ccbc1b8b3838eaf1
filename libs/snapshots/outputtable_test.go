package snapshots_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/proto"
)

// nextVersion is the next version of o as translation makes it: the same
// objects by pointer, except some replaced by new ones, some removed and
// some added, and new statuses.
func nextVersion(r *rand.Rand, o *snapshotv1.OutputSnapshot, round int) *snapshotv1.OutputSnapshot {
	next := &snapshotv1.OutputSnapshot{Cluster: o.GetCluster(), MissingClusters: o.GetMissingClusters()}
	for _, obj := range o.GetObjects() {
		switch r.IntN(10) {
		case 0: // removed
		case 1: // replaced
			next.Objects = append(next.Objects, deltaObject(obj.GetKind(), 1000*round+r.IntN(1000), fmt.Sprintf(`{"v":%d}`, r.IntN(5))))
		default:
			next.Objects = append(next.Objects, obj)
		}
	}
	for i := range r.IntN(4) {
		next.Objects = append(next.Objects, deltaObject("ServiceEntry", 100000*round+i, `{"added":true}`))
	}
	for i := range r.IntN(5) {
		next.Statuses = append(next.Statuses, deltaStatus(i, fmt.Sprintf(`{"state":%d}`, r.IntN(2))))
	}
	snapshots.SealOutput(next)
	return next
}

// The encoder writes EncodeOutput's bytes for every version, reused or
// not, and the table ScanOutput finds in them.
func TestOutputEncoderWritesEncodeOutputsBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for c := range 20 {
		var enc snapshots.OutputEncoder
		o := randomOutput(r, 1+r.IntN(60))
		for round := range 8 {
			checkEncoder(t, fmt.Sprintf("case %d round %d", c, round), &enc, o)
			o = nextVersion(r, o, round+1)
		}
	}
}

func checkEncoder(t *testing.T, name string, enc *snapshots.OutputEncoder, o *snapshotv1.OutputSnapshot) {
	t.Helper()
	data, table, err := enc.Encode(o)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	want, err := snapshots.EncodeOutput(o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("%s: the encoder's bytes are not EncodeOutput's", name)
	}
	scan, err := snapshots.ScanOutput(data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(table, scan.AppendTable(nil)) {
		t.Fatalf("%s: the encoder's table is not the one ScanOutput finds", name)
	}
}

// An object changed in place (which translation does not do) is encoded
// again, not copied from the last version: the encoder knows objects by
// what their fields point to, not only by their address.
func TestOutputEncoderSeesObjectsChangedInPlace(t *testing.T) {
	o := &snapshotv1.OutputSnapshot{Cluster: "east"}
	for i := range 10 {
		o.Objects = append(o.Objects, deltaObject("VirtualService", i, `{"v":1}`))
	}
	snapshots.SealOutput(o)
	var enc snapshots.OutputEncoder
	checkEncoder(t, "first", &enc, o)
	edits := []func(*snapshotv1.Object){
		func(x *snapshotv1.Object) { x.Spec = []byte(`{"v":2}`) },
		func(x *snapshotv1.Object) { x.Annotations = map[string]string{"a": "b"} },
		func(x *snapshotv1.Object) { x.Labels = map[string]string{"app": "other"} },
		func(x *snapshotv1.Object) { x.Spec = x.Spec[:3] },
		func(x *snapshotv1.Object) { x.Name = x.Name[:3] },
		func(x *snapshotv1.Object) { x.Namespace = "other" },
	}
	for i, edit := range edits {
		edit(o.Objects[i])
		snapshots.SealOutput(o)
		checkEncoder(t, fmt.Sprintf("edit %d", i), &enc, o)
	}
}

// A table describes its encoding as ScanOutput does: the same index,
// counts and deltas.
func TestScanOutputTableIsScanOutput(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for c := range 50 {
		var enc snapshots.OutputEncoder
		base := randomOutput(r, 1+r.IntN(40))
		if _, _, err := enc.Encode(base); err != nil {
			t.Fatal(err)
		}
		next := nextVersion(r, base, 1)
		data, table, err := enc.Encode(next)
		if err != nil {
			t.Fatal(err)
		}
		fromTable, err := snapshots.ScanOutputTable(data, table)
		if err != nil {
			t.Fatalf("case %d: %v", c, err)
		}
		full, err := snapshots.ScanOutput(data)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(fromTable.Index.Objects, full.Index.Objects) || !slices.Equal(fromTable.Index.Statuses, full.Index.Statuses) ||
			fromTable.Version != full.Version || fromTable.Objects != full.Objects || fromTable.Statuses != full.Statuses || fromTable.IssuedCertificates != full.IssuedCertificates {
			t.Fatalf("case %d: the table's scan is not ScanOutput's", c)
		}
		baseIdx := snapshots.IndexOutput(base)
		if !bytes.Equal(cutDelta(t, fromTable, base.GetVersion(), baseIdx), cutDelta(t, full, base.GetVersion(), baseIdx)) {
			t.Fatalf("case %d: the deltas differ", c)
		}
		d := &snapshotv1.OutputDelta{}
		if err := proto.Unmarshal(cutDelta(t, fromTable, base.GetVersion(), baseIdx), d); err != nil {
			t.Fatal(err)
		}
		if got, err := snapshots.ApplyDelta(base, d); err != nil || !proto.Equal(got, next) {
			t.Fatalf("case %d: the delta does not make the next version: %v", c, err)
		}
	}
}

// tableFor returns a two-version pair with the second's encoding and
// table: 100 objects, the 50th edited.
func tableFor(t *testing.T) (base, next *snapshotv1.OutputSnapshot, data, table []byte) {
	t.Helper()
	base = &snapshotv1.OutputSnapshot{Cluster: "east"}
	for i := range 100 {
		base.Objects = append(base.Objects, deltaObject("VirtualService", i, `{"v":1}`))
	}
	snapshots.SealOutput(base)
	next = &snapshotv1.OutputSnapshot{Cluster: "east", Objects: slices.Clone(base.Objects)}
	edited := proto.Clone(base.Objects[50]).(*snapshotv1.Object)
	edited.Spec = []byte(`{"v":2}`)
	next.Objects[50] = edited
	snapshots.SealOutput(next)
	var enc snapshots.OutputEncoder
	if _, _, err := enc.Encode(base); err != nil {
		t.Fatal(err)
	}
	data, table, err := enc.Encode(next)
	if err != nil {
		t.Fatal(err)
	}
	return base, next, data, table
}

// A table that is not that of the encoding is refused as a whole: another
// version's, another length's, one item more or less.
func TestScanOutputTableRefusesAnotherEncodingsTable(t *testing.T) {
	base, next, data, table := tableFor(t)
	var enc snapshots.OutputEncoder
	baseData, baseTable, _ := enc.Encode(base)
	other := proto.Clone(next).(*snapshotv1.OutputSnapshot)
	other.Objects = other.Objects[:99]
	snapshots.SealOutput(other)
	_, otherTable, _ := new(snapshots.OutputEncoder).Encode(other)
	for name, c := range map[string]struct{ data, table []byte }{
		"the last version's table":       {data, baseTable},
		"a table of one item less":       {data, otherTable},
		"no table":                       {data, nil},
		"a truncated table":              {data, table[:len(table)-1]},
		"the table of the data appended": {append(slices.Clone(baseData), 0x08, 0x01), baseTable},
		"a table that is something else": {data, []byte("mpt1garbage")},
	} {
		if _, err := snapshots.ScanOutputTable(c.data, c.table); !errors.Is(err, snapshots.ErrTableMismatch) && !errors.Is(err, snapshots.ErrMalformed) {
			t.Errorf("%s: ScanOutputTable = %v, want ErrTableMismatch", name, err)
		}
	}
}

// A table that lies about an item is caught: an item it sends is checked
// against it (ErrTableMismatch), and one it leaves out makes a delta the
// receiver finds wrong before it uses it (ErrDeltaMismatch).
func TestScanOutputTableLiesAreCaught(t *testing.T) {
	base, _, data, table := tableFor(t)
	baseIdx := snapshots.IndexOutput(base)
	// Item 50's content hash, found in the table by its value.
	full, err := snapshots.ScanOutput(data)
	if err != nil {
		t.Fatal(err)
	}
	key50 := snapshots.ObjectKeyHash(base.Objects[50])
	hashAt := bytes.Index(table, binaryLE(hashOf(full.Index.Objects, key50)))
	if hashAt < 0 || !bytes.Equal(table[hashAt-8:hashAt], binaryLE(key50)) {
		t.Fatal("item 50's record is not in the table")
	}
	at := func(int) int { return hashAt }
	sent := slices.Clone(table)
	sent[at(50)] ^= 1
	scan, err := snapshots.ScanOutputTable(data, sent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scan.AppendDelta(nil, base.GetVersion(), baseIdx); !errors.Is(err, snapshots.ErrTableMismatch) {
		t.Fatalf("a sent item with a wrong hash: AppendDelta = %v, want ErrTableMismatch", err)
	}
	// Item 50 given its old hash: left out of the delta.
	unsent := slices.Clone(table)
	copy(unsent[at(50):], binaryLE(hashOf(baseIdx.Objects, key50)))
	scan, err = snapshots.ScanOutputTable(data, unsent)
	if err != nil {
		t.Fatal(err)
	}
	d := &snapshotv1.OutputDelta{}
	if err := proto.Unmarshal(cutDelta(t, scan, base.GetVersion(), baseIdx), d); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshots.ApplyDelta(base, d); !errors.Is(err, snapshots.ErrDeltaMismatch) {
		t.Fatalf("a delta that leaves out a changed item: ApplyDelta = %v, want ErrDeltaMismatch", err)
	}
	// The whole snapshot is only sent as Verified returns it: scanned in full.
	verified, err := scan.Verified()
	if err != nil || verified == scan {
		t.Fatalf("Verified = %v, %v: want a full scan", verified, err)
	}
	if hashOf(verified.Index.Objects, key50) == hashOf(baseIdx.Objects, key50) {
		t.Fatal("the full scan kept the table's hash")
	}
}

func binaryLE(v uint64) []byte {
	b := make([]byte, 8)
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return b
}

// Bytes that frame as the table says but do not decode are never sent:
// not in a delta (ErrMalformed), not whole (Verified refuses them).
func TestScanOutputTableChecksWhatItSends(t *testing.T) {
	base, _, data, table := tableFor(t)
	bad := slices.Clone(data)
	i := bytes.Index(bad, []byte(base.Objects[50].GetName()))
	bad[i] = 0xff // the name is no longer UTF-8
	scan, err := snapshots.ScanOutputTable(bad, table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scan.AppendDelta(nil, base.GetVersion(), snapshots.IndexOutput(base)); !errors.Is(err, snapshots.ErrMalformed) {
		t.Fatalf("AppendDelta = %v, want ErrMalformed", err)
	}
	if _, err := scan.Verified(); !errors.Is(err, snapshots.ErrMalformed) {
		t.Fatalf("Verified = %v, want ErrMalformed", err)
	}
}

// FuzzScanOutputTable: any encoding and table are refused, or scan to
// something whose deltas are refused or decode, and which is sent whole
// only when it decodes.
func FuzzScanOutputTable(f *testing.F) {
	r := rand.New(rand.NewPCG(25, 26))
	base := randomOutput(r, 8)
	var enc snapshots.OutputEncoder
	enc.Encode(base)
	data, table, _ := enc.Encode(nextVersion(r, base, 1))
	f.Add(data, table)
	f.Add([]byte{}, []byte("mpt1\x00\x00\x00"))
	baseIdx := snapshots.IndexOutput(base)
	f.Fuzz(func(t *testing.T, data, table []byte) {
		scan, err := snapshots.ScanOutputTable(data, table)
		if err != nil {
			if !errors.Is(err, snapshots.ErrTableMismatch) && !errors.Is(err, snapshots.ErrMalformed) {
				t.Fatalf("ScanOutputTable: %v", err)
			}
			return
		}
		if b, err := scan.AppendDelta(nil, base.GetVersion(), baseIdx); err == nil {
			if err := proto.Unmarshal(b, &snapshotv1.OutputDelta{}); err != nil {
				t.Fatalf("a delta cut from a table's scan does not decode: %v", err)
			}
		}
		whole, err := scan.Verified()
		if uerr := proto.Unmarshal(data, &snapshotv1.OutputSnapshot{}); (err == nil) != (uerr == nil) {
			t.Fatalf("Verified: %v, proto.Unmarshal: %v", err, uerr)
		}
		_ = whole
	})
}

// BenchmarkOutputEncoder is translation's encoding of the reference-size
// output after one object of it changed (/reused), against encoding it
// from nothing (/fresh).
func BenchmarkOutputEncoder(b *testing.B) {
	base := referenceSizeOutput()
	next := &snapshotv1.OutputSnapshot{Cluster: base.GetCluster(), Objects: slices.Clone(base.GetObjects())}
	edited := proto.Clone(next.Objects[10500]).(*snapshotv1.Object)
	edited.Spec = []byte(`{"hosts":["edited"]}`)
	next.Objects[10500] = edited
	snapshots.SealOutput(next)
	b.Run("reused", func(b *testing.B) {
		// Each encoding is of a version one object away from the last.
		var enc snapshots.OutputEncoder
		versions := [2]*snapshotv1.OutputSnapshot{base, next}
		i := 0
		for b.Loop() {
			if _, _, err := enc.Encode(versions[i%2]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			if _, err := snapshots.EncodeOutput(next); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// hashOf is the content hash e holds for key, which it must hold.
func hashOf(e snapshots.IndexEntries, key uint64) uint64 {
	h, ok := e.Get(key)
	if !ok {
		panic(fmt.Sprintf("no entry for key %x", key))
	}
	return h
}
