// Package tilt_test checks the repository's Tiltfile without Tilt: it runs
// the Tiltfile under go.starlark.net with recording stubs (stubs_test.go)
// and checks what it would deploy, build and run.
package tilt_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/meshplane/meshplane/test/e2e/harness"
	"go.starlark.net/starlark"
	"sigs.k8s.io/yaml"
)

// services are the components that each need a host build, an image and a
// Kubernetes resource.
var services = []string{"registration", "ingest", "translation", "distribution", "agent"}

// adminPorts must be port-forwarded: the services' admin and metrics ports.
var adminPorts = []int{9991, 9992, 9993, 9994, 9988}

// generatedDirs are written by `tilt up` and git-ignored (tilt/.gitignore):
// paths below them need not exist, but must be made by a step of the
// Tiltfile (checked in pathProblems).
var generatedDirs = []string{"tilt/.bin", "tilt/.pki"}

func loadTiltfile(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "Tiltfile"))
	if err != nil {
		t.Fatalf("read Tiltfile: %v", err)
	}
	return src
}

// execTiltfile runs src under the stubs with the given `tilt up -- ...`
// flags.
func execTiltfile(t *testing.T, src []byte, flags map[string]any) *recorder {
	t.Helper()
	r := newRecorder(harness.RepoRoot())
	for k, v := range flags {
		r.flags[k] = v
	}
	if ctx, ok := flags["mgmt-context"].(string); ok {
		r.k8sContext = ctx
	}
	if err := r.run("Tiltfile", src); err != nil {
		t.Fatalf("the Tiltfile failed under the stubs:\n%v", err)
	}
	return r
}

func TestTiltfile(t *testing.T) {
	r := execTiltfile(t, loadTiltfile(t), nil)
	if problems := check(r); len(problems) > 0 {
		t.Errorf("the Tiltfile has %d problem(s):\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	if len(r.callsOf("local_resource")) == 0 || len(r.callsOf("k8s_resource")) == 0 {
		t.Fatal("the stubs recorded no resources: is the Tiltfile empty?")
	}
}

// TestTiltfileCatchesMistakes breaks the Tiltfile on purpose and expects the
// checks to name the mistake, so that TestTiltfile passing means something.
func TestTiltfileCatchesMistakes(t *testing.T) {
	src := string(loadTiltfile(t))
	cases := []struct {
		name, old, new, want string
	}{
		{"missing dockerfile", "dockerfile='tilt/Dockerfile.tilt'", "dockerfile='tilt/Dockerfile.tlit'", "tilt/Dockerfile.tlit does not exist"},
		{"missing chart", "'chart': 'deploy/charts/ingest'", "'chart': 'deploy/charts/ingets'", "deploy/charts/ingets does not exist"},
		{"missing values", "'tilt/values/%s.yaml' % name", "'tilt/value/%s.yaml' % name", "tilt/value/registration.yaml does not exist"},
		{"missing main package", "'pkg': './services/agent/cmd/agent'", "'pkg': './services/agent/cmd/agnet'", "services/agent/cmd/agnet does not exist"},
		{"missing script", "tilt/scripts/agent-up.sh %s", "tilt/scripts/agent-upp.sh %s", "tilt/scripts/agent-upp.sh does not exist"},
		{"sync of a binary no step builds", "sync(BIN_DIR + '/' + name, binary)", "sync(BIN_DIR + '/x' + name, binary)", "tilt/.bin/xregistration is made by no step"},
		{"image the chart does not use", "'image': 'meshplane-dev/translation'", "'image': 'meshplane/translation'", "translation: docker_build ref \"meshplane/translation\" is not the image.repository"},
		{"admin port not forwarded", "'ports': [9993]", "'ports': []", "port 9993 is not forwarded"},
		{"e2e automatic", "trigger_mode=TRIGGER_MODE_MANUAL", "trigger_mode=TRIGGER_MODE_AUTO", "e2e: trigger_mode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(src, tc.old) {
				t.Fatalf("the Tiltfile no longer contains %q: update this case", tc.old)
			}
			r := execTiltfile(t, []byte(strings.Replace(src, tc.old, tc.new, 1)), nil)
			problems := check(r)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("want a problem containing %q, got:\n  %s", tc.want, strings.Join(problems, "\n  "))
			}
		})
	}
}

