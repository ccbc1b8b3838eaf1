// Command demo runs Meshplane's main job on one machine: the all-in-one
// management plane with Redis and a management cluster (a real API server
// named mgmt, where registration keeps its KubernetesCluster records and
// ingest watches for policies), two workload clusters (real API servers)
// holding istiod's objects and bookinfo, and one agent per cluster. It
// waits until Meshplane has written its DestinationRules in both clusters,
// applies a VirtualMesh, a TrafficPolicy and an AccessPolicy in mgmt, waits
// for the VirtualService and AuthorizationPolicy they make in both
// clusters, writes a meshctl context (.demo/meshctl.yaml), a kubeconfig with
// a context per cluster (.demo/kubeconfig) and the shell lines that select
// them (.demo/env), prints how to use meshctl and kubectl, and keeps
// everything running until Ctrl-C.
//
// With --istiod (on, or auto when pilot-discovery is built), each workload
// cluster also runs a real istiod on its API server, the bookinfo pods get
// IPs, and the demo prints the route istiod gives productpage's sidecar
// for reviews; `meshplane-demo route` (the demo's own binary, copied to
// .demo/bin) prints it for any pod and host while the demo runs.
//
//	go run ./test/e2e/cmd/demo --bin ./bin [--istiod auto|on|off]
//	go run ./test/e2e/cmd/demo route [flags] HOST:PORT
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/meshplane/meshplane/libs/kube/istiotest"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

var (
	drs                   = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}
	virtualServices       = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}
	authorizationPolicies = schema.GroupVersionResource{Group: "security.istio.io", Version: "v1", Resource: "authorizationpolicies"}
)

