package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var kubernetesClusters = schema.GroupVersionResource{Group: "multicluster.meshplane.dev", Version: "v1", Resource: "kubernetesclusters"}

// safeWindow is the plane's --safe-start-window in these tests.
const safeWindow = 10 * time.Second

// durablePlane is an all-in-one plane with a management cluster (a third
// API server holding registration's KubernetesCluster mirrors), Redis, and
// east and west with bookinfo and their agents.
type durablePlane struct {
	t                *testing.T
	plane            *harness.Plane
	redis            *redistest.Server
	east, west, mgmt *kubetest.Cluster
	agents           map[string]*harness.Process
	tokens           map[string]string
	dir              string
}

func startDurablePlane(t *testing.T) *durablePlane {
	t.Helper()
	harness.RequireE2E(t)
	ctx := t.Context()
	d := &durablePlane{t: t, dir: testDir(t), agents: map[string]*harness.Process{}}
	clusters := kubetest.StartMany(t, kubetest.Options{Name: "east"}, kubetest.Options{Name: "west"}, kubetest.Options{Name: "mgmt", SkipIstioCRDs: true})
	d.east, d.west, d.mgmt = clusters[0], clusters[1], clusters[2]
	if _, err := d.mgmt.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "meshplane"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d.redis = redistest.Start(t)
	var err error
	d.plane, d.tokens, err = harness.StartPlane(ctx, harness.PlaneOptions{
		BinDir: binDir, Dir: d.dir, RedisAddr: d.redis.Addr(), Clusters: []string{"east", "west"}, AllInOne: true,
		ManagementKubeconfig: d.mgmt.Kubeconfig(), SafeStartWindow: safeWindow,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.plane.Stop)
	for _, c := range []*kubetest.Cluster{d.east, d.west} {
		if err := c.ApplyYAML(ctx, harness.Bookinfo(c.Name)); err != nil {
			t.Fatal(err)
		}
		d.startAgent(c)
	}
	return d
}

func (d *durablePlane) startAgent(c *kubetest.Cluster) {
	d.t.Helper()
	agent, err := d.plane.StartAgent(harness.AgentOptions{
		BinDir: binDir, Cluster: c.Name, Token: d.tokens[c.Name], Kubeconfig: c.Kubeconfig(),
		LogDir: filepath.Join(d.dir, "logs"), StateDir: filepath.Join(d.dir, "agent-"+c.Name),
	})
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(agent.Stop)
	d.agents[c.Name] = agent
}

func (d *durablePlane) procs(except ...string) []*harness.Process {
	out := append([]*harness.Process{}, d.plane.Procs...)
	for name, a := range d.agents {
		if !slices.Contains(except, name) {
			out = append(out, a)
		}
	}
	return out
}

func (d *durablePlane) meshctl(ctx context.Context, args ...string) (string, error) {
	cert, key, err := d.plane.PKI.ServiceCert("meshctl")
	if err != nil {
		return "", err
	}
	args = append(args, "--addr", d.plane.Ingest, "--ca-file", d.plane.PKI.RootFile(), "--cert-file", cert, "--key-file", key, "--server-name", "localhost")
	out, err := exec.CommandContext(ctx, harness.Binary(binDir, harness.CmdMeshctl), args...).CombinedOutput()
	return string(out), err
}

// checkReport is the part of `meshctl check -o json` these tests read.
type checkReport struct {
	OK       bool `json:"ok"`
	SafeMode *struct {
		On      bool     `json:"on"`
		Missing []string `json:"missingClusters"`
	} `json:"safeMode"`
	Clusters []checkCluster `json:"clusters"`
}

// checkCluster is one cluster's entry in `meshctl check -o json`.
type checkCluster struct {
	Cluster       string `json:"cluster"`
	Push          string `json:"push"`
	Pull          string `json:"pull"`
	Applied       string `json:"applied"`
	ApplyErrors   int    `json:"applyErrors"`
	HeldDeletions int    `json:"heldDeletions"`
}

func (d *durablePlane) check(ctx context.Context) (checkReport, string, error) {
	out, err := d.meshctl(ctx, "check", "-o", "json")
	var rep checkReport
	i := strings.Index(out, "{")
	if i < 0 {
		return rep, out, fmt.Errorf("meshctl check -o json printed no JSON: %v: %s", err, out)
	}
	if jerr := json.Unmarshal([]byte(out[i:]), &rep); jerr != nil {
		return rep, out, fmt.Errorf("meshctl check -o json: %v: %s", jerr, out)
	}
	return rep, out, err
}

// waitHealthy waits until meshctl check passes, failing the test with the
// last check printed when it does not within 90 s.
func (d *durablePlane) waitHealthy(ctx context.Context, what string) {
	d.t.Helper()
	var last string
	err := harness.Wait(ctx, 90*time.Second, what, func(ctx context.Context) (bool, error) {
		rep, out, err := d.check(ctx)
		last = out
		return err == nil && rep.OK, nil
	}, d.procs()...)
	if err != nil {
		d.t.Fatalf("%v; last check:\n%s", err, last)
	}
}

// owned returns kind/name -> UID of the objects Meshplane wrote in c's
// bookinfo namespace.
func owned(t *testing.T, ctx context.Context, c *kubetest.Cluster) map[string]string {
	t.Helper()
	return listOwned(t, ctx, c, false)
}

// A TrafficPolicy in east's cluster makes the VirtualService reviews in
// both clusters: west's output depends on east's input.
func (d *durablePlane) applyCrossClusterPolicy(ctx context.Context) {
	d.t.Helper()
	// east's policy may change west: the management cluster grants it.
	grantScope(d.t, d.mgmt, d.procs(), "east")
	if err := d.east.ApplyYAML(ctx, []byte(`apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: reviews-retries, namespace: bookinfo}
spec:
  destinationSelector:
  - kubeServiceMatcher:
      labels: {app: reviews}
      namespaces: [bookinfo]
  policy:
    retries: {attempts: 4, perTryTimeout: 2s}
`)); err != nil {
		d.t.Fatal(err)
	}
	for _, c := range []*kubetest.Cluster{d.east, d.west} {
		err := harness.Wait(ctx, 90*time.Second, "VirtualService reviews in "+c.Name, func(ctx context.Context) (bool, error) {
			_, err := c.Dynamic().Resource(virtualServices).Namespace(harness.BookinfoNamespace).Get(ctx, "reviews", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil, err
		}, d.procs()...)
		if err != nil {
			d.t.Fatal(err)
		}
	}
}

// waitMirrored waits until registration mirrored both clusters as
// registered KubernetesClusters in the management cluster.
func (d *durablePlane) waitMirrored(ctx context.Context) {
	d.t.Helper()
	err := harness.Wait(ctx, 60*time.Second, "KubernetesClusters east and west registered", func(ctx context.Context) (bool, error) {
		list, err := d.mgmt.Dynamic().Resource(kubernetesClusters).Namespace("meshplane").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		registered := 0
		for _, u := range list.Items {
			if st, _, _ := unstructured.NestedString(u.Object, "status", "state"); st == "STATE_REGISTERED" {
				registered++
			}
		}
		return registered == 2, fmt.Errorf("%d registered", registered)
	}, d.procs()...)
	if err != nil {
		d.t.Fatal(err)
	}
}

// DESIGN.md's "Redis and the management plane restart together", with
// east's agent down for longer than the safe-start window: Redis comes
// back empty, so the cluster records and outputs are gone, but the
// management cluster still names east. Nothing is deleted from either
// workload cluster: safe mode waits for east, and when its window passes
// west's output is marked incomplete and west's agent holds the deletions.
// meshctl check fails and names east all along. When east returns,
// everything is complete again and still nothing was deleted.
func TestRedisLossWithAClusterDownDeletesNothing(t *testing.T) {
	d := startDurablePlane(t)
	ctx := t.Context()
	d.applyCrossClusterPolicy(ctx)
	d.waitMirrored(ctx)
	before := map[string]map[string]string{"east": owned(t, ctx, d.east), "west": owned(t, ctx, d.west)}
	if before["west"]["VirtualService/reviews"] == "" {
		t.Fatalf("west holds no VirtualService reviews to lose: %v", before["west"])
	}

	d.agents["east"].Stop()
	flushed := false
	if err := d.plane.Restart(ctx, true, func() error {
		flushed = true
		return d.redis.Client(t).FlushAll(ctx).Err()
	}); err != nil || !flushed {
		t.Fatalf("restart with Redis flushed: %v", err)
	}
	restarted := time.Now()

	// Wait until the safe-start window has passed and west's agent applied
	// an output built without east, holding its deletions; meanwhile check
	// must fail naming east each time it answers.
	var last string
	err := harness.Wait(ctx, 90*time.Second, "west's agent to hold deletions after the safe-start window", func(ctx context.Context) (bool, error) {
		rep, out, err := d.check(ctx)
		last = out
		if rep.SafeMode == nil {
			return false, fmt.Errorf("no safe mode in check: %s", out)
		}
		if err == nil || rep.OK {
			t.Fatalf("meshctl check passed while east had not reported since the restart:\n%s", out)
		}
		if !rep.SafeMode.On && !slices.Contains(rep.SafeMode.Missing, "east") {
			t.Fatalf("meshctl check names no missing cluster after safe mode:\n%s", out)
		}
		for _, c := range rep.Clusters {
			if c.Cluster == "west" && c.HeldDeletions > 0 {
				return !rep.SafeMode.On, nil
			}
		}
		return false, nil
	}, d.procs("east")...)
	if err != nil {
		t.Fatalf("%v; last check:\n%s", err, last)
	}
	if since := time.Since(restarted); since < safeWindow {
		t.Fatalf("deletions held after %s, before the safe-start window %s passed", since, safeWindow)
	}
	for name, c := range map[string]*kubetest.Cluster{"east": d.east, "west": d.west} {
		if after := owned(t, ctx, c); !maps.Equal(after, before[name]) {
			t.Fatalf("%s's Meshplane objects changed while east was missing:\nbefore %v\nafter  %v", name, before[name], after)
		}
	}
	if !strings.Contains(last, `"east"`) {
		t.Fatalf("meshctl check does not name east:\n%s", last)
	}

	// East returns: outputs are complete, check passes, nothing was
	// deleted or made again.
	d.startAgent(d.east)
	d.waitHealthy(ctx, "meshctl check to pass once east is back")
	for name, c := range map[string]*kubetest.Cluster{"east": d.east, "west": d.west} {
		if after := owned(t, ctx, c); !maps.Equal(after, before[name]) {
			t.Fatalf("%s's Meshplane objects changed after east returned:\nbefore %v\nafter  %v", name, before[name], after)
		}
	}
}

// Redis emptied and the plane restarted while every agent stays up: the
// outputs come back the same, so no agent has anything to write, but the
// acknowledgements were lost with Redis. Distribution sends each agent the
// version it holds again (the store no longer remembers sending it), the
// agents acknowledge it without writing, and meshctl check passes again.
// Before, check showed both clusters "pull disconnected" and not applied
// until the next policy change.
func TestRedisLossWithEveryAgentUpEndsHealthy(t *testing.T) {
	d := startDurablePlane(t)
	ctx := t.Context()
	d.applyCrossClusterPolicy(ctx)
	d.waitMirrored(ctx)
	d.waitHealthy(ctx, "meshctl check to pass")
	before := map[string]map[string]string{"east": ownedVersions(t, ctx, d.east), "west": ownedVersions(t, ctx, d.west)}

	if err := d.plane.Restart(ctx, true, func() error { return d.redis.Client(t).FlushAll(ctx).Err() }); err != nil {
		t.Fatalf("restart with Redis flushed: %v", err)
	}
	d.waitHealthy(ctx, "meshctl check to pass again after Redis was emptied")
	for name, c := range map[string]*kubetest.Cluster{"east": d.east, "west": d.west} {
		if after := ownedVersions(t, ctx, c); !maps.Equal(after, before[name]) {
			t.Fatalf("%s's Meshplane objects were written or deleted though the output did not change:\nbefore %v\nafter  %v", name, before[name], after)
		}
	}
}

// ownedVersions is owned with each object's resource version: it changes
// with any write.
func ownedVersions(t *testing.T, ctx context.Context, c *kubetest.Cluster) map[string]string {
	t.Helper()
	return listOwned(t, ctx, c, true)
}

// listOwned lists c's Meshplane DestinationRules and VirtualServices in the
// bookinfo namespace by kind/name: their UIDs, with the resource versions
// when versions is set.
func listOwned(t *testing.T, ctx context.Context, c *kubetest.Cluster, versions bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for kind, gvr := range map[string]schema.GroupVersionResource{"DestinationRule": destinationRules, "VirtualService": virtualServices} {
		list, err := c.Dynamic().Resource(gvr).Namespace(harness.BookinfoNamespace).List(ctx, metav1.ListOptions{LabelSelector: "meshplane.dev/cluster=" + c.Name})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range list.Items {
			v := string(u.GetUID())
			if versions {
				v += "@" + u.GetResourceVersion()
			}
			out[kind+"/"+u.GetName()] = v
		}
	}
	return out
}

// Deregistration after Redis lost the cluster records: the record is
// re-seeded from its KubernetesCluster, and the live agent's certificate
// is revoked, so the plane refuses it.
func TestDeregisterAfterRedisLossRevokesLiveAgent(t *testing.T) {
	d := startDurablePlane(t)
	ctx := t.Context()
	d.waitMirrored(ctx)
	err := harness.Wait(ctx, 60*time.Second, "both agents pushing", func(ctx context.Context) (bool, error) {
		rep, out, _ := d.check(ctx)
		pushing := 0
		for _, c := range rep.Clusters {
			// The management cluster's own input is read by the plane,
			// not pushed by an agent.
			if c.Push == "connected" && (c.Cluster == "east" || c.Cluster == "west") {
				pushing++
			}
		}
		return pushing == 2, fmt.Errorf("%s", out)
	}, d.procs()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.redis.Client(t).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	out, err := d.meshctl(ctx, "cluster", "deregister", "east")
	if err != nil || !strings.Contains(out, "DEREGISTERED") || !strings.Contains(out, "1 certificate(s) revoked") {
		t.Fatalf("meshctl cluster deregister east after Redis lost the records: %v\n%s", err, out)
	}
	// The agent's streams are cut and its calls refused.
	err = harness.Wait(ctx, 60*time.Second, "east's agent to be refused as revoked", func(ctx context.Context) (bool, error) {
		tail := d.agents["east"].LogTail(200)
		return strings.Contains(tail, "revoked"), nil
	}, d.procs("east")...)
	if err != nil {
		t.Fatalf("%v; east's agent log:\n%s", err, d.agents["east"].LogTail(30))
	}
	rep, out, _ := d.check(ctx)
	for _, c := range rep.Clusters {
		if c.Cluster == "west" && c.Push != "connected" {
			t.Fatalf("west lost its connection when east was deregistered:\n%s", out)
		}
	}

	// Redis forgets again, and the whole plane restarts with it: no
	// process remembers the revocation, only east's KubernetesCluster
	// does. East is refused from the plane's first call on, and stays
	// refused, while west reconnects.
	if err := d.plane.Restart(ctx, true, func() error { return d.redis.Client(t).FlushAll(ctx).Err() }); err != nil {
		t.Fatalf("restart with Redis flushed: %v", err)
	}
	refusals := strings.Count(d.agents["east"].LogTail(100000), "revoked")
	westBack := false
	watch, stopWatch := context.WithTimeout(ctx, 20*time.Second)
	defer stopWatch()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for watch.Err() == nil {
		rep, out, _ := d.check(ctx)
		for _, c := range rep.Clusters {
			if c.Cluster == "east" && (c.Push == "connected" || c.Pull == "connected") {
				t.Fatalf("east's revoked certificate was admitted after Redis was emptied and the plane restarted:\n%s\neast's agent:\n%s", out, d.agents["east"].LogTail(30))
			}
			if c.Cluster == "west" && c.Push == "connected" {
				westBack = true
			}
		}
		select {
		case <-watch.Done():
		case <-tick.C:
		}
	}
	if !westBack {
		t.Fatal("west did not reconnect after the restart: the plane was not serving, so east's refusal proves nothing")
	}
	if now := strings.Count(d.agents["east"].LogTail(100000), "revoked"); now <= refusals {
		t.Fatalf("east's agent saw no refusal after the restart (%d before, %d after):\n%s", refusals, now, d.agents["east"].LogTail(30))
	}
}
