package snapshots_test

import (
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/proto"
)

func TestEncodeInputMatchesInputVersionAndDecodes(t *testing.T) {
	for name, s := range map[string]*snapshotv1.InputSnapshot{
		"with agent":    input("pod-1", "b", "a", "c"),
		"without agent": {Cluster: "east"},
		"empty":         {},
	} {
		t.Run(name, func(t *testing.T) {
			snapshots.SealInput(s)
			e, err := snapshots.EncodeInput(s)
			if err != nil {
				t.Fatal(err)
			}
			if e.Version != snapshots.InputVersion(s) || e.Version != s.GetVersion() {
				t.Fatalf("EncodeInput version %s, InputVersion %s", e.Version, snapshots.InputVersion(s))
			}
			got := &snapshotv1.InputSnapshot{}
			if err := proto.Unmarshal(e.Data, got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(s, got) {
				t.Fatalf("the encoding does not decode to the snapshot:\nwant %v\ngot  %v", s, got)
			}
		})
	}
}

func TestEncodeInputRefusesInvalidUTF8(t *testing.T) {
	s := input("pod-1", "a")
	s.Destinations[0].Metadata.Name = "\xff"
	if _, err := snapshots.EncodeInput(s); err == nil {
		t.Fatal("a snapshot with an invalid string was encoded")
	}
}