// mirrorNamespace is where, in the management cluster, registration keeps a
// KubernetesCluster per cluster record: they survive a Redis that restarts
// empty, and translation's safe mode waits for the registered ones.
const mirrorNamespace = "meshplane"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "route" {
		os.Exit(routeMain(os.Args[2:]))
	}
	bin := flag.String("bin", "bin", "directory of the built commands (make build)")
	dir := flag.String("dir", ".demo", "directory for the demo's state, logs and kubeconfigs")
	once := flag.Bool("once", false, "exit after the DestinationRules are listed instead of waiting for Ctrl-C")
	consoleAddr := flag.String("console-addr", "127.0.0.1:9443", "address of the operator console (the all-in-one's --console-addr)")
	istiod := flag.String("istiod", "auto", "run a real istiod (pilot-discovery) per workload cluster: on, off, or auto (when it is built in the tools cache; the demo never builds it)")
	flag.Parse()
	mode, err := parseIstiodMode(*istiod)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *bin, *dir, *consoleAddr, *once, mode); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func run(ctx context.Context, bin, dir, consoleAddr string, once bool, mode istiodMode) error {
	bin, _ = filepath.Abs(bin)
	dir, _ = filepath.Abs(dir)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	names := []string{"east", "west"}
	withIstiod, why, err := mode.decide()
	if err != nil {
		return err
	}
	step("%s", why)

	step("starting two workload clusters (kube-apiserver + etcd each): %v", names)
	var clusters []*kubetest.Cluster
	for _, n := range names {
		c, err := kubetest.StartCluster(ctx, kubetest.Options{Name: n, LogDir: logs})
		if err != nil {
			return fmt.Errorf("start cluster %s: %w", n, err)
		}
		defer c.Stop()
		clusters = append(clusters, c)
	}

	step("starting the management cluster (kube-apiserver + etcd): mgmt")
	mgmt, err := kubetest.StartCluster(ctx, kubetest.Options{Name: "mgmt", LogDir: logs, SkipIstioCRDs: true})
	if err != nil {
		return fmt.Errorf("start cluster mgmt: %w", err)
	}
	defer mgmt.Stop()
	if _, err := mgmt.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mirrorNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s in mgmt: %w", mirrorNamespace, err)
	}

	step("starting redis-server")
	redis, err := redistest.StartServer(ctx, redistest.Options{Dir: filepath.Join(dir, "redis")})
	if err != nil {
		return err
	}
	defer redis.Close()

	consoleArgs, err := consoleSetup(ctx, dir, consoleAddr, mgmt)
	if err != nil {
		return err
	}
	step("starting the all-in-one management plane (registration, ingest, translation, distribution, and the console on https://%s); cluster records in mgmt's namespace %s", consoleAddr, mirrorNamespace)
	plane, tokens, err := harness.StartPlane(ctx, harness.PlaneOptions{
		BinDir: bin, Dir: dir, RedisAddr: redis.Addr(), Clusters: names, AllInOne: true,
		ManagementKubeconfig: mgmt.Kubeconfig(), MirrorNamespace: mirrorNamespace,
		AllInOneArgs: consoleArgs,
	})
	if err != nil {
		return err
	}
	defer plane.Stop()
	procs := append([]*harness.Process{}, plane.Procs...)

	step("the management plane listens on %s; writing a meshctl client certificate and the meshctl context %q (%s)", plane.Registration, demoContext, filepath.Join(dir, "meshctl.yaml"))
	meshctlConfig, err := writeMeshctlContext(ctx, bin, dir, plane)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, append(append([]*kubetest.Cluster{}, clusters...), mgmt)); err != nil {
		return err
	}

	for _, c := range clusters {
		step("applying istiod (its Deployment, Pod and mesh ConfigMap), an east-west gateway and bookinfo to %s, and starting its agent", c.Name)
		if err := applyIstio(ctx, c); err != nil {
			return err
		}
		if err := c.ApplyYAML(ctx, harness.Bookinfo(c.Name)); err != nil {
			return err
		}
		agent, err := plane.StartAgent(harness.AgentOptions{
			BinDir: bin, Cluster: c.Name, Token: tokens[c.Name], Kubeconfig: c.Kubeconfig(),
			LogDir: logs, StateDir: filepath.Join(dir, "agent-"+c.Name),
		})
		if err != nil {
			return err
		}
		defer agent.Stop()
		procs = append(procs, agent)
	}
	var istiods []*istiotest.Istiod
	if withIstiod {
		step("giving the bookinfo pods IPs (as kubelets would) and starting a real istiod per workload cluster")
		if istiods, err = startIstiods(ctx, dir, logs, clusters); err != nil {
			return err
		}
		defer func() {
			for _, id := range istiods {
				id.Stop()
			}
		}()
	}

	if err := applyAndWait(ctx, clusters, mgmt, procs); err != nil {
		return err
	}

	kubectl, err := kubetest.KubectlPath()
	if err != nil {
		return err
	}
	paths := []string{bin, filepath.Dir(kubectl)}
	if withIstiod {
		paths = append(paths, filepath.Join(dir, "bin"))
	}
	env := demoEnv(paths, meshctlConfig, kubeconfig)
	if err := showResults(ctx, kubectl, kubeconfig, clusters); err != nil {
		return err
	}
	if withIstiod {
		if err := showSidecarRoute(istiods, clusters[0]); err != nil {
			return err
		}
	}

	// The env file is written last: it also says the demo is ready (the
	// walkthrough's test waits for it).
	if err := os.WriteFile(filepath.Join(dir, "env"), []byte(env), 0o644); err != nil {
		return err
	}
	printUsage(env, dir, logs, withIstiod)
	printConsole(consoleAddr, plane.PKI.RootFile())
	if once {
		return nil
	}
	fmt.Println("\nEverything keeps running until Ctrl-C.")
	<-ctx.Done()
	step("stopping")
	return nil
}

// applyAndWait waits for Meshplane's DestinationRules in every cluster,
// then applies the management cluster's policies and waits for the
// VirtualService and AuthorizationPolicy they make in every cluster.
func applyAndWait(ctx context.Context, clusters []*kubetest.Cluster, mgmt *kubetest.Cluster, procs []*harness.Process) error {
	step("waiting for Meshplane's DestinationRules")
	start := time.Now()
	for _, c := range clusters {
		for _, svc := range harness.BookinfoServices {
			if err := waitFor(ctx, c, drs, svc, procs); err != nil {
				return err
			}
		}
	}
	step("all DestinationRules written in %s", time.Since(start).Round(time.Millisecond))

	step("applying in mgmt: VirtualMesh %s/demo (shared mTLS, federation, global access ENABLED), TrafficPolicy and AccessPolicy bookinfo/reviews", mirrorNamespace)
	if err := mgmt.ApplyYAML(ctx, []byte(mgmtPolicies)); err != nil {
		return fmt.Errorf("apply the policies to mgmt: %w", err)
	}
	start = time.Now()
	for _, c := range clusters {
		for _, gvr := range []schema.GroupVersionResource{virtualServices, authorizationPolicies} {
			if err := waitFor(ctx, c, gvr, "reviews", procs); err != nil {
				return err
			}
		}
	}
	step("VirtualService and AuthorizationPolicy reviews written in both clusters in %s", time.Since(start).Round(time.Millisecond))

	return nil
}

