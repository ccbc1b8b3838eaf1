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

// images are the binaries shipped as container images, by the directory of
// their Dockerfile, with the package it builds and the chart (if any) whose
// image repository must name it.
var images = []struct{ name, dir, pkg, chart string }{
	{"registration", "services/registration", "./services/registration/cmd/registration", "registration"},
	{"ingest", "services/ingest", "./services/ingest/cmd/ingest", "ingest"},
	{"translation", "services/translation", "./services/translation/cmd/translation", "translation"},
	{"distribution", "services/distribution", "./services/distribution/cmd/distribution", "distribution"},
	{"agent", "services/agent", "./services/agent/cmd/agent", "agent"},
	{"meshplane", "cmd/meshplane", "./cmd/meshplane", ""},
	{"meshctl", "cmd/meshctl", "./cmd/meshctl", ""},
}

// TestDockerfiles: every image has its own Dockerfile, multi-stage, building
// a static binary of a main package that exists, into distroless (or
// scratch) as a non-root user; the charts pull the image of that name; and
// the build context keeps every module of go.work, which the build needs.
func TestDockerfiles(t *testing.T) {
	root := repoRoot(t)
	fromRe := regexp.MustCompile(`(?m)^FROM\s+(\S+)(?:\s+AS\s+(\S+))?`)
	for _, img := range images {
		t.Run(img.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(root, img.dir, "Dockerfile"))
			if err != nil {
				t.Fatalf("%s has no Dockerfile: %v", img.dir, err)
			}
			df := string(b)
			froms := fromRe.FindAllStringSubmatch(df, -1)
			if len(froms) < 2 {
				t.Fatalf("%s/Dockerfile has %d stages, want a build stage and a runtime stage", img.dir, len(froms))
			}
			final := froms[len(froms)-1][1]
			if !strings.HasPrefix(final, "gcr.io/distroless/static") && final != "scratch" {
				t.Errorf("%s/Dockerfile runs on %s, want distroless static or scratch", img.dir, final)
			}
			for _, want := range []string{
				"CGO_ENABLED=0",
				"-o /out/" + img.name + " " + img.pkg,
				"COPY --from=build /out/" + img.name + " /" + img.name,
				`ENTRYPOINT ["/` + img.name + `"]`,
				"USER 65532:65532",
				"-X github.com/meshplane/meshplane/libs/platform.Version=",
			} {
				if !strings.Contains(df, want) {
					t.Errorf("%s/Dockerfile lacks %q", img.dir, want)
				}
			}
			list := exec.Command("go", "list", "-f", "{{.Name}}", img.pkg)
			list.Dir = root
			out, err := list.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "main" {
				t.Errorf("%s/Dockerfile builds %s, which is not a main package: %v %s", img.dir, img.pkg, err, out)
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
