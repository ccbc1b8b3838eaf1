package snapshots

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

// TestObjectDigest checks the hand encoding against protobuf's over random
// objects, one digester reused for all of them as the agent does.
func TestObjectDigest(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	str := func() string {
		switch r.IntN(6) {
		case 0:
			return ""
		case 1:
			return "é✓" + strings.Repeat("x", r.IntN(300))
		case 2:
			return "\xff" // not UTF-8: the reflective way
		default:
			return fmt.Sprintf("s%d", r.IntN(1000))
		}
	}
	strMap := func() map[string]string {
		if r.IntN(4) == 0 {
			return nil
		}
		m := map[string]string{}
		for range r.IntN(6) {
			m[str()] = str()
		}
		return m
	}
	var d ObjectDigester
	for i := range 2000 {
		o := &snapshotv1.Object{ApiVersion: str(), Kind: str(), Namespace: str(), Name: str(), Labels: strMap(), Annotations: strMap()}
		if r.IntN(4) > 0 {
			o.Spec = []byte(strings.Repeat(`{"a":1}`, r.IntN(200)))
		}
		if got, want := d.Digest(o), ReflectObjectDigest(o); got != want {
			t.Fatalf("object %d (%v): digest %s, reflective %s", i, o, got, want)
		}
	}
}

// TestObjectDigestCoversWhatIsApplied checks that a change to any part of
// an object that the agent applies changes its digest.
func TestObjectDigestCoversWhatIsApplied(t *testing.T) {
	base := func() *snapshotv1.Object {
		return &snapshotv1.Object{
			ApiVersion: "networking.istio.io/v1", Kind: "DestinationRule", Namespace: "ns", Name: "reviews",
			Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"b": "2"}, Spec: []byte(`{"host":"reviews"}`),
		}
	}
	edits := map[string]func(o *snapshotv1.Object){
		"api version":   func(o *snapshotv1.Object) { o.ApiVersion = "networking.istio.io/v1beta1" },
		"kind":          func(o *snapshotv1.Object) { o.Kind = "VirtualService" },
		"namespace":     func(o *snapshotv1.Object) { o.Namespace = "other" },
		"name":          func(o *snapshotv1.Object) { o.Name = "ratings" },
		"label value":   func(o *snapshotv1.Object) { o.Labels["a"] = "2" },
		"label added":   func(o *snapshotv1.Object) { o.Labels["c"] = "" },
		"annotation":    func(o *snapshotv1.Object) { o.Annotations["b"] = "3" },
		"no annotation": func(o *snapshotv1.Object) { o.Annotations = nil },
		"spec":          func(o *snapshotv1.Object) { o.Spec = []byte(`{"host":"ratings"}`) },
		"label as annotation": func(o *snapshotv1.Object) {
			o.Labels, o.Annotations = o.Annotations, o.Labels
		},
	}
	want := ObjectDigest(base())
	if ObjectDigest(base()) != want {
		t.Fatal("the digest of the same object differs")
	}
	for name, edit := range edits {
		o := base()
		edit(o)
		if ObjectDigest(o) == want {
			t.Errorf("%s: the digest did not change", name)
		}
	}
}