// showResults prints, with kubectl, what translation wrote in each
// cluster and the policies in mgmt.
func showResults(ctx context.Context, kubectl, kubeconfig string, clusters []*kubetest.Cluster) error {
	show := func(args ...string) error {
		fmt.Printf("\n$ kubectl %s\n", join(args))
		cmd := exec.CommandContext(ctx, kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		out, err := cmd.CombinedOutput()
		fmt.Print(string(out))
		if err != nil {
			return fmt.Errorf("kubectl %s: %w", join(args), err)
		}
		return nil
	}
	fmt.Println()
	fmt.Println("Meshplane translated every discovered Service into a DestinationRule in its own cluster, and the")
	fmt.Println("management cluster's policies into a VirtualService and an AuthorizationPolicy in both:")
	for _, c := range clusters {
		if err := show("--context", c.Name, "get", "destinationrules,virtualservices,authorizationpolicies", "-n", harness.BookinfoNamespace, "-L", "meshplane.dev/cluster"); err != nil {
			return err
		}
	}
	for _, c := range clusters {
		if err := show("--context", c.Name, "get", "authorizationpolicy", "reviews", "-n", harness.BookinfoNamespace, "-o", "jsonpath={.spec}{\"\\n\"}"); err != nil {
			return err
		}
	}
	if err := show("--context", "mgmt", "get", "virtualmeshes,trafficpolicies,accesspolicies", "-A"); err != nil {
		return err
	}

	return nil
}

// printUsage prints how to use meshctl and kubectl against the demo, and
// the route command when istiod runs.
func printUsage(env, dir, logs string, withIstiod bool) {
	routes := ""
	if withIstiod {
		routes = `
  meshplane-demo route reviews.bookinfo.svc.cluster.local:9080   # the route east's istiod gives productpage's sidecar
  meshplane-demo route --cluster west --pod bookinfo/reviews-v1-0 ratings.bookinfo.svc.cluster.local:9080
`
	}
	fmt.Printf(`
Use meshctl and kubectl against the demo (in another shell, from this directory):

%s
  meshctl check                                    # every service serving, east and west connected and current
  meshctl describe policy reviews -n bookinfo --kind AccessPolicy
  meshctl describe destination reviews -n bookinfo --cluster east
  kubectl --context east get destinationrules,virtualservices,authorizationpolicies -n bookinfo
  kubectl --context west get authorizationpolicy reviews -n bookinfo -o yaml
  kubectl --context mgmt get kubernetesclusters -n %[2]s   # the clusters every output expects
  kubectl --context mgmt get accesspolicy reviews -n bookinfo -o yaml   # its status: ACCEPTED, for both clusters
  kubectl --context east delete service ratings -n bookinfo         # its DestinationRule goes too
%[6]s
Or source the same lines: . %[3]s
The kube contexts are east, west (workload clusters) and mgmt (management cluster); the meshctl
context is %[4]q. A policy applied in mgmt may select both clusters; one applied in east changes only
east, unless a ScopeGrant in mgmt grants more (docs/concepts.md#scope). docs/getting-started.md walks
through the rest. Logs are in %[5]s
`, indent(env, "  "), mirrorNamespace, filepath.Join(dir, "env"), demoContext, logs, routes)
}

// demoContext names the meshctl context the demo writes.
const demoContext = "demo"

// writeMeshctlContext issues a client certificate for the meshctl service
// identity from the demo's CA (the plane authorizes every service identity
// of its trust domain) and writes the context with `meshctl config
// set-context`, into dir/meshctl.yaml rather than the user's own config
// file: the demo's port and CA live only as long as the demo. It returns
// the file's path.
func writeMeshctlContext(ctx context.Context, bin, dir string, plane *harness.Plane) (string, error) {
	cert, key, err := plane.PKI.ServiceCert("meshctl")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "meshctl.yaml")
	cmd := exec.CommandContext(ctx, harness.Binary(bin, harness.CmdMeshctl), "config", "set-context", demoContext,
		"--addr", plane.Registration, "--ca-file", plane.PKI.RootFile(), "--cert-file", cert, "--key-file", key,
		"--server-name", "localhost", "--use")
	cmd.Env = append(os.Environ(), "MESHPLANE_CONFIG="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("meshctl config set-context: %w: %s", err, out)
	}
	return path, nil
}

