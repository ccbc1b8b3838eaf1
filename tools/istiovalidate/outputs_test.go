package istiovalidate_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/meshplane/meshplane/tools/istiovalidate"
)

// repoRoot is the repository's root, from this module's directory.
const repoRoot = "../.."

// goldenDir holds translation's golden cases.
var goldenDir = filepath.Join(repoRoot, "services/translation/testdata/golden")

// goldenObject is one object of a golden output.yaml (see
// services/translation/testdata/golden/README.md): the output object with
// its spec decoded.
type goldenObject struct {
	APIVersion  string            `json:"apiVersion"`
	Kind        string            `json:"kind"`
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Spec        json.RawMessage   `json:"spec"`
}

// readOutputs reads a file in the shape of a golden output.yaml (YAML, or
// JSON when it ends in .json) and returns each cluster's objects as
// manifests.
func readOutputs(t *testing.T, path string) map[string][]istiovalidate.Object {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]struct {
		Objects []goldenObject `json:"objects"`
	}
	if strings.HasSuffix(path, ".json") {
		err = json.Unmarshal(raw, &doc)
	} else {
		err = yaml.Unmarshal(raw, &doc)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string][]istiovalidate.Object{}
	for cluster, c := range doc {
		for i, g := range c.Objects {
			o, err := istiovalidate.NewObject(g.APIVersion, g.Kind, g.Namespace, g.Name, g.Labels, g.Annotations, g.Spec)
			if err != nil {
				t.Fatal(err)
			}
			o.Cluster = cluster
			o.Source = path + ": " + cluster + " object " + itoa(i+1)
			out[cluster] = append(out[cluster], o)
		}
	}
	return out
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// goldenCases lists the golden case directories.
func goldenCases(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatalf("no golden cases in %s", goldenDir)
	}
	return names
}

func newValidator(t testing.TB) *istiovalidate.Validator {
	t.Helper()
	v, err := istiovalidate.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// validateOutputs validates every object of outputs, reports each finding
// as a test error (the first ones with the object), and counts the objects
// of each kind it validated into kinds.
func validateOutputs(t *testing.T, v *istiovalidate.Validator, outputs map[string][]istiovalidate.Object, kinds map[string]int) {
	t.Helper()
	const detailed = 10
	found := 0
	for _, cluster := range sortedKeys(outputs) {
		for _, o := range outputs[cluster] {
			kinds[o.Kind]++
			if _, ok := v.Schema(o.Ref); !ok {
				t.Errorf("%s (%s): istiod's webhook has no schema for this kind", o.Ref, o.Source)
				continue
			}
			fs, err := v.Validate(o)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				if found++; found <= detailed {
					t.Errorf("%s (%s)\n  object: %s", f, o.Source, o.JSON)
				} else {
					t.Errorf("%s", f)
				}
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// emittedKinds are the Istio kinds translation writes.
var emittedKinds = []string{"AuthorizationPolicy", "DestinationRule", "Gateway", "PeerAuthentication", "ServiceEntry", "VirtualService", "WasmPlugin"}

// checkKinds fails unless every kind translation writes was validated.
func checkKinds(t *testing.T, kinds map[string]int, want []string) {
	t.Helper()
	for _, k := range want {
		if kinds[k] == 0 {
			t.Errorf("no %s was validated (validated %v)", k, kinds)
		}
	}
}

// TestGoldenOutputs runs istiod's validation on every object of every
// translation golden case.
func TestGoldenOutputs(t *testing.T) {
	v := newValidator(t)
	kinds := map[string]int{}
	for _, name := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			validateOutputs(t, v, readOutputs(t, filepath.Join(goldenDir, name, "output.yaml")), kinds)
		})
	}
	checkKinds(t, kinds, emittedKinds)
	t.Logf("validated %v", kinds)
}
