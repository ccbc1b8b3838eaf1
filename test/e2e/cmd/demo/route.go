package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	// Istio's routes name this retry predicate; protojson needs its type.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	"github.com/meshplane/meshplane/libs/kube/istiotest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	"google.golang.org/protobuf/encoding/protojson"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// routeCommand is the name the demo copies itself to, in .demo/bin, for
// `meshplane-demo route`.
const routeCommand = "meshplane-demo"

const routeUsage = `Usage: meshplane-demo route [flags] HOST:PORT

Connects to the demo's istiod of a workload cluster as the sidecar of a
bookinfo pod (its IP, labels and service account, read from the cluster),
as that pod's Envoy would, and prints the route istiod gives it for
HOST:PORT: the virtual host HOST in the route configuration PORT. It needs
the demo running with istiod (make demo; see --istiod).

  meshplane-demo route reviews.bookinfo.svc.cluster.local:9080
  meshplane-demo route --cluster west --pod bookinfo/reviews-v1-0 ratings.bookinfo.svc.cluster.local:9080
  meshplane-demo route --until 'retries 5' reviews.bookinfo.svc.cluster.local:9080

istiod pushes a change a little after it reaches the cluster's API server;
--until waits for istiod's pushes until the summary contains the text.

Flags:
`

// routeMain runs `meshplane-demo route` and returns the exit code.
func routeMain(args []string) int {
	fs := flag.NewFlagSet("route", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), routeUsage)
		fs.PrintDefaults()
	}
	dir := fs.String("dir", ".demo", "the demo's directory")
	cluster := fs.String("cluster", "east", "workload cluster whose istiod to ask")
	pod := fs.String("pod", "bookinfo/productpage-v1-0", "namespace/name of the pod whose sidecar to play")
	output := fs.String("o", "text", "text (a summary) or json (Envoy's virtual host)")
	until := fs.String("until", "", "wait, up to --timeout, until istiod pushes a route whose summary contains this text")
	timeout := fs.Duration("timeout", 30*time.Second, "how long --until waits")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || (*output != "text" && *output != "json") {
		fs.Usage()
		return 2
	}
	if err := showRoute(*dir, *cluster, *pod, fs.Arg(0), *output, *until, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "meshplane-demo route:", err)
		return 1
	}
	return 0
}

func showRoute(dir, cluster, pod, hostPort, output, until string, timeout time.Duration) error {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("%q: want HOST:PORT, e.g. reviews.bookinfo.svc.cluster.local:9080", hostPort)
	}
	namespace, name, ok := strings.Cut(pod, "/")
	if !ok || namespace == "" || name == "" {
		return fmt.Errorf("--pod %q: want namespace/name", pod)
	}
	b, err := os.ReadFile(filepath.Join(dir, istiodStateFile))
	if err != nil {
		return fmt.Errorf("no istiod state in %s (is the demo running, with istiod?): %w", dir, err)
	}
	var state istiodState
	if err := json.Unmarshal(b, &state); err != nil {
		return fmt.Errorf("%s: %w", istiodStateFile, err)
	}
	target, ok := state[cluster]
	if !ok {
		return fmt.Errorf("--cluster %q: the demo runs istiod in %v", cluster, clusterNames(state))
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: filepath.Join(dir, "kubeconfig")},
		&clientcmd.ConfigOverrides{CurrentContext: cluster}).ClientConfig()
	if err != nil {
		return fmt.Errorf("the kube context %s of the demo: %w", cluster, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	proxy, err := harness.Sidecar(ctx, cs, namespace, name)
	if err != nil {
		return err
	}
	ads, err := target.Connect(ctx, proxy)
	if err != nil {
		return err
	}
	defer ads.Close()
	rc, _, err := ads.AwaitRoutes(port, timeout, func(rc *routev3.RouteConfiguration) bool {
		vh := istiotest.VirtualHost(rc, host)
		return until == "" || vh != nil && strings.Contains(istiotest.DescribeVirtualHost(vh), until)
	})
	if err != nil && rc == nil {
		return fmt.Errorf("istiod of %s at %s: %w", cluster, target.XDSAddr, err)
	}
	vh := istiotest.VirtualHost(rc, host)
	if vh == nil {
		var hosts []string
		for _, v := range rc.GetVirtualHosts() {
			hosts = append(hosts, v.GetName())
		}
		return fmt.Errorf("the sidecar of %s has no virtual host for %s in its route configuration %q; it has: %s", pod, host, port, strings.Join(hosts, ", "))
	}
	if err != nil {
		return fmt.Errorf("no route with %q within %v; the last istiod pushed:\n%s", until, timeout, istiotest.DescribeVirtualHost(vh))
	}
	if output == "json" {
		out, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(vh)
		if err != nil {
			return err
		}
		fmt.Println(string(out))
		return nil
	}
	fmt.Printf("istiod of %s (%s) gives the sidecar of %s (%s) this route for %s, in route configuration %q:\n",
		cluster, target.XDSAddr, pod, proxy.IP, hostPort, port)
	fmt.Print(istiotest.DescribeVirtualHost(vh))
	return nil
}

func clusterNames(s istiodState) []string { return slices.Sorted(maps.Keys(s)) }
