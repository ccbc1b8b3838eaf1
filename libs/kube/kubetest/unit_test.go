package kubetest

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDecodeYAML(t *testing.T) {
	objs, err := DecodeYAML([]byte(`
# only a comment
---
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
data: {n: "1"}
---
{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b"}},
  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "c"}}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec: {replicas: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	if want := "ConfigMap/a Namespace/b Namespace/c Deployment/d"; strings.Join(got, " ") != want {
		t.Fatalf("got %v, want %s", got, want)
	}
	if r, ok := objs[3].Object["spec"].(map[string]any)["replicas"].(int64); !ok || r != 3 {
		t.Errorf("replicas %#v, want int64 3", objs[3].Object["spec"])
	}
	if _, err := DecodeYAML([]byte("kind: [")); err == nil {
		t.Errorf("bad YAML: no error")
	}
	if _, err := DecodeYAML([]byte("metadata: {name: x}\n")); err == nil {
		t.Errorf("object without kind: no error")
	}
}

func TestEscapeModulePath(t *testing.T) {
	if got := escapeModulePath("github.com/Azure/Go"); got != "github.com/!azure/!go" {
		t.Errorf("got %s", got)
	}
}

func TestToolsDir(t *testing.T) {
	t.Setenv(EnvToolsCache, "/x/tools")
	if got := ToolsDir(); got != "/x/tools/k8s-"+KubernetesVersion {
		t.Errorf("with %s: %s", EnvToolsCache, got)
	}
	t.Setenv(EnvToolsCache, "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if got := ToolsDir(); got != "/xdg/meshplane/tools/k8s-"+KubernetesVersion {
		t.Errorf("with XDG_CACHE_HOME: %s", got)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := ToolsDir(); got != "/home/u/.cache/meshplane/tools/k8s-"+KubernetesVersion {
		t.Errorf("with HOME: %s", got)
	}
}

func TestMissingBinaryError(t *testing.T) {
	t.Setenv(EnvKubeAPIServer, filepath.Join(t.TempDir(), "nope"))
	_, err := KubeAPIServerPath()
	if !IsMissingBinary(err) {
		t.Fatalf("got %v, want a MissingBinaryError", err)
	}
	for _, want := range []string{"make tools", "bash hack/tools.sh", EnvKubeAPIServer} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestIstioCRDsFound(t *testing.T) {
	p, err := IstioCRDsPath()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "destinationrules.networking.istio.io") {
		t.Errorf("%s does not define destinationrules", p)
	}
	objs, err := DecodeYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			t.Errorf("%s: %s %s is not a CRD", p, o.GetKind(), o.GetName())
		}
	}
	t.Logf("%s: %d CRDs", p, len(objs))
}

// Demo binaries find the CRDs through their build info (test binaries have
// no dependencies in theirs).
func TestIstioCRDsFromBuildInfo(t *testing.T) {
	want, err := IstioCRDsPath()
	if err != nil {
		t.Fatal(err)
	}
	// want is <modcache>/istio.io/api@<version>/kubernetes/...
	modDir := filepath.Dir(filepath.Dir(want))
	version := strings.TrimPrefix(filepath.Base(modDir), "api@")
	t.Setenv("GOMODCACHE", filepath.Dir(filepath.Dir(modDir)))
	bi := &debug.BuildInfo{Deps: []*debug.Module{
		{Path: "k8s.io/api", Version: "v0.37.2"},
		{Path: istioAPIModule, Version: version},
	}}
	got, gotVersion, tried := istioCRDsFromBuildInfo(bi)
	if got != want || gotVersion != version {
		t.Errorf("got %q %q (tried %v), want %q %q", got, gotVersion, tried, want, version)
	}

	bi.Deps[1].Replace = &debug.Module{Path: modDir}
	if got, _, tried := istioCRDsFromBuildInfo(bi); got != want {
		t.Errorf("directory replacement: got %q (tried %v), want %q", got, tried, want)
	}

	bi.Deps = bi.Deps[:1]
	if got, _, tried := istioCRDsFromBuildInfo(bi); got != "" || len(tried) != 1 {
		t.Errorf("without istio.io/api: got %q, tried %v", got, tried)
	}
}
