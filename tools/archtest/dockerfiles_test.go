package archtest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// images are the binaries shipped as container images, each built by the
// root Dockerfile with --build-arg BINARY=<name>, with the package that
// must build and the chart (if any) whose image repository must name it.
var images = []struct{ name, pkg, chart string }{
	{"registration", "./services/registration/cmd/registration", "registration"},
	{"ingest", "./services/ingest/cmd/ingest", "ingest"},
	{"translation", "./services/translation/cmd/translation", "translation"},
	{"distribution", "./services/distribution/cmd/distribution", "distribution"},
	{"agent", "./services/agent/cmd/agent", "agent"},
	// The console's chart is still to come; its image is built already.
	{"console", "./services/console/cmd/console", ""},
	{"meshplane", "./cmd/meshplane", ""},
	{"meshctl", "./cmd/meshctl", ""},
}

// imagePackage is the root Dockerfile's rule for the package of BINARY:
// ./services/<name>/cmd/<name> when that directory exists, else
// ./cmd/<name>.
func imagePackage(root, name string) string {
	svc := filepath.Join("services", name, "cmd", name)
	if st, err := os.Stat(filepath.Join(root, svc)); err == nil && st.IsDir() {
		return "./" + filepath.ToSlash(svc)
	}
	return "./cmd/" + name
}

// TestDockerfiles: one Dockerfile at the root builds every image,
// multi-stage, a static binary of a main package that exists, into
// distroless (or scratch) as a non-root user; its header gives the build
// command of each image; no other release Dockerfile creeps back; the
// charts pull the image of that name; and the build context keeps every
// module of go.work, which the build needs.
func TestDockerfiles(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatalf("no Dockerfile at the repository root: %v", err)
	}
	df := string(b)
	t.Run("shape", func(t *testing.T) {
		fromRe := regexp.MustCompile(`(?m)^FROM\s+(\S+)(?:\s+AS\s+(\S+))?`)
		froms := fromRe.FindAllStringSubmatch(df, -1)
		if len(froms) < 2 {
			t.Fatalf("Dockerfile has %d stages, want a build stage and a runtime stage", len(froms))
		}
		final := froms[len(froms)-1][1]
		if !strings.HasPrefix(final, "gcr.io/distroless/static") && final != "scratch" {
			t.Errorf("Dockerfile runs on %s, want distroless static or scratch", final)
		}
		for _, want := range []string{
			"ARG BINARY\n",
			"CGO_ENABLED=0",
			`pkg="./services/${BINARY}/cmd/${BINARY}"`,
			`pkg="./cmd/${BINARY}"`,
			`-o /out/app "$pkg"`,
			"COPY --from=build /out/app /app",
			`ENTRYPOINT ["/app"]`,
			"USER 65532:65532",
			"-X github.com/meshplane/meshplane/libs/platform.Version=",
		} {
			if !strings.Contains(df, want) {
				t.Errorf("Dockerfile lacks %q", want)
			}
		}
	})
	t.Run("no other release Dockerfile", func(t *testing.T) {
		out, err := exec.Command("git", "-C", root, "ls-files", "--", "*Dockerfile*").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Fields(string(out)) {
			if f != "Dockerfile" && f != "tilt/Dockerfile.tilt" {
				t.Errorf("%s: release images are built by the root Dockerfile (--build-arg BINARY=<name>)", f)
			}
		}
	})
	for _, img := range images {
		t.Run(img.name, func(t *testing.T) {
			if got := imagePackage(root, img.name); got != img.pkg {
				t.Errorf("BINARY=%s builds %s, want %s", img.name, got, img.pkg)
			}
			cmd := "--build-arg BINARY=" + img.name + " "
			if !regexp.MustCompile(`(?m)^#\s+docker build ` + regexp.QuoteMeta(cmd) + `.*-t ghcr.io/meshplane/` + img.name + `:`).MatchString(df) {
				t.Errorf("the Dockerfile's header does not give the build command of %s", img.name)
			}
			list := exec.Command("go", "list", "-f", "{{.Name}}", img.pkg)
			list.Dir = root
			out, err := list.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "main" {
				t.Errorf("BINARY=%s builds %s, which is not a main package: %v %s", img.name, img.pkg, err, out)
			}
			if img.chart != "" {
				values, err := os.ReadFile(filepath.Join(root, "deploy", "charts", img.chart, "values.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(values), "repository: ghcr.io/meshplane/"+img.name+"\n") {
					t.Errorf("chart %s does not pull ghcr.io/meshplane/%s", img.chart, img.name)
				}
			}
		})
	}

	t.Run("build context keeps every workspace module", func(t *testing.T) {
		ignored := dockerignore(t, filepath.Join(root, ".dockerignore"))
		work, err := os.ReadFile(filepath.Join(root, "go.work"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(work), "\n") {
			dir, ok := strings.CutPrefix(strings.TrimSpace(line), "./")
			if !ok {
				continue
			}
			for _, pat := range ignored {
				if dir == pat || strings.HasPrefix(dir+"/", pat+"/") {
					t.Errorf(".dockerignore drops %s (pattern %q), a module of go.work: images would not build", dir, pat)
				}
			}
		}
	})
}

// dockerignore returns the plain directory patterns of a .dockerignore.
func dockerignore(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pats []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := strings.TrimSpace(s.Text())
		if l == "" || strings.HasPrefix(l, "#") || strings.ContainsAny(l, "*?!") {
			continue
		}
		pats = append(pats, strings.TrimSuffix(l, "/"))
	}
	return pats
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("cannot find go.work: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
