package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/meshplane/meshplane/libs/kube/istiotest"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/test/e2e/harness"
)

// istiodMode is the --istiod flag: whether the demo runs a real istiod
// (pilot-discovery) per workload cluster.
type istiodMode string

const (
	// istiodAuto runs istiod when pilot-discovery is already built (by
	// `make tools`, `make test` or `make demo ISTIOD=on`), and never
	// builds it: the first build costs about 20 CPU-minutes.
	istiodAuto istiodMode = "auto"
	istiodOn   istiodMode = "on"
	istiodOff  istiodMode = "off"
)

func parseIstiodMode(s string) (istiodMode, error) {
	switch strings.ToLower(s) {
	case "auto", "":
		return istiodAuto, nil
	case "on", "1", "true", "yes":
		return istiodOn, nil
	case "off", "0", "false", "no":
		return istiodOff, nil
	}
	return "", fmt.Errorf("--istiod %q: want auto, on or off", s)
}

// decide says whether to run istiod, and why, in a line for the user; an
// error when it was asked for and is not built.
func (m istiodMode) decide() (bool, string, error) {
	path, err := istiotest.PilotDiscoveryPath()
	switch {
	case m == istiodOff:
		return false, "istiod: off (--istiod=off); the workload clusters hold istiod's objects only", nil
	case err == nil:
		return true, "istiod: running a real istiod (" + path + ") per workload cluster", nil
	case m == istiodOn:
		return false, "", fmt.Errorf("--istiod=on: %w", err)
	}
	return false, "istiod: not built, so the workload clusters hold istiod's objects only; `make demo ISTIOD=on` builds it once (about 20 CPU-minutes) and runs it", nil
}

// istiodStateFile, in the demo's directory, holds where each cluster's
// istiod serves xDS, for `meshplane-demo route`.
const istiodStateFile = "istiod.json"

// istiodState is what istiodStateFile holds: by cluster name, the istiod
// to dial and its log.
type istiodState map[string]struct {
	istiotest.Target
	Log string `json:"log"`
}

// startIstiods gives each workload cluster's bookinfo pods IPs (as
// kubelets would: istiod finds a proxy's pod by its IP) and runs a real
// istiod against its API server, with the cluster's network and the demo's
// trust domain, its log in logs/istiod-<cluster>/istiod.log. It writes
// istiodStateFile, and copies the demo's own binary to dir/bin as
// meshplane-demo, for `meshplane-demo route` while the demo runs.
func startIstiods(ctx context.Context, dir, logs string, clusters []*kubetest.Cluster) ([]*istiotest.Istiod, error) {
	var ids []*istiotest.Istiod
	stopAll := func() {
		for _, id := range ids {
			id.Stop()
		}
	}
	state := istiodState{}
	for i, c := range clusters {
		if err := harness.RunPods(ctx, c, harness.BookinfoNamespace, i+1); err != nil {
			stopAll()
			return nil, err
		}
		idDir := filepath.Join(logs, "istiod-"+c.Name)
		if err := os.MkdirAll(idDir, 0o755); err != nil {
			stopAll()
			return nil, err
		}
		opts := harness.IstiodOptions(c, demoTrustDomain)
		id, err := istiotest.Run(ctx, c, idDir, opts)
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("istiod of %s: %w", c.Name, err)
		}
		ids = append(ids, id)
		s := state[c.Name]
		s.Target, s.Log = id.Target, id.LogPath()
		state[c.Name] = s
		step("istiod of %s: xDS on %s, network %s, log %s", c.Name, id.XDSAddr, id.Network, id.LogPath())
	}
	b, err := json.MarshalIndent(state, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, istiodStateFile), append(b, '\n'), 0o644)
	}
	if err == nil {
		err = copySelf(filepath.Join(dir, "bin", routeCommand))
	}
	if err != nil {
		stopAll()
		return nil, err
	}
	return ids, nil
}

// copySelf copies the running demo binary to path: `go run` removes its
// own copy when the demo exits, and the route command needs one on PATH.
func copySelf(path string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// showSidecarRoute prints the route east's istiod gives productpage's
// sidecar for reviews:9080 once it carries the demo's TrafficPolicy (3
// retries), and what each istiod's log says about Meshplane's objects.
func showSidecarRoute(ids []*istiotest.Istiod, east *kubetest.Cluster) error {
	const pod, host = "productpage-v1-0", "reviews.bookinfo.svc.cluster.local"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := harness.Sidecar(ctx, east.Clientset(), harness.BookinfoNamespace, pod)
	if err != nil {
		return err
	}
	ads, err := ids[0].Connect(ctx, p)
	if err != nil {
		return err
	}
	defer ads.Close()
	rc, _, err := ads.AwaitRoutes("9080", 30*time.Second, func(rc *routev3.RouteConfiguration) bool {
		vh := istiotest.VirtualHost(rc, host)
		for _, r := range vh.GetRoutes() {
			if r.GetRoute().GetRetryPolicy().GetNumRetries().GetValue() == 3 {
				return true
			}
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("the route istiod gives %s's sidecar for %s:9080 has no 3 retries: %w", pod, host, err)
	}
	fmt.Printf("\nistiod read Meshplane's objects from east's API server; the route it gives the sidecar of %s for %s:9080\n(fetched over xDS as that Envoy would; no Envoy runs):\n\n", pod, host)
	fmt.Print(indent(istiotest.DescribeVirtualHost(istiotest.VirtualHost(rc, host)), "  ") + "\n")
	for _, id := range ids {
		if lines := id.Rejections(); len(lines) > 0 {
			fmt.Printf("\nistiod of %s rejected or ignored config (%s):\n%s\n", id.ClusterID, id.LogPath(), indent(strings.Join(lines, "\n"), "  "))
		} else {
			fmt.Printf("istiod of %s: no log line rejects or ignores config (%s)\n", id.ClusterID, id.LogPath())
		}
	}
	return nil
}
