package domain_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
)

var writeOutputs = flag.String("write-outputs", "", "directory to write translation's outputs into, for Istio's validation in tools/istiovalidate: every fuzz seed's and cluster-000's of the reference estate at C=100, before and after one edit")

// TestWriteOutputs writes the outputs that the golden cases do not hold,
// for tools/istiovalidate to run Istio's validation on (that module is
// outside go.work, so it cannot translate itself):
//
//	go test -run '^TestWriteOutputs$' ./internal/domain -args -write-outputs=DIR
//
// Each is in the shape of a golden output.yaml, as JSON:
//
//   - DIR/fuzz/<n>/output.json: every cluster's output of each seed of
//     FuzzTranslate (fuzzSeeds, then any testdata/fuzz/FuzzTranslate
//     corpus file), then of fuzzRandomInputs, which reach further than
//     the seeds do;
//   - DIR/reference/base/output.json and DIR/reference/edited/output.json:
//     cluster-000's output of the reference estate at C=100, S=1,000,
//     P=10,000 with selective federation, before and after one
//     TrafficPolicy edit (as TestWriteReferenceOutput).
//
// Without the flag it writes them, with a small reference estate (C=3,
// S=10, P=12), into a temporary directory and reads them back, so the
// writer is tested on every run.
func TestWriteOutputs(t *testing.T) {
	dir, c, s, p := *writeOutputs, 100, 1000, 10000
	if dir == "" {
		dir, c, s, p = t.TempDir(), 3, 10, 12
	}
	seeds := append(fuzzSeeds(), fuzzCorpus(t, "testdata/fuzz/FuzzTranslate")...)
	seeds = append(seeds, fuzzRandomInputs()...)
	for i, seed := range seeds {
		out, err := domain.Translate(fuzzEstate(seed), domain.Options{})
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		writeOutput(t, filepath.Join(dir, "fuzz", fmt.Sprintf("%03d", i)), out)
	}
	base, after := translateReference(t, federatedEstate(c, s, p, selectiveExport))
	for name, out := range map[string]*snapshotv1.OutputSnapshot{"base": base[referenceCluster], "edited": after[referenceCluster]} {
		writeOutput(t, filepath.Join(dir, "reference", name), map[string]*snapshotv1.OutputSnapshot{referenceCluster: out})
	}
	t.Logf("wrote the outputs of %d fuzz seeds and of %s in the reference estate (%d objects) into %s", len(seeds), referenceCluster, len(base[referenceCluster].GetObjects()), dir)
}

// writeOutput writes outputs as dir/output.json, in the shape of a golden
// output.yaml, and checks that it reads back with every object.
func writeOutput(t *testing.T, dir string, outputs map[string]*snapshotv1.OutputSnapshot) {
	t.Helper()
	b, err := json.Marshal(render(t, outputs))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "output.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	read, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]struct {
		Objects []struct {
			Kind string          `json:"kind"`
			Spec json.RawMessage `json:"spec"`
		} `json:"objects"`
	}
	if err := json.Unmarshal(read, &back); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for c, o := range outputs {
		if got, want := len(back[c].Objects), len(o.GetObjects()); got != want {
			t.Fatalf("%s: %d objects of %s read back, %d written", path, got, c, want)
		}
	}
}

// fuzzCorpus reads the inputs of a fuzz target's corpus directory (the
// files `go test -fuzz` writes, each one []byte value); none when the
// directory does not exist.
func fuzzCorpus(t *testing.T, dir string) [][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
			t.Fatalf("%s: not a go test fuzz v1 file of one []byte", e.Name())
		}
		v, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out = append(out, []byte(v))
	}
	return out
}

func TestFuzzCorpus(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("go test fuzz v1\n[]byte(\"\\x01\\x02a\")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := fuzzCorpus(t, dir); len(got) != 1 || string(got[0]) != "\x01\x02a" {
		t.Fatalf("read %q", got)
	}
	if got := fuzzCorpus(t, filepath.Join(dir, "none")); got != nil {
		t.Fatalf("read %q from no directory", got)
	}
}

// fuzzRandomInputs are fixed pseudo-random inputs for fuzzEstate, of 16 to
// 255 bytes: the same on every run.
func fuzzRandomInputs() [][]byte {
	r := rand.New(rand.NewPCG(17, 2026))
	out := make([][]byte, 400)
	for i := range out {
		out[i] = make([]byte, 16+r.IntN(240))
		for j := range out[i] {
			out[i][j] = byte(r.UintN(256))
		}
	}
	return out
}
