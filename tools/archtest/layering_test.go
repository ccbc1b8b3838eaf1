// Package archtest checks the dependency rules of DESIGN.md section 4:
// domain <- app <- adapters <- service <- cmd, and libs never import
// services.
package archtest

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/meshplane/meshplane/"

type pkg struct {
	ImportPath string
	Imports    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"...")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errOut.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages; is the workspace intact?", len(pkgs))
	}
	return pkgs
}

// forbidden lists, per layer, import path fragments the layer must not use.
var forbidden = map[string][]string{
	"/internal/domain":   {"connectrpc.com/", "github.com/redis/", "k8s.io/client-go", "k8s.io/apimachinery", "net/http", "v1connect", "/internal/app", "/internal/adapters", "/service"},
	"/internal/app":      {"connectrpc.com/", "github.com/redis/", "k8s.io/", "net/http", "v1connect", "/internal/adapters", "github.com/prometheus/"},
	"/internal/adapters": {"/service"},
}

func TestLayering(t *testing.T) {
	for _, p := range listPackages(t) {
		path := strings.TrimPrefix(p.ImportPath, module)
		if strings.HasPrefix(path, "libs/") {
			for _, imp := range p.Imports {
				if strings.HasPrefix(imp, module+"services/") {
					t.Errorf("%s imports %s: libs must not import services", p.ImportPath, imp)
				}
			}
		}
		for layer, bad := range forbidden {
			if !strings.Contains(path, layer) {
				continue
			}
			for _, imp := range p.Imports {
				for _, b := range bad {
					// Only the service's own layers count for the
					// "/service" rule: libs/platform is fine.
					if b == "/service" && !(strings.HasPrefix(imp, module+"services/") && strings.HasSuffix(imp, "/service")) {
						continue
					}
					if strings.Contains(imp, b) {
						t.Errorf("%s imports %s: %s must not depend on %q", p.ImportPath, imp, layer, b)
					}
				}
			}
		}
	}
}