// TestTiltfileWorkloadContexts: --workload-contexts picks the clusters that
// get an agent, and each of their contexts is allowed.
func TestTiltfileWorkloadContexts(t *testing.T) {
	tests := []struct {
		flags      map[string]any
		wantAgents []string
		wantAllow  []string
	}{
		{nil, []string{"agent-east", "agent-west"}, []string{"kind-meshplane-mgmt", "kind-meshplane-east", "kind-meshplane-west"}},
		{map[string]any{"workload-contexts": []string{"north=kind-a", "kind-meshplane-south"}},
			[]string{"agent-north", "agent-south"}, []string{"kind-meshplane-mgmt", "kind-a", "kind-meshplane-south"}},
		{map[string]any{"mgmt-context": "kind-hub", "workload-contexts": []string{}}, nil, []string{"kind-hub"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.flags), func(t *testing.T) {
			r := execTiltfile(t, loadTiltfile(t), tc.flags)
			var agents []string
			for _, c := range r.callsOf("local_resource") {
				if n := c.str(0, "name"); strings.HasPrefix(n, "agent-") {
					agents = append(agents, n)
				}
			}
			if !slices.Equal(agents, tc.wantAgents) {
				t.Errorf("agent resources = %v, want %v", agents, tc.wantAgents)
			}
			var allowed []string
			for _, c := range r.callsOf("allow_k8s_contexts") {
				allowed = append(allowed, c.strs(0, "contexts")...)
			}
			for _, want := range tc.wantAllow {
				if !slices.Contains(allowed, want) {
					t.Errorf("allow_k8s_contexts(%v) lacks %s", allowed, want)
				}
			}
		})
	}
}

// TestTiltfileRefusesOtherContext: Tilt must not deploy the management plane
// into whatever cluster happens to be current.
func TestTiltfileRefusesOtherContext(t *testing.T) {
	r := newRecorder(harness.RepoRoot())
	r.k8sContext = "prod"
	err := r.run("Tiltfile", loadTiltfile(t))
	if err == nil || !strings.Contains(err.Error(), "current context is prod") {
		t.Fatalf("want fail() naming the current context, got %v", err)
	}
}

// check returns every problem found in what the Tiltfile did.
func check(r *recorder) []string {
	var p []string
	p = append(p, serviceProblems(r)...)
	p = append(p, pathProblems(r)...)
	p = append(p, chartProblems(r)...)
	p = append(p, testResourceProblems(r)...)
	p = append(p, portForwardProblems(r)...)
	return p
}

func find(calls []call, pred func(call) bool) (call, bool) {
	for _, c := range calls {
		if pred(c) {
			return c, true
		}
	}
	return call{}, false
}

// dockerBuilds are docker_build calls, directly or through the
// restart_process extension.
func dockerBuilds(r *recorder) []call {
	var out []call
	for _, c := range r.calls {
		if c.fn == "docker_build" || c.fn == "docker_build_with_restart" {
			out = append(out, c)
		}
	}
	return out
}

