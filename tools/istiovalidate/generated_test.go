package istiovalidate_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// EnvTranslationOutputs names a directory that services/translation's
// TestWriteOutputs wrote with -write-outputs; the tests then read it
// instead of writing one.
const EnvTranslationOutputs = "MESHPLANE_TRANSLATION_OUTPUTS"

var (
	outputsOnce sync.Once
	outputsDir  string
	outputsErr  error
	outputsTemp string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if outputsTemp != "" {
		os.RemoveAll(outputsTemp)
	}
	os.Exit(code)
}

// translationOutputs returns the directory of the outputs of the fuzz
// seeds and the reference estate: $MESHPLANE_TRANSLATION_OUTPUTS, or one
// that services/translation's TestWriteOutputs writes, once per test
// binary. That test runs in the workspace (go.work), where translation
// builds: this module is outside it.
func translationOutputs(t *testing.T) string {
	t.Helper()
	if d := os.Getenv(EnvTranslationOutputs); d != "" {
		return d
	}
	outputsOnce.Do(func() {
		outputsTemp, outputsErr = os.MkdirTemp("", "istiovalidate-outputs-")
		if outputsErr != nil {
			return
		}
		outputsDir, outputsErr = writeTranslationOutputs(outputsTemp)
	})
	if outputsErr != nil {
		t.Fatal(outputsErr)
	}
	return outputsDir
}

func writeTranslationOutputs(dir string) (string, error) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "test", "-run", "^TestWriteOutputs$", "-count=1", "./internal/domain", "-args", "-write-outputs="+dir)
	cmd.Dir = filepath.Join(root, "services/translation")
	// This module's tests run with GOWORK=off, and CGO_ENABLED=0 to share
	// istiod's build cache; translation's test builds in the workspace,
	// as make test builds it.
	cmd.Env = append(withoutEnv(os.Environ(), "GOWORK", "CGO_ENABLED"), "GOWORK="+filepath.Join(root, "go.work"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("writing translation's outputs (services/translation TestWriteOutputs): %v\n%s", err, out)
	}
	return dir, nil
}

func withoutEnv(env []string, names ...string) []string {
	var out []string
next:
	for _, kv := range env {
		for _, n := range names {
			if len(kv) > len(n) && kv[:len(n)+1] == n+"=" {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// TestFuzzOutputs runs istiod's validation on every object translation
// makes from the seeds of its fuzz target, FuzzTranslate.
func TestFuzzOutputs(t *testing.T) {
	dir := filepath.Join(translationOutputs(t), "fuzz")
	seeds, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(seeds) < 10 {
		t.Fatalf("%s holds the outputs of %d fuzz seeds; FuzzTranslate has more", dir, len(seeds))
	}
	v := newValidator(t)
	kinds := map[string]int{}
	for _, s := range seeds {
		t.Run(s.Name(), func(t *testing.T) {
			validateOutputs(t, v, readOutputs(t, filepath.Join(dir, s.Name(), "output.json")), kinds)
		})
	}
	// The seeds reach every kind but Gateway (the fuzz estate's meshes
	// federate only through VirtualMeshes it may leave out).
	checkKinds(t, kinds, []string{"AuthorizationPolicy", "DestinationRule", "PeerAuthentication", "ServiceEntry", "VirtualService", "WasmPlugin"})
	t.Logf("validated %v", kinds)
}

// TestReferenceOutputs runs istiod's validation on every object of
// cluster-000's output of the reference estate (C=100, S=1,000,
// P=10,000), before and after one policy edit.
func TestReferenceOutputs(t *testing.T) {
	dir := filepath.Join(translationOutputs(t), "reference")
	v := newValidator(t)
	for _, name := range []string{"base", "edited"} {
		t.Run(name, func(t *testing.T) {
			kinds := map[string]int{}
			outputs := readOutputs(t, filepath.Join(dir, name, "output.json"))
			validateOutputs(t, v, outputs, kinds)
			n := 0
			for _, objs := range outputs {
				n += len(objs)
			}
			if n < 20000 {
				t.Errorf("validated %d objects; cluster-000's output of the reference estate has about 21,000", n)
			}
			checkKinds(t, kinds, []string{"AuthorizationPolicy", "DestinationRule", "Gateway", "PeerAuthentication", "ServiceEntry", "VirtualService"})
			t.Logf("validated %d objects: %v", n, kinds)
		})
	}
}
