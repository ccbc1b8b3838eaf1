package charts

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/test/e2e/harness"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// binaries maps a chart's container name to the command it runs.
var binaries = map[string]string{
	"registration": harness.CmdRegistration,
	"ingest":       harness.CmdIngest,
	"translation":  harness.CmdTranslation,
	"distribution": harness.CmdDistribution,
	"agent":        harness.CmdAgent,
	"console":      harness.CmdConsole,
}

var flagLine = regexp.MustCompile(`(?m)^\s+-([a-z0-9][a-z0-9-]*)`)

// TestArgsAreRealFlags builds the binaries and checks that every argument
// each chart passes, in every value set of the matrix, is a flag that the
// binary lists in -h.
func TestArgsAreRealFlags(t *testing.T) {
	harness.RequireE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	pkgs := make([]string, 0, len(binaries))
	for _, p := range binaries {
		pkgs = append(pkgs, p)
	}
	if err := harness.Build(ctx, dir, pkgs...); err != nil {
		t.Fatalf("build the binaries: %v", err)
	}
	flags := map[string]map[string]bool{}
	for container, pkg := range binaries {
		out, _ := exec.CommandContext(ctx, filepath.Join(dir, filepath.Base(pkg)), "-h").CombinedOutput()
		set := map[string]bool{}
		for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
			set[m[1]] = true
		}
		if len(set) < 5 {
			t.Fatalf("%s -h lists only %v:\n%s", container, set, out)
		}
		flags[container] = set
	}

	seen := map[string]bool{}
	for _, tc := range matrix {
		for _, o := range render(t, tc) {
			if o.GetKind() != "Deployment" {
				continue
			}
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range cs {
				cm := c.(map[string]any)
				name, _ := cm["name"].(string)
				known, ok := flags[name]
				if !ok {
					t.Errorf("%s: %s: container %q runs no known binary", tc.name, o.GetName(), name)
					continue
				}
				seen[name] = true
				if cmd, _, _ := unstructured.NestedStringSlice(cm, "command"); len(cmd) > 0 {
					t.Errorf("%s: %s overrides the image's command: %v", tc.name, name, cmd)
				}
				args, _, _ := unstructured.NestedStringSlice(cm, "args")
				for _, a := range args {
					if !strings.HasPrefix(a, "--") {
						t.Errorf("%s: %s: argument %q is not a --flag", tc.name, name, a)
						continue
					}
					f, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
					if !known[f] {
						t.Errorf("%s: %s: --%s is not a flag of the binary", tc.name, name, f)
					}
				}
			}
		}
	}
	for c := range binaries {
		if !seen[c] {
			t.Errorf("no value set renders %s", c)
		}
	}
}
