package kubetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"

	// The Istio CRDs are read from the istio.io/api module's source tree in
	// the module cache, at the version linked into this binary (see
	// IstioCRDsPath). Importing it keeps it in the build list and in the
	// binary's build info.
	_ "istio.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

const (
	istioAPIModule = "istio.io/api"
	istioCRDFile   = "kubernetes/customresourcedefinitions.gen.yaml"
)

// CRDResource is the GroupVersionResource of CustomResourceDefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

var istioCRDCache struct {
	sync.Mutex
	path string
	data []byte
}

// IstioCRDs returns the contents of the istio.io/api module's
// kubernetes/customresourcedefinitions.gen.yaml (see IstioCRDsPath). The
// result is cached.
func IstioCRDs() ([]byte, error) {
	istioCRDCache.Lock()
	defer istioCRDCache.Unlock()
	if istioCRDCache.data != nil {
		return istioCRDCache.data, nil
	}
	p, err := istioCRDsPathLocked()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("kubetest: read Istio CRDs: %w", err)
	}
	istioCRDCache.data = data
	return data, nil
}

// IstioCRDsPath finds kubernetes/customresourcedefinitions.gen.yaml of the
// istio.io/api module, trying in turn:
//
//  1. $MESHPLANE_ISTIO_CRDS, a path to the file;
//  2. the istio.io/api version in this binary's build info, in the module
//     cache ($GOMODCACHE, `go env GOMODCACHE`, $GOPATH/pkg/mod);
//  3. `go list -m -f {{.Dir}} istio.io/api` in the current directory;
//  4. `go mod download -json istio.io/api@<version>`.
//
// The result is cached.
func IstioCRDsPath() (string, error) {
	istioCRDCache.Lock()
	defer istioCRDCache.Unlock()
	return istioCRDsPathLocked()
}

func istioCRDsPathLocked() (string, error) {
	if istioCRDCache.path != "" {
		return istioCRDCache.path, nil
	}
	p, err := findIstioCRDs()
	if err != nil {
		return "", err
	}
	istioCRDCache.path = p
	return p, nil
}

func findIstioCRDs() (string, error) {
	if p := os.Getenv(EnvIstioCRDs); p != "" {
		if fileExists(p) {
			return p, nil
		}
		return "", fmt.Errorf("kubetest: $%s=%s: no such file", EnvIstioCRDs, p)
	}
	var tried []string
	version := ""
	// Binaries built with go build or go run record their dependencies.
	// Test binaries do not: go list below covers them.
	if bi, ok := debug.ReadBuildInfo(); ok {
		var p string
		p, version, tried = istioCRDsFromBuildInfo(bi)
		if p != "" {
			return p, nil
		}
	}
	if out, err := goCmd("list", "-m", "-f", "{{.Dir}}", istioAPIModule); err == nil && out != "" {
		p := filepath.Join(out, istioCRDFile)
		if fileExists(p) {
			return p, nil
		}
		tried = append(tried, p)
	} else {
		tried = append(tried, fmt.Sprintf("go list -m %s: %v", istioAPIModule, err))
	}
	if version != "" {
		out, err := goCmd("mod", "download", "-json", istioAPIModule+"@"+version)
		if err == nil {
			var m struct{ Dir string }
			if json.Unmarshal([]byte(out), &m) == nil && m.Dir != "" {
				p := filepath.Join(m.Dir, istioCRDFile)
				if fileExists(p) {
					return p, nil
				}
				tried = append(tried, p)
			}
		} else {
			tried = append(tried, fmt.Sprintf("go mod download %s@%s: %v", istioAPIModule, version, err))
		}
	}
	return "", fmt.Errorf("kubetest: cannot find the Istio CRDs (%s of module %s); set $%s to the file. Tried:\n  %s",
		istioCRDFile, istioAPIModule, EnvIstioCRDs, strings.Join(tried, "\n  "))
}

// istioCRDsFromBuildInfo looks for the CRD file of the istio.io/api version
// in bi in the module cache. It returns the file, or the version and the
// paths it tried.
func istioCRDsFromBuildInfo(bi *debug.BuildInfo) (path, version string, tried []string) {
	for _, d := range bi.Deps {
		if d.Path != istioAPIModule {
			continue
		}
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		if m.Version == "" {
			// A directory replacement: only an absolute one can be
			// found from here.
			p := filepath.Join(m.Path, istioCRDFile)
			if filepath.IsAbs(m.Path) && fileExists(p) {
				return p, "", nil
			}
			return "", "", []string{p}
		}
		rel := filepath.Join(escapeModulePath(m.Path)+"@"+escapeModulePath(m.Version), istioCRDFile)
		for _, cache := range modCacheDirs() {
			p := filepath.Join(cache, rel)
			if fileExists(p) {
				return p, m.Version, nil
			}
			tried = append(tried, p)
		}
		// `go env` also knows `go env -w` settings; it costs a process,
		// so it comes after the cheap guesses.
		if cache, err := goCmd("env", "GOMODCACHE"); err == nil && cache != "" {
			p := filepath.Join(cache, rel)
			if fileExists(p) {
				return p, m.Version, nil
			}
			tried = append(tried, p)
		}
		return "", m.Version, tried
	}
	return "", "", []string{"(" + istioAPIModule + " is not in the build info)"}
}

func goCmd(args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

func modCacheDirs() []string {
	var dirs []string
	if d := os.Getenv("GOMODCACHE"); d != "" {
		dirs = append(dirs, d)
	}
	if gopath := os.Getenv("GOPATH"); gopath != "" {
		dirs = append(dirs, filepath.Join(filepath.SplitList(gopath)[0], "pkg", "mod"))
	} else if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "pkg", "mod"))
	}
	return dirs
}

// escapeModulePath applies the module cache's case encoding: an upper-case
// letter becomes '!' and its lower-case form.
func escapeModulePath(s string) string {
	var b strings.Builder
	for _, r := range s {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// installCRDs server-side applies every CRD in docs and waits until all are
// Established.
func (c *Cluster) installCRDs(ctx context.Context, docs [][]byte) error {
	var names []string
	var all []*unstructured.Unstructured
	for i, doc := range docs {
		objs, err := DecodeYAML(doc)
		if err != nil {
			return fmt.Errorf("CRDs[%d]: %w", i, err)
		}
		for _, obj := range objs {
			if obj.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
				return fmt.Errorf("CRDs[%d]: %s %q is not a CustomResourceDefinition", i, obj.GetKind(), obj.GetName())
			}
			names = append(names, obj.GetName())
		}
		all = append(all, objs...)
	}
	// CRDs do not depend on each other: apply them in parallel. The Istio
	// ones are large (about 1 MB of schemas).
	errs := make([]error, len(all))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, obj := range all {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = applyObjects(ctx, c.dynamic, c.mapper, []*unstructured.Unstructured{obj})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("apply CRDs: %w", err)
	}
	return WaitCRDsEstablished(ctx, c.dynamic, names...)
}

// WaitCRDsEstablished waits until every named CRD has condition
// Established=True, or ctx is done.
func WaitCRDsEstablished(ctx context.Context, dyn dynamic.Interface, names ...string) error {
	pending := map[string]bool{}
	for _, n := range names {
		pending[n] = true
	}
	err := WaitFor(ctx, 0, func(ctx context.Context) (bool, error) {
		list, err := dyn.Resource(CRDResource).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			if crdEstablished(&list.Items[i]) {
				delete(pending, list.Items[i].GetName())
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		var left []string
		for n := range pending {
			left = append(left, n)
		}
		return fmt.Errorf("CRDs not established: %v: %w", left, err)
	}
	return nil
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
