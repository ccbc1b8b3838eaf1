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

// listPackages returns the workspace's packages and everything they
// import, transitively (go list -deps), with their direct imports: the
// import graph, not counting tests.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", module+"...")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errOut.String())
	}
	var pkgs []pkg
	ours := 0
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
		if strings.HasPrefix(p.ImportPath, module) {
			ours++
		}
	}
	if ours < 20 {
		t.Fatalf("go list found only %d packages; is the workspace intact?", ours)
	}
	return pkgs
}

// forbidden lists, per layer, import path fragments the layer must not
// depend on, directly or through any chain of imports (a pure library that
// imports go-redis brings it into every domain that uses the library).
var forbidden = map[string][]string{
	"/internal/domain":   {"connectrpc.com/", "github.com/redis/", "k8s.io/client-go", "k8s.io/apimachinery", "net/http", "v1connect", "/internal/app", "/internal/adapters", "/service"},
	"/internal/app":      {"connectrpc.com/", "github.com/redis/", "k8s.io/", "net/http", "v1connect", "/internal/adapters", "github.com/prometheus/"},
	"/internal/adapters": {"/service"},
}

// forbids reports whether imp matches the forbidden fragment bad. Only the
// services' own composition roots count for the "/service" rule:
// libs/platform is fine.
func forbids(bad, imp string) bool {
	if bad == "/service" {
		return strings.HasPrefix(imp, module+"services/") && strings.HasSuffix(imp, "/service")
	}
	return strings.Contains(imp, bad)
}

// violations walks the import graph from root breadth first and returns,
// for each fragment of bad that some dependency matches, the shortest
// import chain from root to the first such dependency, as "root -> a -> b"
// (the workspace's packages without the module prefix).
func violations(graph map[string][]string, root string, bad []string) []string {
	parent := map[string]string{root: ""}
	queue := []string{root}
	found := map[string]bool{}
	var out []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range graph[p] {
			if _, seen := parent[imp]; seen {
				continue
			}
			parent[imp] = p
			queue = append(queue, imp)
			for _, b := range bad {
				if found[b] || !forbids(b, imp) {
					continue
				}
				found[b] = true
				chain := []string{imp}
				for q := p; q != ""; q = parent[q] {
					chain = append(chain, strings.TrimPrefix(q, module))
				}
				for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
					chain[i], chain[j] = chain[j], chain[i]
				}
				out = append(out, "must not depend on "+`"`+b+`"`+": "+strings.Join(chain, " -> "))
			}
		}
	}
	return out
}

func TestLayering(t *testing.T) {
	pkgs := listPackages(t)
	graph := make(map[string][]string, len(pkgs))
	for _, p := range pkgs {
		graph[p.ImportPath] = p.Imports
	}
	checked := 0
	for _, p := range pkgs {
		if !strings.HasPrefix(p.ImportPath, module) {
			continue
		}
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
			checked++
			for _, v := range violations(graph, p.ImportPath, bad) {
				t.Errorf("%s: %s %s", p.ImportPath, layer, v)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no domain, app or adapters package found")
	}
	t.Logf("%d domain, app and adapters packages checked with their transitive imports", checked)
}

// The check follows imports through packages that are themselves allowed,
// names the forbidden one and the chain that reaches it, and passes a
// graph that reaches nothing forbidden.
func TestLayeringFollowsTransitiveImports(t *testing.T) {
	const domain = module + "services/x/internal/domain"
	graph := map[string][]string{
		domain:                         {"fmt", module + "libs/pure"},
		"fmt":                          {"errors"},
		module + "libs/pure":           {"errors", module + "libs/stores"},
		module + "libs/stores":         {"github.com/redis/go-redis/v9", module + "libs/platform"},
		module + "libs/platform":       {"net/http", "connectrpc.com/connect"},
		"connectrpc.com/connect":       {"net/http"},
		"github.com/redis/go-redis/v9": {"net"},
	}
	got := violations(graph, domain, forbidden["/internal/domain"])
	want := []string{
		`must not depend on "github.com/redis/": services/x/internal/domain -> libs/pure -> libs/stores -> github.com/redis/go-redis/v9`,
		`must not depend on "net/http": services/x/internal/domain -> libs/pure -> libs/stores -> libs/platform -> net/http`,
		`must not depend on "connectrpc.com/": services/x/internal/domain -> libs/pure -> libs/stores -> libs/platform -> connectrpc.com/connect`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	graph[module+"libs/pure"] = []string{"errors"}
	if got := violations(graph, domain, forbidden["/internal/domain"]); len(got) != 0 {
		t.Errorf("a graph without forbidden imports fails: %q", got)
	}
}
