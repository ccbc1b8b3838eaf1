package app

import (
	"bytes"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A stamped policy's ID holds the time it was stamped with: the same
// encoding stamped with another time (or none) is another policy.
func TestStampIDsTellStampsApart(t *testing.T) {
	enc := []byte("the same encoding")
	stamped := func(ts *timestamppb.Timestamp) []byte {
		p := []*networkingv1.TrafficPolicy{{Metadata: &commonv1.ObjectMeta{Name: "p", FirstSeen: ts}}}
		return stampIDs(p, [][]byte{enc})[0]
	}
	stamps := map[string]*timestamppb.Timestamp{
		"none": nil, "zero": {}, "t": {Seconds: 1, Nanos: 2}, "t+1ns": {Seconds: 1, Nanos: 3}, "t+1s": {Seconds: 2, Nanos: 2},
	}
	ids := map[string][]byte{}
	for name, ts := range stamps {
		ids[name] = stamped(ts)
		if !bytes.Equal(ids[name], stamped(ts)) {
			t.Fatalf("%s: two IDs of the same stamped policy differ", name)
		}
		if !bytes.HasSuffix(ids[name], enc) {
			t.Fatalf("%s: ID %x does not end with the encoding", name, ids[name])
		}
	}
	for a := range ids {
		for b := range ids {
			if a != b && bytes.Equal(ids[a], ids[b]) {
				t.Fatalf("stamps %s and %s give the same ID %x", a, b, ids[a])
			}
		}
	}
	if got := stampIDs([]*networkingv1.TrafficPolicy{{}, {}}, [][]byte{enc}); got != nil {
		t.Fatalf("IDs for two policies from one encoding: %x", got)
	}
}
