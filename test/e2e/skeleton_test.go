package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var destinationRules = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}

// TestWalkingSkeleton runs the four services and two agents as separate
// processes against two real API servers and a real Redis: every bookinfo
// Service gets Meshplane's DestinationRule in its cluster, and deleting a
// Service deletes its DestinationRule.
func TestWalkingSkeleton(t *testing.T) {
	harness.RequireE2E(t)
	for _, mode := range []struct {
		name     string
		allInOne bool
	}{{"separate-processes", false}, {"all-in-one", true}} {
		t.Run(mode.name, func(t *testing.T) {
			runSkeleton(t, mode.allInOne)
		})
	}
}

// estate is a running management plane with two clusters holding bookinfo
// and one agent each.
type estate struct {
	clusters []*kubetest.Cluster
	// mgmt is the management cluster, when the estate has one.
	mgmt  *kubetest.Cluster
	plane *harness.Plane
	procs []*harness.Process
	// envoy is the address of the Envoy port (access logs, metrics) of
	// each agent estateOptions.envoy named.
	envoy map[string]string
}

// estateOptions say what startEstateWith starts besides two workload
// clusters with bookinfo, Redis, the plane and an agent per cluster.
type estateOptions struct {
	// allInOne runs the plane as one process instead of four.
	allInOne bool
	// mgmt adds a management cluster: a third API server, whose Meshplane
	// resources the plane watches.
	mgmt bool
	// federated makes each workload cluster harness.FederationReady (istiod's
	// objects and an east-west gateway with an address) before its agent
	// starts.
	federated bool
	// envoy names the clusters whose agents get an Envoy port that the
	// test plays the sidecars on (estate.envoy).
	envoy []string
}

// startEstate starts two API servers with bookinfo, Redis, the management
// plane (four processes, or the all-in-one) and one agent per cluster.
func startEstate(t *testing.T, allInOne bool) *estate {
	return startEstateWith(t, estateOptions{allInOne: allInOne})
}

