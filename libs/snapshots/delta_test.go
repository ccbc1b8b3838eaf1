package snapshots_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/proto"
)

func deltaObject(kind string, i int, spec string) *snapshotv1.Object {
	return &snapshotv1.Object{
		ApiVersion: "networking.istio.io/v1", Kind: kind, Namespace: "bookinfo", Name: fmt.Sprintf("o-%d", i),
		Labels:      map[string]string{snapshots.LabelManagedBy: "meshplane", "app": "reviews", "version": "v1"},
		Annotations: map[string]string{"meshplane.dev/policies": "p", "meshplane.dev/digest": "d", "z": "1"},
		Spec:        []byte(spec),
	}
}

// diff is snapshots.Diff, failing the test on an error.
func diff(t testing.TB, base *snapshotv1.OutputSnapshot, next *snapshotv1.OutputSnapshot) (*snapshotv1.OutputDelta, snapshots.OutputIndex) {
	t.Helper()
	d, idx, err := snapshots.Diff(base.GetVersion(), snapshots.IndexOutput(base), next)
	if err != nil {
		t.Fatal(err)
	}
	return d, idx
}

func deltaStatus(i int, state string) *snapshotv1.ResourceStatus {
	return &snapshotv1.ResourceStatus{ApiVersion: "networking.meshplane.dev/v1", Kind: "TrafficPolicy", Namespace: "bookinfo", Name: fmt.Sprintf("p-%d", i), ObservedGeneration: 1, Status: []byte(state)}
}

// randomOutput is a sealed output of up to n objects and statuses.
func randomOutput(r *rand.Rand, n int) *snapshotv1.OutputSnapshot {
	o := &snapshotv1.OutputSnapshot{Cluster: "east"}
	for i := range n {
		if r.IntN(4) > 0 {
			o.Objects = append(o.Objects, deltaObject([]string{"VirtualService", "DestinationRule"}[r.IntN(2)], i, fmt.Sprintf(`{"v":%d}`, r.IntN(3))))
		}
		if r.IntN(3) == 0 {
			o.Statuses = append(o.Statuses, deltaStatus(i, fmt.Sprintf(`{"state":%d}`, r.IntN(2))))
		}
	}
	if r.IntN(2) == 0 {
		o.MissingClusters = []string{"west"}
	}
	// Without drawing from r, which would change every case after.
	if len(o.Objects)%2 == 0 {
		o.GatewayDetector = &settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector{
			EastWestGatewayLabels: map[string]string{"gateway": fmt.Sprint("corp-", len(o.Statuses)%2)}, EastWestGatewayTlsPortName: "mtls",
		}
	}
	snapshots.SealOutput(o)
	return o
}

// A delta from any version to any other makes exactly the other version:
// same content hash, same objects and statuses.
func TestDeltaMakesTheNextVersion(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		base, next := randomOutput(r, 1+r.IntN(40)), randomOutput(r, 1+r.IntN(40))
		idx := snapshots.IndexOutput(base)
		decoded, err := snapshots.DecodeIndex(idx.Encode())
		if err != nil {
			t.Fatal(err)
		}
		d, nextIdx, err := snapshots.Diff(base.GetVersion(), decoded, next)
		if err != nil {
			t.Fatal(err)
		}
		got, err := snapshots.ApplyDelta(base, d)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got.GetVersion() != next.GetVersion() || !proto.Equal(got, next) {
			t.Fatalf("case %d: delta made %s, want %s", i, got.GetVersion(), next.GetVersion())
		}
		if len(nextIdx.Objects) != len(next.GetObjects()) {
			t.Fatalf("case %d: index of %d objects for %d", i, len(nextIdx.Objects), len(next.GetObjects()))
		}
		if base.GetVersion() == next.GetVersion() && (len(d.GetObjects())+len(d.GetRemovedObjects())+len(d.GetStatuses())+len(d.GetRemovedStatuses()) != 0) {
			t.Fatalf("case %d: a delta between equal versions carries changes", i)
		}
	}
}

