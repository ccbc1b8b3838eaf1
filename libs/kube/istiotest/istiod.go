package istiotest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// IstioVersion is the istio.io/istio version tools/istiod builds. Keep it
// in step with tools/istiod/go.mod and hack/tools.sh.
const IstioVersion = "v0.0.0-20260827124520-eed52ebb66ad"

// Environment variables read by this package.
const (
	EnvPilotDiscovery = "MESHPLANE_PILOT_DISCOVERY"
	EnvSkip           = "MESHPLANE_SKIP_ISTIO_TESTS"
)

// RootNamespace is where istiod runs and reads its mesh-wide config.
const RootNamespace = "istio-system"

const howToGet = "run `make tools` or `bash hack/tools.sh` from the repository root " +
	"(it builds pilot-discovery from tools/istiod, istio.io/istio " + IstioVersion +
	", into the tools cache: about 20 minutes of CPU once), or set $" + EnvSkip + "=1 to skip the tests that need istiod"

// PilotDiscoveryPath finds the istiod binary: $MESHPLANE_PILOT_DISCOVERY,
// else kubetest.ToolsDir()/pilot-discovery.
func PilotDiscoveryPath() (string, error) {
	p := os.Getenv(EnvPilotDiscovery)
	if p == "" {
		p = filepath.Join(kubetest.ToolsDir(), "pilot-discovery")
	}
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("istiotest: pilot-discovery not found at %s (set $%s to override): %s", p, EnvPilotDiscovery, howToGet)
	}
	return p, nil
}

// Options configure one istiod.
type Options struct {
	// TrustDomain of the mesh; cluster.local when empty.
	TrustDomain string
	// ClusterID is istiod's cluster name (the CLUSTER_ID proxies send);
	// "Kubernetes" when empty, Istio's default.
	ClusterID string
	// Network is the cluster's network, for multi-network meshes: istiod
	// reads it from the label topology.istio.io/network of its namespace,
	// which Run sets, and proxies that connect say it in their metadata
	// (Proxy.Network defaults to it). Empty: no network, Istio's default.
	Network string
	// FailOnRejections makes Start's cleanup fail the test when istiod's
	// log has a line that rejects or ignores config (see Rejections).
	FailOnRejections bool
}

// NetworkLabel is the label of istiod's namespace that names its
// cluster's network.
const NetworkLabel = "topology.istio.io/network"

// Istiod is one running pilot-discovery.
type Istiod struct {
	Target
	// HTTPAddr serves /ready and /debug.
	HTTPAddr string
	logPath  string
	cmd      *exec.Cmd
	done     chan struct{}
	waitErr  error
}

// SkipIfAsked skips t when MESHPLANE_SKIP_ISTIO_TESTS=1 or
// MESHPLANE_SKIP_KUBE_TESTS=1. Call it before starting the API server, so
// that a skipped test does not start one for nothing.
func SkipIfAsked(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvSkip) == "1" {
		t.Skipf("%s=1: skipping a test that needs a real istiod", EnvSkip)
	}
	if os.Getenv(kubetest.EnvSkip) == "1" {
		t.Skipf("%s=1: skipping a test that needs a real kube-apiserver and istiod", kubetest.EnvSkip)
	}
}

// Start starts istiod against cluster for a test (Run, with the test's
// temporary directory) and stops it in t.Cleanup, printing its log's tail
// when the test failed, and failing the test when opts.FailOnRejections
// and its log rejects or ignores config. It fails the test, with a
// how-to, when the binary is missing.
func Start(t testing.TB, cluster *kubetest.Cluster, opts Options) *Istiod {
	t.Helper()
	SkipIfAsked(t)
	id, err := Run(t.Context(), cluster, t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		id.Stop()
		if opts.FailOnRejections {
			if lines := id.Rejections(); len(lines) > 0 {
				t.Errorf("istiod of cluster %s rejected or ignored config (log %s):\n%s", id.ClusterID, id.logPath, strings.Join(lines, "\n"))
			}
		}
		if t.Failed() {
			t.Logf("istiod of cluster %s: log %s ends with:\n%s", id.ClusterID, id.logPath, id.LogTail(40))
		}
	})
	return id
}

// Run starts istiod against cluster, its mesh config (mesh.yaml) and log
// (istiod.log) in dir, and returns once /ready answers 200; Stop stops it. It creates the
// istio-system namespace (labelled with opts.Network). ctx bounds the
// start only. It does not depend on a test, so the demo uses it too.
func Run(ctx context.Context, cluster *kubetest.Cluster, dir string, opts Options) (*Istiod, error) {
	bin, err := PilotDiscoveryPath()
	if err != nil {
		return nil, err
	}
	if err := prepareNamespace(ctx, cluster, opts.Network); err != nil {
		return nil, err
	}
	td := opts.TrustDomain
	if td == "" {
		td = "cluster.local"
	}
	meshConfig := filepath.Join(dir, "mesh.yaml")
	// Locality load balancing is on by default; the root namespace is
	// istiod's. No tracing, no access log: nothing else to talk to.
	mc := "trustDomain: " + td + "\nrootNamespace: " + RootNamespace + "\nenableTracing: false\ndefaultConfig:\n  discoveryAddress: 127.0.0.1:15012\n"
	if err := os.WriteFile(meshConfig, []byte(mc), 0o644); err != nil {
		return nil, err
	}
	// istiod cannot take passed listeners: free ports are picked, and the
	// start is retried when another process took one first.
	for attempt := 1; ; attempt++ {
		id, err := launch(ctx, bin, dir, cluster.Kubeconfig(), meshConfig, opts)
		if err == nil {
			return id, nil
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return nil, fmt.Errorf("istiotest: %w", err)
		}
	}
}

