package snapshots_test

import (
	"reflect"
	"testing"
	"unsafe"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

func TestLabelSetsShareEqualMaps(t *testing.T) {
	var s snapshots.LabelSets
	a := map[string]string{"x": "1", "y": "2"}
	b := map[string]string{"y": "2", "x": "1"}
	c := map[string]string{"x": "1", "y": "3"}
	if got := s.Share(a); !same(got, a) {
		t.Fatal("the first set is not kept as it is")
	}
	if got := s.Share(b); !same(got, a) {
		t.Error("an equal set does not share the first's map")
	}
	if got := s.Share(c); !same(got, c) {
		t.Error("a different set shares another's map")
	}
	if got := s.Share(map[string]string{"y": "2", "x": "1"}); !same(got, a) {
		t.Error("an equal set after another does not share the first's map")
	}
	// Lengths are part of the key: these concatenate alike.
	d := map[string]string{"ab": "", "c": ""}
	e := map[string]string{"a": "b", "c": ""}
	if got := s.Share(d); !same(got, d) {
		t.Error("d not kept")
	}
	if got := s.Share(e); !same(got, e) || !reflect.DeepEqual(got, map[string]string{"a": "b", "c": ""}) {
		t.Errorf("e shares another map: %v", got)
	}
	if s.Share(map[string]string{}) != nil || s.Share(nil) != nil {
		t.Error("an empty set is not nil")
	}
}

func TestLabelSetsBounded(t *testing.T) {
	var s snapshots.LabelSets
	for i := range 2000 {
		m := map[string]string{"i": string(rune('a' + i))}
		if got := s.Share(m); !reflect.DeepEqual(got, m) {
			t.Fatalf("set %d: got %v, want %v", i, got, m)
		}
	}
	// Sets beyond the bound are not kept: an equal one is its own map.
	m := map[string]string{"i": string(rune('a' + 1999))}
	if got := s.Share(m); !same(got, m) {
		t.Error("a set beyond the bound was kept")
	}
}

func TestLabelSetsShareObjects(t *testing.T) {
	var s snapshots.LabelSets
	objs := []*snapshotv1.Object{
		{Name: "a", Labels: map[string]string{"k": "v"}},
		{Name: "b", Labels: map[string]string{"k": "v"}},
		{Name: "c"},
		nil,
	}
	s.ShareObjects(objs)
	if !same(objs[0].Labels, objs[1].Labels) {
		t.Error("equal labels not shared")
	}
	if objs[2].Labels != nil {
		t.Error("an object without labels got some")
	}
}

func same(a, b map[string]string) bool {
	return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
}

func TestCanonicalValues(t *testing.T) {
	a := map[string]string{"p": string([]byte("parents")), "d": string([]byte("digest"))}
	b := map[string]string{"p": string([]byte("parents")), "d": string([]byte("digest"))}
	snapshots.CanonicalValues(a, "d")
	snapshots.CanonicalValues(b, "d")
	if unsafe.StringData(a["p"]) != unsafe.StringData(b["p"]) {
		t.Error("equal values do not share their bytes")
	}
	if unsafe.StringData(a["d"]) == unsafe.StringData(b["d"]) {
		t.Error("the excepted key's values were made canonical")
	}
	if a["p"] != "parents" || a["d"] != "digest" {
		t.Errorf("values changed: %v", a)
	}
}