// serviceProblems: every service has a host build, an image that its chart's
// dev values use and that live-updates only the binary, a chart deployed
// with helm, and a k8s_resource.
func serviceProblems(r *recorder) []string {
	var p []string
	for _, svc := range services {
		build, ok := find(r.callsOf("local_resource"), func(c call) bool { return c.str(0, "name") == "build-"+svc })
		if !ok {
			p = append(p, fmt.Sprintf("%s: no local_resource build-%s", svc, svc))
		} else if cmd := build.str(1, "cmd"); !strings.Contains(cmd, "go build") || !strings.Contains(cmd, "CGO_ENABLED=0") || !strings.Contains(cmd, "GOOS=linux") {
			p = append(p, fmt.Sprintf("%s: build-%s does not run CGO_ENABLED=0 GOOS=linux go build: %q", svc, svc, cmd))
		}

		values := filepath.Join("tilt", "values", svc+".yaml")
		repo := imageRepository(r.abs(values))
		img, ok := find(dockerBuilds(r), func(c call) bool {
			return buildArg(c, "BINARY") == svc
		})
		switch {
		case !ok:
			p = append(p, fmt.Sprintf("%s: no docker_build with build_args BINARY=%s", svc, svc))
		case img.str(0, "ref") != repo:
			p = append(p, fmt.Sprintf("%s: docker_build ref %q is not the image.repository %q of %s, so Tilt would not swap in its image", svc, img.str(0, "ref"), repo, values))
		default:
			p = append(p, liveUpdateProblems(svc, img)...)
		}

		if _, ok := find(r.callsOf("helm"), func(c call) bool {
			return filepath.Base(c.str(0, "paths")) == svc && slices.Contains(c.strs(-1, "values"), filepath.ToSlash(values))
		}); !ok {
			p = append(p, fmt.Sprintf("%s: no helm() of its chart with %s", svc, values))
		}
		if _, ok := find(r.callsOf("k8s_resource"), func(c call) bool { return c.str(-1, "new_name") == svc && c.str(0, "workload") != "" }); !ok {
			p = append(p, fmt.Sprintf("%s: no k8s_resource named %s", svc, svc))
		}
	}
	return p
}

func buildArg(c call, key string) string {
	d, ok := c.arg(-1, "build_args").(*starlark.Dict)
	if !ok {
		return ""
	}
	v, found, _ := d.Get(starlark.String(key))
	if s, ok := v.(starlark.String); found && ok {
		return string(s)
	}
	return ""
}

// liveUpdateProblems: the image context ships only the binary, and the live
// update syncs it and restarts the process.
func liveUpdateProblems(svc string, c call) []string {
	var p []string
	if only := c.strs(-1, "only"); !slices.Equal(only, []string{svc}) {
		p = append(p, fmt.Sprintf("%s: docker_build only=%v, want only the binary [%s]", svc, only, svc))
	}
	lu, _ := c.arg(-1, "live_update").(*starlark.List)
	var syncs, restarts int
	for i := 0; lu != nil && i < lu.Len(); i++ {
		if s, ok := lu.Index(i).(*liveUpdateStep); ok {
			switch s.kind {
			case "sync":
				syncs++
			case "restart_container":
				restarts++
			}
		}
	}
	if c.fn == "docker_build_with_restart" {
		restarts++ // the extension appends the restart
	}
	if syncs == 0 || restarts == 0 {
		p = append(p, fmt.Sprintf("%s: live_update must sync the binary and restart (got %d sync, %d restart)", svc, syncs, restarts))
	}
	return p
}

func imageRepository(valuesFile string) string {
	b, err := os.ReadFile(valuesFile)
	if err != nil {
		return ""
	}
	var v struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		return ""
	}
	return v.Image.Repository
}

// namedPath is a path the Tiltfile names, and where.
type namedPath struct {
	path, pos, what string
}