// startEstateWith is startEstate with what o adds.
func startEstateWith(t *testing.T, o estateOptions) *estate {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	opts := []kubetest.Options{{Name: "east"}, {Name: "west"}}
	if o.mgmt {
		opts = append(opts, kubetest.Options{Name: "mgmt", SkipIstioCRDs: true})
	}
	clusters := kubetest.StartMany(t, opts...)
	e := &estate{clusters: clusters, envoy: map[string]string{}}
	if o.mgmt {
		e.clusters, e.mgmt = clusters[:2], clusters[2]
	}
	redis := redistest.Start(t)

	po := harness.PlaneOptions{BinDir: binDir, Dir: dir, RedisAddr: redis.Addr(), Clusters: []string{"east", "west"}, AllInOne: o.allInOne}
	if e.mgmt != nil {
		po.ManagementKubeconfig = e.mgmt.Kubeconfig()
	}
	plane, tokens, err := harness.StartPlane(ctx, po)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	e.plane = plane
	e.procs = append([]*harness.Process{}, plane.Procs...)

	for i, c := range e.clusters {
		if err := c.ApplyYAML(ctx, harness.Bookinfo(c.Name)); err != nil {
			t.Fatalf("apply bookinfo to %s: %v", c.Name, err)
		}
		if o.federated {
			if err := harness.FederationReady(ctx, c, i); err != nil {
				t.Fatal(err)
			}
		}
		ao := harness.AgentOptions{
			BinDir: binDir, Cluster: c.Name, Token: tokens[c.Name], Kubeconfig: c.Kubeconfig(),
			LogDir: filepath.Join(dir, "logs"), StateDir: filepath.Join(dir, "agent-"+c.Name),
		}
		if slices.Contains(o.envoy, c.Name) {
			if ao.Envoy, err = harness.Listen(); err != nil {
				t.Fatal(err)
			}
			e.envoy[c.Name] = ao.Envoy.Addr().String()
		}
		agent, err := plane.StartAgent(ao)
		if ao.Envoy != nil {
			ao.Envoy.Close() // the agent holds its own copy
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(agent.Stop)
		e.procs = append(e.procs, agent)
	}
	return e
}

// startOneCluster starts the plane po describes (BinDir and Dir are set
// here) with an all-in-one process, and an agent for c, which gets
// bookinfo. c must be po's only registered cluster.
func startOneCluster(t *testing.T, po harness.PlaneOptions, c *kubetest.Cluster) (*harness.Plane, []*harness.Process) {
	t.Helper()
	ctx := t.Context()
	po.BinDir, po.Dir, po.Clusters, po.AllInOne = binDir, t.TempDir(), []string{c.Name}, true
	plane, tokens, err := harness.StartPlane(ctx, po)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	if err := c.ApplyYAML(ctx, harness.Bookinfo(c.Name)); err != nil {
		t.Fatal(err)
	}
	agent, err := plane.StartAgent(harness.AgentOptions{
		BinDir: binDir, Cluster: c.Name, Token: tokens[c.Name], Kubeconfig: c.Kubeconfig(),
		LogDir: filepath.Join(po.Dir, "logs"), StateDir: filepath.Join(po.Dir, "agent-"+c.Name),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Stop)
	return plane, append([]*harness.Process{agent}, plane.Procs...)
}

// grantScope applies, in the management cluster, a ScopeGrant that lets the
// resources of clusters change every cluster, and waits until translation
// accepted it.
func grantScope(t testing.TB, mgmt *kubetest.Cluster, procs []*harness.Process, clusters ...string) {
	t.Helper()
	ctx := t.Context()
	if err := mgmt.ApplyYAML(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: meshplane}
---
apiVersion: multicluster.meshplane.dev/v1
kind: ScopeGrant
metadata: {name: e2e, namespace: meshplane}
spec:
  clusters: [%s]
  targets:
  - {}
`, strings.Join(clusters, ", ")))); err != nil {
		t.Fatal(err)
	}
	err := harness.Wait(ctx, 60*time.Second, "the ScopeGrant ACCEPTED", func(ctx context.Context) (bool, error) {
		u, err := mgmt.Dynamic().Resource(scopeGrants).Namespace("meshplane").Get(ctx, "e2e", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		state, _, _ := unstructured.NestedString(u.Object, "status", "state")
		return state == "ACCEPTED", fmt.Errorf("status %v", u.Object["status"])
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
}

var scopeGrants = schema.GroupVersionResource{Group: "multicluster.meshplane.dev", Version: "v1", Resource: "scopegrants"}

func runSkeleton(t *testing.T, allInOne bool) {
	ctx := t.Context()
	e := startEstate(t, allInOne)
	clusters, plane, procs := e.clusters, e.plane, e.procs

	for _, c := range clusters {
		for _, svc := range harness.BookinfoServices {
			waitDR(t, ctx, c, svc, procs)
		}
		checkDR(t, ctx, c, "reviews")
	}

	if allInOne {
		checkMeshctl(t, ctx, plane, procs)
	}

	// Deleting a Service deletes its DestinationRule in that cluster only.
	east, west := clusters[0], clusters[1]
	if err := east.Clientset().CoreV1().Services(harness.BookinfoNamespace).Delete(ctx, "ratings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := harness.Wait(ctx, 60*time.Second, "ratings DestinationRule to disappear from east", func(ctx context.Context) (bool, error) {
		_, err := east.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).Get(ctx, "ratings", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := west.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).Get(ctx, "ratings", metav1.GetOptions{}); err != nil {
		t.Fatalf("west's ratings DestinationRule must stay: %v", err)
	}
}

func waitDR(t *testing.T, ctx context.Context, c *kubetest.Cluster, name string, procs []*harness.Process) {
	t.Helper()
	err := harness.Wait(ctx, 90*time.Second, fmt.Sprintf("DestinationRule %s in %s", name, c.Name), func(ctx context.Context) (bool, error) {
		_, err := c.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
}

// checkDR asserts the content Meshplane owns: host, mTLS mode and the
// ownership labels.
func checkDR(t *testing.T, ctx context.Context, c *kubetest.Cluster, name string) {
	t.Helper()
	u, err := c.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	labels := u.GetLabels()
	if labels["meshplane.dev/managed-by"] != "meshplane" || labels["meshplane.dev/cluster"] != c.Name {
		t.Errorf("%s: labels = %v, want managed-by=meshplane, cluster=%s", c.Name, labels, c.Name)
	}
	if u.GetAnnotations()["meshplane.dev/parents"] == "" {
		t.Errorf("%s: no parents annotation", c.Name)
	}
	spec, _ := json.Marshal(u.Object["spec"])
	var got struct {
		Host          string `json:"host"`
		TrafficPolicy struct {
			TLS struct {
				Mode string `json:"mode"`
			} `json:"tls"`
		} `json:"trafficPolicy"`
	}
	if err := json.Unmarshal(spec, &got); err != nil {
		t.Fatal(err)
	}
	wantHost := fmt.Sprintf("%s.%s.svc.cluster.local", name, harness.BookinfoNamespace)
	if got.Host != wantHost || got.TrafficPolicy.TLS.Mode != "ISTIO_MUTUAL" {
		t.Errorf("%s: spec = %s, want host %s and tls ISTIO_MUTUAL", c.Name, spec, wantHost)
	}
	managers := map[string]bool{}
	for _, mf := range u.GetManagedFields() {
		managers[mf.Manager] = true
	}
	if !managers["meshplane"] {
		t.Errorf("%s: field managers = %v, want meshplane", c.Name, managers)
	}
}

// checkMeshctl runs `meshctl check` with a service certificate and expects
// both clusters connected for push and pull, with the current version
// applied.
func checkMeshctl(t *testing.T, ctx context.Context, plane *harness.Plane, procs []*harness.Process) {
	t.Helper()
	cert, key, err := plane.PKI.ServiceCert("meshctl")
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	err = harness.Wait(ctx, 30*time.Second, "meshctl check to pass", func(ctx context.Context) (bool, error) {
		cmd := exec.CommandContext(ctx, harness.Binary(binDir, harness.CmdMeshctl), "check", "--addr", plane.Ingest,
			"--ca-file", plane.PKI.RootFile(), "--cert-file", cert, "--key-file", key, "--server-name", "localhost")
		out, err = cmd.CombinedOutput()
		return err == nil, fmt.Errorf("%v: %s", err, out)
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"east", "west", "connected", "current"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("meshctl check output lacks %q:\n%s", want, out)
		}
	}

	// The output snapshot shows the DestinationRules with readable specs;
	// the input snapshot shows what the agent discovered.
	dump := func(which string) string {
		cmd := exec.CommandContext(ctx, harness.Binary(binDir, harness.CmdMeshctl), "snapshot", "dump", "--cluster", "east", which,
			"--addr", plane.Ingest, "--ca-file", plane.PKI.RootFile(), "--cert-file", cert, "--key-file", key, "--server-name", "localhost")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("meshctl snapshot dump %s: %v\n%s", which, err, b)
		}
		return string(b)
	}
	for which, wants := range map[string][]string{
		"--output": {"kind: DestinationRule", "mode: ISTIO_MUTUAL", "host: reviews.bookinfo.svc.cluster.local"},
		"--input":  {"cluster: east", "kubeService:", "name: reviews"},
	} {
		got := dump(which)
		for _, want := range wants {
			if !strings.Contains(got, want) {
				t.Errorf("meshctl snapshot dump %s lacks %q:\n%.2000s", which, want, got)
			}
		}
	}
}
