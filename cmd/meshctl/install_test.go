package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestInstallPlanGolden: the printed steps (the default, a dry run).
func TestInstallPlanGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"install-default", []string{"install"}},
		{"install-options", []string{"install", "--kubeconfig", "/home/me/.kube/config", "--kube-context", "kind-mgmt", "-n", "mesh system",
			"--release", "mp", "-f", "values-prod.yaml", "-f", "more.yaml", "--set", "registration.replicas=2", "--wait",
			"--chart", "meshplane/meshplane", "--chart-version", "0.1.0", "--crds", "release/crds"}},
		{"install-skip-crds", []string{"install", "--skip-crds", "--helm", "/opt/helm/bin/helm"}},
		{"uninstall-default", []string{"uninstall"}},
		{"uninstall-all", []string{"uninstall", "--kube-context", "kind-mgmt", "--delete-namespace", "--delete-crds", "--keep-history"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := meshctlOffline(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, "install/"+tc.name+".sh", out)
		})
	}
}

func TestInstallErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"install", "--yes", "--skip-crds", "--helm", "/nonexistent/helm"}, 1, []string{"helm is needed", "hint: install Helm 3", "--helm PATH", "without --yes"}},
		{[]string{"install", "--yes", "--crds", "/nonexistent"}, 2, []string{"--crds /nonexistent is not a directory"}},
		{[]string{"install", "--yes", "-f", "/nonexistent.yaml"}, 2, []string{"--values /nonexistent.yaml"}},
		{[]string{"uninstall", "--yes", "--kubectl", "/nonexistent/kubectl", "--helm", "/nonexistent/helm"}, 1, []string{"helm is needed"}},
		{[]string{"install", "extra"}, 2, []string{"unexpected argument"}},
	} {
		_, errOut, code := meshctlOffline(t, tc.args...)
		if code != tc.code {
			t.Errorf("meshctl %q: exit %d, want %d: %s", tc.args, code, tc.code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("meshctl %q: stderr lacks %q:\n%s", tc.args, w, errOut)
			}
		}
	}
}

// TestInstallYes runs the steps with the cached helm and kubectl against a
// real kube-apiserver without Meshplane's CRDs: check --pre-install sees
// them missing, install applies them and the chart, check --pre-install
// then passes that check, and uninstall removes the release.
func TestInstallYes(t *testing.T) {
	helm, kubectl := filepath.Join(kubetest.ToolsDir(), "helm"), filepath.Join(kubetest.ToolsDir(), "kubectl")
	for _, p := range []string{helm, kubectl} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%v: run `make tools` (hack/tools.sh) to cache helm and kubectl", err)
		}
	}
	// Keep helm away from the developer's repositories and cache.
	home := t.TempDir()
	t.Setenv("HELM_CACHE_HOME", filepath.Join(home, "cache"))
	t.Setenv("HELM_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("HELM_DATA_HOME", filepath.Join(home, "data"))
	c := kubetest.Start(t, kubetest.Options{Name: "mgmt", SkipIstioCRDs: true, SkipMeshplaneCRDs: true})
	kube := []string{"--kubeconfig", c.Kubeconfig()}

	// helm dependency build writes into the chart: use a copy.
	charts := filepath.Join(t.TempDir(), "charts")
	copyDir(t, filepath.Join("..", "..", "deploy", "charts"), charts)
	_ = os.RemoveAll(filepath.Join(charts, "meshplane", "charts"))
	_ = os.Remove(filepath.Join(charts, "meshplane", "Chart.lock"))
	crds := filepath.Join("..", "..", "deploy", "crds")

	out, _, code := meshctlOffline(t, append([]string{"check", "--pre-install"}, kube...)...)
	if code != 1 || !hasLine(out, "meshplane CRDs", "WARN", "not installed yet") || !hasLine(out, "istio CRDs", "FAIL", "virtualservices.networking.istio.io") {
		t.Errorf("check --pre-install before install: exit %d:\n%s", code, out)
	}

	out, errOut, code := meshctlOffline(t, append([]string{"install", "--yes", "--helm", helm, "--kubectl", kubectl,
		"--chart", filepath.Join(charts, "meshplane"), "--crds", crds, "--set", "global.trustDomain=test.local"}, kube...)...)
	if code != 0 {
		t.Fatalf("install --yes: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "# done: 3 step(s)") {
		t.Errorf("install --yes output:\n%s", out)
	}
	deps, err := c.Clientset().AppsV1().Deployments("meshplane").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range deps.Items {
		names = append(names, d.Name)
	}
	for _, want := range []string{"meshplane-registration", "meshplane-ingest", "meshplane-translation", "meshplane-distribution"} {
		if !slices.Contains(names, want) {
			t.Errorf("Deployments after install: %v, want %s", names, want)
		}
	}

	out, _, _ = meshctlOffline(t, append([]string{"check", "--pre-install", "-o", "json"}, kube...)...)
	if !strings.Contains(out, `"check": "meshplane CRDs",
      "level": "ok"`) {
		t.Errorf("check --pre-install after install:\n%s", out)
	}

	out, errOut, code = meshctlOffline(t, append([]string{"uninstall", "--yes", "--helm", helm, "--kubectl", kubectl}, kube...)...)
	if code != 0 {
		t.Fatalf("uninstall --yes: exit %d\n%s\n%s", code, out, errOut)
	}
	deps, err = c.Clientset().AppsV1().Deployments("meshplane").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != 0 {
		t.Errorf("%d Deployments left after uninstall", len(deps.Items))
	}
}

// hasLine reports whether a line of out holds every part, in order.
func hasLine(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := line, true
		for _, p := range parts {
			i := strings.Index(rest, p)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(p):]
		}
		if ok {
			return true
		}
	}
	return false
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
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
	if err != nil {
		t.Fatal(err)
	}
}
