package domain_test

import (
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
)

var referenceOutput = flag.String("reference-output", "", "directory to write cluster-000's output of the reference estate at C=100 into (for the agent's BenchmarkApplyReference), with every cluster's input (for the e2e BenchmarkFanOutReference)")

// TestWriteReferenceOutput writes the real translator's output for one
// cluster (cluster-000) of the reference estate at C=100, S=1,000,
// P=10,000 with selective federation, before and after one TrafficPolicy
// edit (3 to 4 retries), as base.pb and edited.pb: the objects that the
// agent's BenchmarkApplyReference applies. It also writes the estate's
// inputs, for the e2e BenchmarkFanOutReference to push through the plane:
// every cluster's input snapshot (sealed, before the edit) as
// inputs/<cluster>.pb, the management cluster's ("meshplane", which holds
// the policies) included, and the clusters whose output the edit changes,
// one a line, as changed-clusters.txt:
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
	const cluster = referenceCluster
	inputs := federatedEstate(c, s, p, selectiveExport)
	writeInputs(t, filepath.Join(dir, "inputs"), inputs)
	base, after := translateReference(t, inputs)
	var changed []string
	for _, c := range slices.Sorted(maps.Keys(after)) {
		if base[c].GetVersion() != after[c].GetVersion() {
			changed = append(changed, c)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "changed-clusters.txt"), []byte(strings.Join(changed, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
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
	t.Logf("%s: %d objects, %d statuses; the edit changes the outputs of %d clusters", cluster, len(base[cluster].GetObjects()), len(base[cluster].GetStatuses()), len(changed))
}

// writeInputs writes each input as dir/<cluster>.pb and checks that it
// reads back as the sealed input written.
func writeInputs(t *testing.T, dir string, inputs map[string]*snapshotv1.InputSnapshot) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for c, in := range inputs {
		if in.GetVersion() == "" {
			t.Fatalf("the input of %s is not sealed", c)
		}
		b, err := proto.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, c+".pb")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		read, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		back := &snapshotv1.InputSnapshot{}
		if err := proto.Unmarshal(read, back); err != nil || !proto.Equal(back, in) {
			t.Fatalf("%s does not read back as the input written: %v", path, err)
		}
	}
}

// referenceCluster is the cluster whose output of the reference estate the
// writers write.
const referenceCluster = "cluster-000"

// translateReference translates the reference estate's inputs before and
// after one TrafficPolicy edit (3 to 4 retries), which must change
// referenceCluster's output. It leaves inputs as they were.
func translateReference(t *testing.T, inputs map[string]*snapshotv1.InputSnapshot) (base, after map[string]*snapshotv1.OutputSnapshot) {
	t.Helper()
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
	withEdit := maps.Clone(inputs)
	withEdit["meshplane"] = edited
	if after, err = domain.Translate(withEdit, domain.Options{}); err != nil {
		t.Fatal(err)
	}
	if base[referenceCluster].GetVersion() == after[referenceCluster].GetVersion() {
		t.Fatalf("the TrafficPolicy edit did not change %s's output", referenceCluster)
	}
	return base, after
}
