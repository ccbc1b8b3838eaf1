// Package charts tests the Helm charts in deploy/charts: lint, a matrix of
// rendered value sets applied with server-side dry-run to a real
// kube-apiserver, the agent's RBAC through SubjectAccessReview, and that every
// argument the charts pass is a flag the binaries really have.
package charts

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// EnvHelm overrides where the helm binary is found.
const EnvHelm = "MESHPLANE_HELM"

// helmPath finds helm: $MESHPLANE_HELM, else the tools cache that
// hack/tools.sh fills (the directory that also holds kubectl).
func helmPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvHelm); p != "" {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o111 != 0 {
			return p
		}
		t.Fatalf("helm: $%s=%s is not an executable file", EnvHelm, p)
	}
	p := filepath.Join(kubetest.ToolsDir(), "helm")
	if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o111 != 0 {
		return p
	}
	t.Fatalf("helm not found at %s (set $%s to override): run `make tools` or `bash hack/tools.sh` "+
		"from the repository root; it builds helm.sh/helm/v3/cmd/helm into the tools cache (about a minute)", p, EnvHelm)
	return ""
}

// chartNames are the charts under deploy/charts.
var chartNames = []string{"registration", "ingest", "translation", "distribution", "agent", "meshplane"}

// chartsDir copies deploy/charts into a temporary directory once per test
// binary, and builds the umbrella chart's dependencies there from their local
// paths, so that the tests never write into the source tree.
func chartsDir(t testing.TB) string {
	t.Helper()
	chartsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "meshplane-charts-")
		if err != nil {
			chartsErr = err
			return
		}
		chartsTmp = dir
		src := filepath.Join(harness.RepoRoot(), "deploy", "charts")
		if err := copyTree(src, dir); err != nil {
			chartsErr = fmt.Errorf("copy %s: %w", src, err)
			return
		}
		// Stale packages from a developer's own `helm dependency build` must
		// not stand in for the current sources.
		_ = os.RemoveAll(filepath.Join(dir, "meshplane", "charts"))
		_ = os.Remove(filepath.Join(dir, "meshplane", "Chart.lock"))
		out, err := runHelm(context.Background(), helmPath(t), "dependency", "build", filepath.Join(dir, "meshplane"))
		if err != nil {
			chartsErr = fmt.Errorf("helm dependency build: %w\n%s", err, out)
		}
	})
	if chartsErr != nil {
		t.Fatal(chartsErr)
	}
	return chartsTmp
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

func runHelm(ctx context.Context, helm string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helm, args...)
	// Keep helm away from the developer's repositories and cache: everything
	// here is local.
	home, err := os.MkdirTemp("", "meshplane-helm-home-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(home)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), fmt.Errorf("helm %s: %w", strings.Join(args, " "), err)
	}
	return stdout.String(), nil
}

// valuesFile writes values (YAML) to a file for helm -f.
func valuesFile(t testing.TB, values string) string {
	t.Helper()
	// Not t.TempDir: its name comes from the test's, which may hold a
	// comma, and helm splits -f at commas.
	dir, err := os.MkdirTemp("", "meshplane-values-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// template renders chart with values as release in namespace ns.
func template(t testing.TB, chart, release, ns, values string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	out, err := runHelm(context.Background(), helmPath(t), "template", release, filepath.Join(chartsDir(t), chart),
		"--namespace", ns, "-f", valuesFile(t, values))
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	objs, err := kubetest.DecodeYAML([]byte(out))
	if err != nil {
		return nil, fmt.Errorf("decode helm output: %w\n%s", err, out)
	}
	return objs, nil
}

func TestHelmLint(t *testing.T) {
	helm := helmPath(t)
	dir := chartsDir(t)
	// The charts that refuse to render without settings get the smallest
	// values that make them valid; lint does not report `fail`.
	lintValues := map[string]string{
		"agent":        agentRelayValues,
		"distribution": "redis:\n  addrs: [redis:6379]\n",
	}
	for _, c := range chartNames {
		t.Run(c, func(t *testing.T) {
			args := []string{"lint", "--strict", filepath.Join(dir, c)}
			if v, ok := lintValues[c]; ok {
				args = append(args, "-f", valuesFile(t, v))
			}
			out, err := runHelm(context.Background(), helm, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// TestChartRefusals checks that missing required settings fail the render
// with a message that says what to set.
func TestChartRefusals(t *testing.T) {
	cases := []struct {
		name, chart, values, want string
	}{
		{"agent without cluster", "agent", "relayAddr: mp:9900\ncaBundle: x\n", "the value 'cluster' is required"},
		{"agent with a bad cluster name", "agent", "cluster: East_1\nrelayAddr: mp:9900\ncaBundle: x\n", "must be a DNS label"},
		{"agent without addresses", "agent", "cluster: east\ncaBundle: x\n", "set relayAddr"},
		{"agent with only some addresses", "agent", "cluster: east\nregistrationAddr: r:9901\ncaBundle: x\n", "set relayAddr"},
		{"agent without a CA", "agent", "cluster: east\nrelayAddr: mp:9900\n", "set caBundle (PEM) or caBundleSecret.name"},
		{"distribution without Redis", "distribution", "{}\n", "distribution needs Redis"},
		{"umbrella without Redis", "meshplane", "redis:\n  enabled: false\n", "set global.redis.addrs"},
		{"umbrella with two Redis", "meshplane", "global:\n  redis:\n    addrs: [r:6379]\n", "choose one Redis"},
		{"umbrella with a bad front door", "meshplane", "frontDoor:\n  type: nginx\n", "frontDoor.type must be none, httproute or istio"},
		{"umbrella httproute without a gateway", "meshplane", "frontDoor:\n  type: httproute\n", "needs frontDoor.httproute.parentRefs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := template(t, tc.chart, "r", "default", tc.values)
			if err == nil {
				t.Fatalf("rendered; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error does not contain %q:\n%v", tc.want, err)
			}
		})
	}
}
