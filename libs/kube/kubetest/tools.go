package kubetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// KubernetesVersion is the version of kube-apiserver and kubectl that
// hack/tools.sh builds. Keep the two in step.
const KubernetesVersion = "v1.32.3"

// Environment variables read by this package.
const (
	EnvEtcd          = "MESHPLANE_ETCD"
	EnvKubeAPIServer = "MESHPLANE_KUBE_APISERVER"
	EnvKubectl       = "MESHPLANE_KUBECTL"
	EnvToolsCache    = "MESHPLANE_TOOLS_CACHE"
	EnvSkip          = "MESHPLANE_SKIP_KUBE_TESTS"
	EnvIstioCRDs     = "MESHPLANE_ISTIO_CRDS"
)

// howToGetTools is appended to every missing-binary error.
const howToGetTools = "run `make tools` or `bash hack/tools.sh` from the repository root " +
	"(it builds kube-apiserver and kubectl " + KubernetesVersion + " into the tools cache and installs Debian's etcd-server)"

// MissingBinaryError says that a binary the harness needs is not installed.
type MissingBinaryError struct {
	Name   string   // e.g. "kube-apiserver"
	Looked []string // where it was looked for
	EnvVar string   // the variable that overrides the location
}

func (e *MissingBinaryError) Error() string {
	return fmt.Sprintf("kubetest: %s not found (looked in %v; set $%s to override): %s",
		e.Name, e.Looked, e.EnvVar, howToGetTools)
}

// ToolsDir is the directory hack/tools.sh builds kube-apiserver and kubectl
// into: $MESHPLANE_TOOLS_CACHE, else $XDG_CACHE_HOME/meshplane/tools, else
// $HOME/.cache/meshplane/tools, followed by /k8s-<KubernetesVersion>. It
// matches `bash hack/tools.sh --print`.
func ToolsDir() string {
	cache := os.Getenv(EnvToolsCache)
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil || home == "" {
				home = os.TempDir()
			}
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "meshplane", "tools")
	}
	return filepath.Join(cache, "k8s-"+KubernetesVersion)
}

// EtcdPath finds the etcd binary: $MESHPLANE_ETCD, else etcd on $PATH, else
// /usr/bin/etcd (Debian's etcd-server).
func EtcdPath() (string, error) {
	if p := os.Getenv(EnvEtcd); p != "" {
		return checkExecutable("etcd", EnvEtcd, p)
	}
	looked := []string{"$PATH"}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/etcd", "/usr/local/bin/etcd"} {
		looked = append(looked, p)
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", &MissingBinaryError{Name: "etcd", Looked: looked, EnvVar: EnvEtcd}
}

// KubeAPIServerPath finds kube-apiserver: $MESHPLANE_KUBE_APISERVER, else
// ToolsDir()/kube-apiserver.
func KubeAPIServerPath() (string, error) {
	return toolPath("kube-apiserver", EnvKubeAPIServer)
}

// KubectlPath finds kubectl: $MESHPLANE_KUBECTL, else ToolsDir()/kubectl.
func KubectlPath() (string, error) {
	return toolPath("kubectl", EnvKubectl)
}

func toolPath(name, env string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return checkExecutable(name, env, p)
	}
	p := filepath.Join(ToolsDir(), name)
	if isExecutable(p) {
		return p, nil
	}
	return "", &MissingBinaryError{Name: name, Looked: []string{p}, EnvVar: env}
}

func checkExecutable(name, env, p string) (string, error) {
	if isExecutable(p) {
		return p, nil
	}
	return "", &MissingBinaryError{Name: name, Looked: []string{p + " (from $" + env + ")"}, EnvVar: env}
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// IsMissingBinary reports whether err says a binary is not installed.
func IsMissingBinary(err error) bool {
	var m *MissingBinaryError
	return errors.As(err, &m)
}