// One changed object: the delta carries that object only.
func TestDeltaOfOneEdit(t *testing.T) {
	base := &snapshotv1.OutputSnapshot{Cluster: "east"}
	for i := range 1000 {
		base.Objects = append(base.Objects, deltaObject("VirtualService", i, `{"hosts":["h"]}`))
	}
	snapshots.SealOutput(base)
	next := proto.Clone(base).(*snapshotv1.OutputSnapshot)
	for _, o := range next.Objects {
		if o.Name == "o-500" {
			o.Spec = []byte(`{"hosts":["h"],"http":[{"retries":{"attempts":3}}]}`)
		}
	}
	next.Objects = slices.DeleteFunc(next.Objects, func(o *snapshotv1.Object) bool { return o.Name == "o-7" })
	snapshots.SealOutput(next)
	d, _ := diff(t, base, next)
	if len(d.GetObjects()) != 1 || d.GetObjects()[0].GetName() != "o-500" || len(d.GetRemovedObjects()) != 1 {
		t.Fatalf("delta carries %d objects and %d removals, want o-500 and one removal", len(d.GetObjects()), len(d.GetRemovedObjects()))
	}
	if full, delta := proto.Size(next), proto.Size(d); delta*100 > full {
		t.Fatalf("delta is %d bytes, the whole snapshot %d: want at least 100 times smaller", delta, full)
	}
}

// A delta that does not make the version it names is refused, whatever
// was changed in it: the agent never uses a wrong state.
func TestDeltaThatDoesNotCheckOut(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	base, next := randomOutput(r, 30), randomOutput(r, 30)
	for base.GetVersion() == next.GetVersion() {
		next = randomOutput(r, 30)
	}
	fresh := func() *snapshotv1.OutputDelta {
		d, _ := diff(t, base, next)
		return d
	}
	for name, tamper := range map[string]func(d *snapshotv1.OutputDelta){
		"another base": func(d *snapshotv1.OutputDelta) { d.BaseVersion = next.GetVersion() },
		"a change left out": func(d *snapshotv1.OutputDelta) {
			d.Objects, d.RemovedObjects, d.Statuses, d.RemovedStatuses = nil, nil, nil, nil
		},
		"a changed spec": func(d *snapshotv1.OutputDelta) {
			d.Objects = append(d.Objects, deltaObject("VirtualService", 999, `{"evil":true}`))
		},
		"an extra removal": func(d *snapshotv1.OutputDelta) {
			// An object the delta does not carry: one next holds unchanged.
			for _, o := range next.GetObjects() {
				if !slices.ContainsFunc(d.Objects, func(c *snapshotv1.Object) bool { return c.GetName() == o.GetName() && c.GetKind() == o.GetKind() }) {
					d.RemovedObjects = append(d.RemovedObjects, snapshots.ObjectKeyHash(o))
					return
				}
			}
			t.Fatal("every object of next changed: pick another seed")
		},
		"another rest":    func(d *snapshotv1.OutputDelta) { d.Rest.MissingClusters = append(d.Rest.MissingClusters, "zz") },
		"another cluster": func(d *snapshotv1.OutputDelta) { d.Rest.Cluster = "west" },
		"no rest":         func(d *snapshotv1.OutputDelta) { d.Rest = nil },
	} {
		d := fresh()
		tamper(d)
		if _, err := snapshots.ApplyDelta(base, d); !errors.Is(err, snapshots.ErrDeltaMismatch) {
			t.Errorf("%s: ApplyDelta = %v, want ErrDeltaMismatch", name, err)
		}
	}
	if _, err := snapshots.ApplyDelta(base, fresh()); err != nil {
		t.Fatalf("the untampered delta: %v", err)
	}
}

func TestDecodeIndexRefusesBadInput(t *testing.T) {
	good := snapshots.IndexOutput(randomOutput(rand.New(rand.NewPCG(5, 6)), 10)).Encode()
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": good[:len(good)-3],
		"huge count": append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0},
			good[16:]...),
	} {
		if _, err := snapshots.DecodeIndex(b); err == nil {
			t.Errorf("%s: DecodeIndex succeeded", name)
		}
	}
}

