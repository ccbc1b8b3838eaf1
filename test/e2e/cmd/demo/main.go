// Command demo runs Meshplane's main job on one machine: the all-in-one
// management plane with Redis and a management cluster (a real API server
// named mgmt, where registration keeps its KubernetesCluster records), two
// workload clusters (real API servers) holding bookinfo, and one agent per
// cluster. It waits until Meshplane has
// written its DestinationRules in both clusters, prints the kubectl lines
// that show them, and keeps everything running until Ctrl-C.
//
//	go run ./test/e2e/cmd/demo --bin ./bin
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var drs = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}

// mirrorNamespace is where, in the management cluster, registration keeps a
// KubernetesCluster per cluster record: they survive a Redis that restarts
// empty, and translation's safe mode waits for the registered ones.
const mirrorNamespace = "meshplane"

func main() {
	bin := flag.String("bin", "bin", "directory of the built commands (make build)")
	dir := flag.String("dir", ".demo", "directory for the demo's state, logs and kubeconfigs")
	once := flag.Bool("once", false, "exit after the DestinationRules are listed instead of waiting for Ctrl-C")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *bin, *dir, *once); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func run(ctx context.Context, bin, dir string, once bool) error {
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

	step("starting the all-in-one management plane (registration, ingest, translation, distribution); cluster records in mgmt's namespace %s", mirrorNamespace)
	plane, tokens, err := harness.StartPlane(ctx, harness.PlaneOptions{
		BinDir: bin, Dir: dir, RedisAddr: redis.Addr(), Clusters: names, AllInOne: true,
		ManagementKubeconfig: mgmt.Kubeconfig(), MirrorNamespace: mirrorNamespace,
	})
	if err != nil {
		return err
	}
	defer plane.Stop()
	procs := append([]*harness.Process{}, plane.Procs...)

	for _, c := range clusters {
		step("applying bookinfo to %s and starting its agent", c.Name)
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

	step("waiting for Meshplane's DestinationRules")
	start := time.Now()
	for _, c := range clusters {
		for _, svc := range harness.BookinfoServices {
			err := harness.Wait(ctx, 2*time.Minute, fmt.Sprintf("DestinationRule %s in %s", svc, c.Name), func(ctx context.Context) (bool, error) {
				_, err := c.Dynamic().Resource(drs).Namespace(harness.BookinfoNamespace).Get(ctx, svc, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				return err == nil, err
			}, procs...)
			if err != nil {
				return err
			}
		}
	}
	step("all DestinationRules written in %s", time.Since(start).Round(time.Millisecond))

	kubectl, err := kubetest.KubectlPath()
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Println("Meshplane translated every discovered Service into a DestinationRule in its own cluster:")
	for _, c := range clusters {
		args := []string{"--kubeconfig", c.Kubeconfig(), "get", "destinationrules", "-n", harness.BookinfoNamespace, "-L", "meshplane.dev/cluster,meshplane.dev/managed-by"}
		fmt.Printf("\n$ %s %s\n", kubectl, join(args))
		out, err := exec.CommandContext(ctx, kubectl, args...).CombinedOutput()
		fmt.Print(string(out))
		if err != nil {
			return fmt.Errorf("kubectl: %w", err)
		}
	}
	fmt.Printf("\nTry:\n  %s --kubeconfig %s get destinationrule reviews -n bookinfo -o yaml\n", kubectl, clusters[0].Kubeconfig())
	fmt.Printf("  %s --kubeconfig %s delete service ratings -n bookinfo   # its DestinationRule goes too\n", kubectl, clusters[0].Kubeconfig())
	fmt.Printf("  %s --kubeconfig %s get kubernetesclusters -n %s   # the clusters every output expects\n", kubectl, mgmt.Kubeconfig(), mirrorNamespace)
	fmt.Printf("  %s --kubeconfig %s get resourcerecords -n %s      # the last valid version of every resource\n", kubectl, mgmt.Kubeconfig(), mirrorNamespace)
	fmt.Printf("A policy applied in the management cluster may select both clusters; one applied in east changes only east, unless a ScopeGrant in the management cluster grants more (docs/concepts.md#scope).\n")
	fmt.Printf("Logs are in %s\n", logs)
	if once {
		return nil
	}
	fmt.Println("\nEverything keeps running until Ctrl-C.")
	<-ctx.Done()
	step("stopping")
	return nil
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