// writeKubeconfig merges the clusters' kubeconfigs into one file with a
// context per cluster, named after it.
func writeKubeconfig(path string, clusters []*kubetest.Cluster) error {
	merged := clientcmdapi.NewConfig()
	for _, c := range clusters {
		cfg, err := clientcmd.LoadFromFile(c.Kubeconfig())
		if err != nil {
			return fmt.Errorf("read the kubeconfig of %s: %w", c.Name, err)
		}
		kc, ok := cfg.Contexts[cfg.CurrentContext]
		if !ok {
			return fmt.Errorf("the kubeconfig of %s has no current context", c.Name)
		}
		merged.Clusters[c.Name] = cfg.Clusters[kc.Cluster]
		merged.AuthInfos[c.Name] = cfg.AuthInfos[kc.AuthInfo]
		merged.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name, Namespace: kc.Namespace}
	}
	merged.CurrentContext = clusters[0].Name
	return clientcmd.WriteToFile(*merged, path)
}

// demoEnv is the shell lines that put paths (meshctl's, kubectl's, and
// meshplane-demo's with istiod) on PATH and point meshctl and kubectl at
// the demo.
func demoEnv(paths []string, meshctlConfig, kubeconfig string) string {
	return fmt.Sprintf("export PATH=%s:\"$PATH\"\nexport MESHPLANE_CONFIG=%s\nexport KUBECONFIG=%s\n",
		strings.Join(paths, ":"), meshctlConfig, kubeconfig)
}

// istiodVersion is the version the istiod objects' image names.
const istiodVersion = "1.24.0"

// demoTrustDomain is the trust domain of both clusters' meshes.
const demoTrustDomain = "cluster.local"

// applyIstio gives c a mesh as discovery sees it: istiod's Deployment, the
// Pod a controller would have made, its mesh ConfigMap, and an east-west
// gateway whose LoadBalancer Service has an external address (nothing
// assigns one in a bare API server, so the demo writes the status). These
// are objects, not processes: discovery needs only them. With --istiod a
// real pilot-discovery runs beside them (startIstiods): light once built
// (about 110 MB resident each), but building it costs a fresh clone about
// 20 CPU-minutes and a 190 MB binary, so the default runs it only when it
// is already built.
func applyIstio(ctx context.Context, c *kubetest.Cluster) error {
	if err := c.ApplyYAML(ctx, harness.IstioControlPlane("", istiodVersion, demoTrustDomain)); err != nil {
		return fmt.Errorf("apply istiod to %s: %w", c.Name, err)
	}
	if err := c.ApplyYAML(ctx, harness.EastWestGateway("network-"+c.Name)); err != nil {
		return fmt.Errorf("apply the east-west gateway to %s: %w", c.Name, err)
	}
	svcs := c.Clientset().CoreV1().Services(harness.IstioNamespace)
	svc, err := svcs.Get(ctx, "istio-eastwestgateway", metav1.GetOptions{})
	if err != nil {
		return err
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "eastwest." + c.Name + ".example.com"}}
	if _, err := svcs.UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set the east-west gateway's address in %s: %w", c.Name, err)
	}
	return nil
}

// mgmtPolicies are what the demo applies in the management cluster: both
// meshes in one VirtualMesh with a shared root, every destination
// federated, deny by default; retries for reviews; and reviews open to
// productpage's service account in both clusters.
const mgmtPolicies = `apiVersion: v1
kind: Namespace
metadata: {name: bookinfo}
---
apiVersion: networking.meshplane.dev/v1
kind: VirtualMesh
metadata: {name: demo, namespace: ` + mirrorNamespace + `}
spec:
  meshes:
  - {name: istiod-istio-system-east, namespace: istio-system}
  - {name: istiod-istio-system-west, namespace: istio-system}
  mtlsConfig:
    shared:
      rootCertificateAuthority:
        generated: {}
  federation:
    permissive: {}
  globalAccessPolicy: ENABLED
---
apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: reviews, namespace: bookinfo}
spec:
  destinationSelector:
  - kubeServiceMatcher:
      labels: {app: reviews}
      namespaces: [bookinfo]
  policy:
    retries: {attempts: 3, perTryTimeout: 2s}
---
` + harness.ReviewsAccessPolicyYAML

// waitFor waits until the object name of gvr exists in c's bookinfo
// namespace.
func waitFor(ctx context.Context, c *kubetest.Cluster, gvr schema.GroupVersionResource, name string, procs []*harness.Process) error {
	return harness.Wait(ctx, 2*time.Minute, fmt.Sprintf("%s %s in %s", gvr.Resource, name, c.Name), func(ctx context.Context) (bool, error) {
		_, err := c.Dynamic().Resource(gvr).Namespace(harness.BookinfoNamespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}, procs...)
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

func join(args []string) string {
	out := ""
	for i, a := range args {
		if i > 0 {
			out += " "
		}
		out += a
	}
	return out
}