// FuzzApplyDelta: any delta, however made, is either refused or makes the
// version it names; it never panics.
func FuzzApplyDelta(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	base, next := randomOutput(r, 8), randomOutput(r, 8)
	d, _ := diff(f, base, next)
	seed, _ := proto.Marshal(d)
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := &snapshotv1.OutputDelta{}
		if proto.Unmarshal(b, d) != nil {
			return
		}
		out, err := snapshots.ApplyDelta(base, d)
		if err != nil {
			if !errors.Is(err, snapshots.ErrDeltaMismatch) {
				t.Fatalf("ApplyDelta error %v is not ErrDeltaMismatch", err)
			}
			return
		}
		if snapshots.OutputVersion(out) != d.GetVersion() {
			t.Fatalf("ApplyDelta returned a state of another version")
		}
	})
}

func FuzzDecodeIndex(f *testing.F) {
	f.Add(snapshots.IndexOutput(randomOutput(rand.New(rand.NewPCG(9, 10)), 5)).Encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := snapshots.DecodeIndex(b)
		if err != nil {
			return
		}
		if y, err := snapshots.DecodeIndex(x.Encode()); err != nil || len(y.Objects) != len(x.Objects) || len(y.Statuses) != len(x.Statuses) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// The index's content hash of an object changes with every field of it.
func TestObjectHashCovers(t *testing.T) {
	base := deltaObject("VirtualService", 1, `{"a":1}`)
	seen := map[uint64]string{}
	for name, change := range map[string]func(o *snapshotv1.Object){
		"none":        func(*snapshotv1.Object) {},
		"api_version": func(o *snapshotv1.Object) { o.ApiVersion = "v2" },
		"kind":        func(o *snapshotv1.Object) { o.Kind = "DestinationRule" },
		"namespace":   func(o *snapshotv1.Object) { o.Namespace = "x" },
		"name":        func(o *snapshotv1.Object) { o.Name = "x" },
		"labels":      func(o *snapshotv1.Object) { o.Labels["a"] = "b" },
		"annotations": func(o *snapshotv1.Object) { o.Annotations = map[string]string{"a": "b"} },
		"spec":        func(o *snapshotv1.Object) { o.Spec = []byte(`{"a":2}`) },
		"label moved": func(o *snapshotv1.Object) {
			o.Labels = map[string]string{"a": "b"}
			o.Annotations = map[string]string{snapshots.LabelManagedBy: "meshplane"}
		},
	} {
		o := proto.Clone(base).(*snapshotv1.Object)
		change(o)
		out := &snapshotv1.OutputSnapshot{Cluster: "east", Objects: []*snapshotv1.Object{o}}
		for _, e := range snapshots.IndexOutput(out).Objects {
			h := e.Hash
			if other, dup := seen[h]; dup {
				t.Errorf("changing %s hashes as changing %s", name, other)
			}
			seen[h] = name
		}
	}
}

// A receiver kept across versions, reusing what it computed for the
// version it holds, makes each next version exactly, as ApplyDelta does;
// after a delta that does not check out it holds nothing and refuses the
// next delta until it holds a whole snapshot again.
func TestDeltaReceiverAcrossVersions(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var recv snapshots.DeltaReceiver
	held := randomOutput(r, 40)
	recv.Hold(held)
	for i := range 200 {
		next := randomOutput(r, 1+r.IntN(40))
		if i%3 == 0 {
			// A small edit of what is held, as most versions are.
			next = proto.Clone(held).(*snapshotv1.OutputSnapshot)
			if len(next.Objects) > 0 {
				next.Objects[r.IntN(len(next.Objects))].Spec = fmt.Appendf(nil, `{"edit":%d}`, i)
			}
			snapshots.SealOutput(next)
		}
		d, _ := diff(t, held, next)
		if i%10 == 9 {
			d.Rest.MissingClusters = append(d.Rest.MissingClusters, "tampered")
			if _, err := recv.Apply(d); !errors.Is(err, snapshots.ErrDeltaMismatch) {
				t.Fatalf("case %d: a tampered delta: %v, want ErrDeltaMismatch", i, err)
			}
			if recv.Version() != "" {
				t.Fatalf("case %d: the receiver still holds %s after a refused delta", i, recv.Version())
			}
			d.Rest.MissingClusters = d.Rest.MissingClusters[:len(d.Rest.MissingClusters)-1]
			if _, err := recv.Apply(d); !errors.Is(err, snapshots.ErrDeltaMismatch) {
				t.Fatalf("case %d: a delta with nothing held: %v, want ErrDeltaMismatch", i, err)
			}
			recv.Hold(next)
			held = next
			continue
		}
		got, err := recv.Apply(d)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got.GetVersion() != next.GetVersion() || !proto.Equal(got, next) || recv.Version() != next.GetVersion() {
			t.Fatalf("case %d: the receiver made %s, want %s", i, got.GetVersion(), next.GetVersion())
		}
		held = got
	}
}

// A receiver that knows its held snapshot to be in order checks only the
// changed objects' neighbours (mergedStrictlySorted): a delta that holds
// two objects of one key still takes the sorting path, and the receiver
// makes what ApplyDelta makes.
func TestDeltaReceiverDuplicateKeyAfterDeltas(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var recv snapshots.DeltaReceiver
	held := randomOutput(r, 30)
	recv.Hold(held)
	for i := range 3 {
		next := proto.Clone(held).(*snapshotv1.OutputSnapshot)
		next.Objects[i].Spec = fmt.Appendf(nil, `{"edit":%d}`, i)
		snapshots.SealOutput(next)
		d, _ := diff(t, held, next)
		got, err := recv.Apply(d)
		if err != nil {
			t.Fatalf("edit %d: %v", i, err)
		}
		held = got
	}
	next := proto.Clone(held).(*snapshotv1.OutputSnapshot)
	next.Objects[5].Spec = []byte(`{"edit":"dup"}`)
	snapshots.SealOutput(next)
	d, _ := diff(t, held, next)
	dup := proto.Clone(d.Objects[0]).(*snapshotv1.Object)
	dup.Spec = []byte(`{"edit":"dup2"}`)
	d.Objects = append(d.Objects, dup)
	// The delta names the version without the duplicate: both refuse it,
	// having computed the same version for the state it makes.
	_, wantErr := snapshots.ApplyDelta(held, d)
	_, err := recv.Apply(d)
	if !errors.Is(err, snapshots.ErrDeltaMismatch) || !errors.Is(wantErr, snapshots.ErrDeltaMismatch) {
		t.Fatalf("receiver: %v, ApplyDelta: %v; want both ErrDeltaMismatch", err, wantErr)
	}
	if err.Error() != wantErr.Error() {
		t.Fatalf("the receiver computed another version than ApplyDelta:\n%v\n%v", err, wantErr)
	}
}

// An index is its output's key and content hashes, sorted by key, each key
// once, the last in the output's order: what a map filled in that order
// holds. Outputs of 1 to 300 objects, some keys twice, cover both sorts.
func TestIndexIsSortedLastOfEachKey(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for c := range 200 {
		o := &snapshotv1.OutputSnapshot{Cluster: "east"}
		for i := range 1 + r.IntN(300) {
			name := i
			if r.IntN(10) == 0 {
				name = r.IntN(i + 1) // a key seen before
			}
			o.Objects = append(o.Objects, deltaObject("VirtualService", name, fmt.Sprintf(`{"i":%d}`, i)))
		}
		want := map[uint64]uint64{}
		for _, obj := range o.Objects {
			want[snapshots.ObjectKeyHash(obj)] = snapshots.IndexOutput(&snapshotv1.OutputSnapshot{Objects: []*snapshotv1.Object{obj}}).Objects[0].Hash
		}
		got := snapshots.IndexOutput(o).Objects
		if len(got) != len(want) {
			t.Fatalf("case %d: %d entries for %d keys", c, len(got), len(want))
		}
		for i, e := range got {
			if i > 0 && got[i-1].Key >= e.Key {
				t.Fatalf("case %d: entries out of order at %d", c, i)
			}
			if want[e.Key] != e.Hash {
				t.Fatalf("case %d: key %x has hash %x, want the last one's, %x", c, e.Key, e.Hash, want[e.Key])
			}
			if h, ok := got.Get(e.Key); !ok || h != e.Hash {
				t.Fatalf("case %d: Get(%x) = %x, %v", c, e.Key, h, ok)
			}
		}
		if _, ok := got.Get(12345); ok {
			t.Fatalf("case %d: Get of a key no entry has succeeded", c)
		}
	}
}