// prepareNamespace creates istiod's namespace, or labels the one there,
// with the network.
func prepareNamespace(ctx context.Context, cluster *kubetest.Cluster, network string) error {
	nss := cluster.Clientset().CoreV1().Namespaces()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: RootNamespace}}
	if network != "" {
		ns.Labels = map[string]string{NetworkLabel: network}
	}
	_, err := nss.Create(ctx, ns, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err) && network != "":
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, NetworkLabel, network)
		if _, err := nss.Patch(ctx, RootNamespace, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("istiotest: label namespace %s with network %s: %w", RootNamespace, network, err)
		}
	case err != nil && !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("istiotest: create namespace %s: %w", RootNamespace, err)
	}
	return nil
}

// launch starts istiod once and waits until it is ready; it stops it at
// once when it does not get ready.
func launch(ctx context.Context, bin, dir, kubeconfig, meshConfig string, opts Options) (*Istiod, error) {
	ports := make([]string, 4)
	for i := range ports {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		ports[i] = addr
	}
	id := &Istiod{Target: Target{XDSAddr: ports[0], ClusterID: opts.ClusterID, Network: opts.Network}, HTTPAddr: ports[1], done: make(chan struct{})}
	if id.ClusterID == "" {
		id.ClusterID = "Kubernetes"
	}
	// A retried start appends to the same log.
	id.logPath = filepath.Join(dir, "istiod.log")
	f, err := os.OpenFile(id.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := []string{"discovery",
		"--kubeconfig", kubeconfig,
		"--meshConfig", meshConfig,
		"--networksConfig", filepath.Join(dir, "meshNetworks.yaml"), // absent: no networks
		"--grpcAddr", id.XDSAddr,
		"--httpAddr", id.HTTPAddr,
		"--monitoringAddr", ports[2],
		"--httpsAddr", ports[3],
		"--secureGRPCAddr", "",
		// ControlZ's fixed 9876 would be taken by a second istiod.
		"--ctrlz_port", "0",
		"--clusterID", id.ClusterID,
		"--domain", "cluster.local",
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		"POD_NAMESPACE="+RootNamespace,
		"POD_NAME=istiod-test",
		"ENABLE_CA_SERVER=false",
		"REVISION=default",
	)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	id.cmd = cmd
	go func() {
		id.waitErr = cmd.Wait()
		f.Close()
		close(id.done)
	}()
	client := &http.Client{Timeout: 2 * time.Second}
	err = kubetest.WaitFor(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		if err := id.Exited(); err != nil {
			return false, err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+id.HTTPAddr+"/ready", nil)
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		id.Stop()
		return nil, fmt.Errorf("istiod is not ready: %v; log ends with:\n%s", err, id.LogTail(30))
	}
	return id, nil
}

// LogPath is the file istiod writes its log to.
func (id *Istiod) LogPath() string { return id.logPath }

// Exited returns an error when istiod has exited (crashed), saying how,
// and nil while it runs.
func (id *Istiod) Exited() error {
	select {
	case <-id.done:
		if p := id.Panic(); p != "" {
			return fmt.Errorf("istiod exited (%v) with a panic:\n%s", id.waitErr, p)
		}
		return fmt.Errorf("istiod exited (%v); log ends with:\n%s", id.waitErr, id.LogTail(30))
	default:
		return nil
	}
}

// Panic returns the panic message in istiod's log and the first frames
// of its stack, or "" when there is none.
func (id *Istiod) Panic() string {
	lines := strings.Split(id.Log(), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic: ") {
			end := min(len(lines), i+12)
			return strings.Join(lines[i:end], "\n")
		}
	}
	return ""
}

// WaitExit waits up to timeout for istiod to exit and returns Exited's
// error, or nil when it is still running: after a broken xDS stream, it
// tells a crash from a closed connection.
func (id *Istiod) WaitExit(timeout time.Duration) error {
	select {
	case <-id.done:
	case <-time.After(timeout):
	}
	return id.Exited()
}

// Log returns istiod's whole log.
func (id *Istiod) Log() string {
	b, _ := os.ReadFile(id.logPath)
	return string(b)
}

// LogTail returns the last n lines of istiod's log.
func (id *Istiod) LogTail(n int) string {
	lines := strings.Split(strings.TrimRight(id.Log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop stops istiod: SIGTERM, and SIGKILL after 10 s.
func (id *Istiod) Stop() {
	select {
	case <-id.done:
		return
	default:
	}
	_ = syscall.Kill(-id.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-id.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-id.cmd.Process.Pid, syscall.SIGKILL)
		<-id.done
	}
}

// freeAddr returns a 127.0.0.1 address with a port free right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
