package domain_test

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
)

var referenceOutput = flag.String("reference-output", "", "directory to write cluster-000's output of the reference estate at C=100 into (for the agent's BenchmarkApplyReference)")

// TestWriteReferenceOutput writes the real translator's output for one
// cluster (cluster-000) of the reference estate at C=100, S=1,000,
// P=10,000 with selective federation, before and after one TrafficPolicy
// edit (3 to 4 retries), as base.pb and edited.pb: the objects that the
// agent's BenchmarkApplyReference applies:
//
//	go test -run TestWriteReferenceOutput ./internal/domain -args -reference-output=DIR
//
// Without the flag it writes a small estate's (C=3, S=10, P=12) into a
// temporary directory and reads the files back, so the writer the
// benchmark depends on is tested on every run.
func TestWriteReferenceOutput(t *testing.T) {
	dir, c, s, p := *referenceOutput, 100, 1000, 10000
	if dir == "" {
		dir, c, s, p = t.TempDir(), 3, 10, 12
	}
	const cluster = "cluster-000"
	inputs := federatedEstate(c, s, p, selectiveExport)
	base, err := domain.Translate(inputs, domain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	edited := shallowInput(inputs["meshplane"])
	edited.TrafficPolicies = slices.Clone(edited.TrafficPolicies)
	tp := proto.CloneOf(edited.TrafficPolicies[0])
	tp.Metadata.Generation++
	tp.Spec.Policy.Retries.Attempts = 4
	edited.TrafficPolicies[0] = tp
	snapshots.SealInput(edited)
	inputs["meshplane"] = edited
	after, err := domain.Translate(inputs, domain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if base[cluster].GetVersion() == after[cluster].GetVersion() {
		t.Fatalf("the TrafficPolicy edit did not change %s's output", cluster)
	}
	for name, out := range map[string]any{"base.pb": base[cluster], "edited.pb": after[cluster]} {
		b, err := proto.Marshal(out.(proto.Message))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		read, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		back := &snapshotv1.OutputSnapshot{}
		if err := proto.Unmarshal(read, back); err != nil || !proto.Equal(back, out.(proto.Message)) || len(back.GetObjects()) == 0 {
			t.Fatalf("%s does not read back as the output written (%d objects): %v", name, len(back.GetObjects()), err)
		}
	}
	t.Logf("%s: %d objects, %d statuses", cluster, len(base[cluster].GetObjects()), len(base[cluster].GetStatuses()))
}