// repoTopDirs are the repository's top-level directories: a word of a
// command that starts with one of them is a path to check.
func repoTopDirs(root string) []string {
	entries, _ := os.ReadDir(root)
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

var shellWord = regexp.MustCompile(`[^\s'"=]+`)

// namedPaths collects every file or directory the Tiltfile names: arguments
// that are paths, and path-like words of the commands it runs.
func namedPaths(r *recorder) []namedPath {
	var out []namedPath
	add := func(c call, what string, paths ...string) {
		for _, p := range paths {
			if p != "" {
				out = append(out, namedPath{path: p, pos: c.pos, what: what})
			}
		}
	}
	tops := repoTopDirs(r.root)
	addCmd := func(c call, what, cmd string) {
		for _, w := range shellWord.FindAllString(cmd, -1) {
			w = strings.TrimPrefix(w, "./")
			w = strings.TrimSuffix(strings.TrimSuffix(w, "..."), "/")
			first, _, _ := strings.Cut(w, "/")
			if w != "" && strings.Contains(w, "/") && slices.Contains(tops, first) {
				add(c, what+" command", w)
			}
		}
	}
	for _, c := range r.calls {
		switch c.fn {
		case "local_resource":
			add(c, "local_resource deps", c.strs(-1, "deps")...)
			add(c, "local_resource dir", c.str(-1, "dir"))
			addCmd(c, "local_resource", c.str(1, "cmd"))
			addCmd(c, "local_resource serve", c.str(-1, "serve_cmd"))
		case "local":
			addCmd(c, "local", c.str(0, "command"))
		case "docker_build", "docker_build_with_restart":
			add(c, "docker_build context", c.str(1, "context"))
			add(c, "docker_build dockerfile", c.str(-1, "dockerfile"))
			if ctx := c.str(1, "context"); ctx != "" {
				for _, o := range c.strs(-1, "only") {
					add(c, "docker_build only", filepath.ToSlash(filepath.Join(ctx, o)))
				}
			}
		case "sync":
			add(c, "sync source", c.str(0, "local_path"))
		case "helm":
			add(c, "helm chart", c.str(0, "paths"))
			add(c, "helm values", c.strs(-1, "values")...)
		case "k8s_yaml":
			add(c, "k8s_yaml", c.strs(0, "yaml")...)
		case "read_file":
			add(c, "read_file", c.str(0, "file_path"))
		}
	}
	return out
}

// producedPaths are the outputs of the Tiltfile's own steps: go build -o
// targets and the devpki -dir.
func producedPaths(r *recorder) []string {
	var out []string
	outFlag := regexp.MustCompile(`(?:-o|-dir)\s+(\S+)`)
	for _, c := range r.calls {
		var cmds []string
		switch c.fn {
		case "local_resource":
			cmds = append(cmds, c.str(1, "cmd"))
		case "local":
			cmds = append(cmds, c.str(0, "command"))
		}
		for _, cmd := range cmds {
			for _, m := range outFlag.FindAllStringSubmatch(cmd, -1) {
				out = append(out, strings.TrimPrefix(m[1], "./"))
			}
		}
	}
	return out
}

// pathProblems: every named path exists, or lies below a generated
// directory and is made by one of the Tiltfile's steps.
func pathProblems(r *recorder) []string {
	var p []string
	produced := producedPaths(r)
	seen := map[string]bool{}
	for _, np := range namedPaths(r) {
		clean := filepath.ToSlash(filepath.Clean(np.path))
		if seen[clean+np.pos] {
			continue
		}
		seen[clean+np.pos] = true
		if gen := generatedRoot(clean); gen != "" {
			if clean == gen {
				continue
			}
			if !slices.ContainsFunc(produced, func(out string) bool { return clean == out || strings.HasPrefix(clean, out+"/") }) {
				p = append(p, fmt.Sprintf("%s: %s %s is made by no step of the Tiltfile (outputs: %v)", np.pos, np.what, clean, produced))
			}
			continue
		}
		if filepath.IsAbs(clean) || strings.HasPrefix(clean, "../") {
			p = append(p, fmt.Sprintf("%s: %s %s is outside the repository", np.pos, np.what, clean))
			continue
		}
		if _, err := os.Stat(r.abs(clean)); err != nil {
			p = append(p, fmt.Sprintf("%s: %s %s does not exist (paths are relative to the repository root)", np.pos, np.what, clean))
		}
	}
	return p
}

func generatedRoot(path string) string {
	for _, g := range generatedDirs {
		if path == g || strings.HasPrefix(path, g+"/") {
			return g
		}
	}
	return ""
}

// chartProblems: every chart deployed is a chart, and every chart under
// deploy/charts that a service needs is deployed.
func chartProblems(r *recorder) []string {
	var p []string
	for _, c := range r.callsOf("helm") {
		chart := c.str(0, "paths")
		if _, err := os.Stat(r.abs(filepath.Join(chart, "Chart.yaml"))); err != nil {
			p = append(p, fmt.Sprintf("%s: helm chart %s has no Chart.yaml", c.pos, chart))
		}
		if c.str(-1, "namespace") == "" {
			p = append(p, fmt.Sprintf("%s: helm(%s) sets no namespace", c.pos, chart))
		}
	}
	return p
}

// testResourceProblems: one automatic unit-test resource per workspace
// module, and a manual e2e resource that does not start with `tilt up`.
func testResourceProblems(r *recorder) []string {
	var p []string
	units := map[string]call{}
	var e2e *call
	for _, c := range r.callsOf("local_resource") {
		name := c.str(0, "name")
		switch {
		case strings.HasPrefix(name, "test-"):
			units[name] = c
		case name == "e2e":
			e2e = &c
		}
	}
	for _, mod := range workspaceModules(r.abs("go.work")) {
		if mod == "test/e2e" || mod == "tools" {
			continue
		}
		name := "test-" + strings.ReplaceAll(mod, "/", "-")
		c, ok := units[name]
		if !ok {
			p = append(p, fmt.Sprintf("module %s: no unit-test resource %s", mod, name))
			continue
		}
		if !strings.Contains(c.str(1, "cmd"), "go test -short") {
			p = append(p, fmt.Sprintf("%s: %s does not run go test -short: %q", c.pos, name, c.str(1, "cmd")))
		}
		if tm := c.str(-1, "trigger_mode"); tm != "" && tm != "TRIGGER_MODE_AUTO" {
			p = append(p, fmt.Sprintf("%s: %s: trigger_mode %s, want TRIGGER_MODE_AUTO", c.pos, name, tm))
		}
		if v, ok := c.arg(-1, "auto_init").(starlark.Bool); ok && !bool(v) {
			p = append(p, fmt.Sprintf("%s: %s: auto_init=False, want unit tests to run on start", c.pos, name))
		}
	}
	switch {
	case e2e == nil:
		p = append(p, "no e2e local_resource")
	default:
		if tm := e2e.str(-1, "trigger_mode"); tm != "TRIGGER_MODE_MANUAL" {
			p = append(p, fmt.Sprintf("%s: e2e: trigger_mode %q, want TRIGGER_MODE_MANUAL", e2e.pos, tm))
		}
		if v, ok := e2e.arg(-1, "auto_init").(starlark.Bool); !ok || bool(v) {
			p = append(p, fmt.Sprintf("%s: e2e: auto_init must be False", e2e.pos))
		}
	}
	return p
}

func workspaceModules(goWork string) []string {
	b, err := os.ReadFile(goWork)
	if err != nil {
		return nil
	}
	var mods []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "./") {
			mods = append(mods, strings.TrimPrefix(line, "./"))
		}
	}
	return mods
}

// portForwardProblems: the admin and metrics ports are reachable on
// localhost.
func portForwardProblems(r *recorder) []string {
	forwarded := map[int]bool{}
	for _, c := range r.callsOf("k8s_resource") {
		for _, pf := range c.strs(-1, "port_forwards") {
			local, _, _ := strings.Cut(pf, ":")
			if n, err := strconv.Atoi(local); err == nil {
				forwarded[n] = true
			}
		}
	}
	var p []string
	for _, port := range adminPorts {
		if !forwarded[port] {
			p = append(p, fmt.Sprintf("admin port %d is not forwarded by any k8s_resource", port))
		}
	}
	return p
}
