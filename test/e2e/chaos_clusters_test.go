package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/test/e2e/harness"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// chaosKinds are the output kinds the soak's real clusters hold.
var chaosKinds = []schema.GroupVersionResource{destinationRules, virtualServices, serviceEntries, authorizationPolicies}

// track is one policy that the soak edits in a real cluster: edit n is
// applied as manifest(n), and held reads which edit the cluster's Istio
// objects show.
type track struct {
	policy   string
	manifest func(n int) []byte
	held     func(ctx context.Context, k *kubetest.Cluster) (int, error)
	// at is its index in the soak's edits and held.
	at int
}

// realCluster is a workload cluster of the soak: a real API server (with
// an audit log of writes) and its agents, a three-replica Raft group.
type realCluster struct {
	kube  *kubetest.Cluster
	group *harness.AgentGroup
	// tracks are the TrafficPolicy and the AccessPolicy the edits change.
	tracks []*track
	// baseline is every Meshplane object in the cluster once it has
	// converged, by kind and name, with its UID: the edits change specs,
	// never which objects exist, so each must stay, with its UID (I1).
	baseline map[string]string
}

// chaosMesh makes the cluster a mesh with global access: a VirtualMesh
// of its own, so that its AccessPolicy takes effect.
func chaosMesh(cluster string) []byte {
	return fmt.Appendf(nil, `apiVersion: networking.meshplane.dev/v1
kind: VirtualMesh
metadata: {name: chaos-mesh, namespace: %[1]s}
spec:
  meshes:
  - {name: istiod-%[1]s-%[2]s, namespace: %[1]s}
  globalAccessPolicy: ENABLED
`, harness.IstioNamespace, cluster)
}

// chaosAccess is the AccessPolicy the soak edits in a real cluster: the
// path it allows, /chaos/<n>, is the edit.
func chaosAccess(cluster string, n int) []byte {
	return fmt.Appendf(nil, `apiVersion: networking.meshplane.dev/v1
kind: AccessPolicy
metadata: {name: chaos-access, namespace: %[1]s}
spec:
  sourceSelector:
  - kubeServiceAccountRefs:
      serviceAccounts: [{name: bookinfo-productpage, namespace: %[1]s, cluster: %[2]s}]
  destinationSelector:
  - kubeServiceRefs:
      services: [{name: reviews, namespace: %[1]s, cluster: %[2]s}]
  allowedPaths: [/chaos/%[3]d]
`, harness.BookinfoNamespace, cluster, n)
}

// accessHeld reads the path the reviews AuthorizationPolicies allow: the
// AccessPolicy edit the cluster shows; 0 when none does.
func accessHeld(ctx context.Context, k *kubetest.Cluster) (int, error) {
	l, err := k.Dynamic().Resource(authorizationPolicies).Namespace(harness.BookinfoNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	for _, u := range l.Items {
		if n, ok := numberAfter(specJSON(&u), `"/chaos/`, '"'); ok {
			return n, nil
		}
	}
	return 0, nil
}

// numberAfter reads the decimal number between key and end in s.
func numberAfter(s, key string, end byte) (int, bool) {
	i := strings.Index(s, key)
	if i < 0 {
		return 0, false
	}
	rest := s[i+len(key):]
	j := strings.IndexByte(rest, end)
	if j < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(rest[:j])
	return n, err == nil
}

// chaosPolicy is the TrafficPolicy the soak edits in a real cluster: its
// request timeout, in whole seconds, is the edit.
func chaosPolicy(cluster string, timeout int) []byte {
	return fmt.Appendf(nil, `apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: chaos-timeout, namespace: %[1]s}
spec:
  destinationSelector:
  - kubeServiceRefs:
      services: [{name: reviews, namespace: %[1]s, cluster: %[2]s}]
  policy: {requestTimeout: %[3]ds}
`, harness.BookinfoNamespace, cluster, timeout)
}

// startRealClusters starts the API servers, bookinfo, the policy at edit
// 1, and each cluster's agent group through the proxies (every agent
// lists every ingest and distribution proxy, and fails over between
// them).
func (c *chaos) startRealClusters(names []string, tokens map[string]string, ingest, dist []string) {
	t := c.t
	opts := make([]kubetest.Options, len(names))
	for i, n := range names {
		opts[i] = kubetest.Options{Name: n, Audit: true, LogDir: testDir(t)}
	}
	kubes := kubetest.StartMany(t, opts...)
	for _, k := range kubes {
		if err := k.ApplyYAML(t.Context(), harness.Bookinfo(k.Name)); err != nil {
			t.Fatal(err)
		}
		name := k.Name
		tracks := []*track{
			{policy: "TrafficPolicy", manifest: func(n int) []byte { return chaosPolicy(name, n) }, held: heldInCluster},
			{policy: "AccessPolicy", manifest: func(n int) []byte { return chaosAccess(name, n) }, held: accessHeld},
		}
		for _, doc := range [][]byte{harness.IstioControlPlane("", "1.24.0", "cluster.local"), chaosMesh(name), tracks[0].manifest(1), tracks[1].manifest(1)} {
			if err := k.ApplyYAML(t.Context(), doc); err != nil {
				t.Fatal(err)
			}
		}
		g, err := c.plane.StartAgentGroup(harness.AgentGroupOptions{
			BinDir: binDir, Cluster: k.Name, Token: tokens[k.Name], Kubeconfig: k.Kubeconfig(), Dir: testDir(t),
			Ingest: strings.Join(ingest, ","), Distribution: strings.Join(dist, ","),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Stop)
		c.real = append(c.real, &realCluster{kube: k, group: g, tracks: tracks})
	}
}

// heldInCluster reads the request timeout of the reviews VirtualService
// in the cluster's API server: the edit it holds; 0 when there is none.
func heldInCluster(ctx context.Context, k *kubetest.Cluster) (int, error) {
	u, err := k.Dynamic().Resource(virtualServices).Namespace(harness.BookinfoNamespace).Get(ctx, "reviews", metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	n, _ := numberAfter(specJSON(u), `"timeout":"`, 's')
	return n, nil
}

// objects lists the Meshplane objects in the cluster: kind/namespace/name
// to UID.
func (r *realCluster) objects(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, gvr := range chaosKinds {
		l, err := r.kube.Dynamic().Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: snapshots.LabelCluster + "=" + r.kube.Name})
		if err != nil {
			return nil, err
		}
		for _, u := range l.Items {
			out[gvr.Resource+"/"+u.GetNamespace()+"/"+u.GetName()] = string(u.GetUID())
		}
	}
	return out, nil
}

// watchRealCluster follows a real cluster until ctx ends: the edit its
// API server holds (for I2 and the convergence figures), and I1, that
// every baseline object is there with its UID. A read that fails (the
// API server paused) is not a miss: the next read decides.
func (c *chaos) watchRealCluster(ctx context.Context, r *realCluster) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		for _, tr := range r.tracks {
			if got, err := tr.held(rctx, r.kube); err == nil {
				c.mu.Lock()
				c.held[tr.at] = got
				c.mu.Unlock()
			}
		}
		if n%10 == 0 { // the object lists every half second
			if objs, err := r.objects(rctx); err == nil {
				c.checkBaseline(r, objs)
			}
		}
		cancel()
	}
}

// checkBaseline records I1 violations: baseline objects gone, or made
// again (another UID).
func (c *chaos) checkBaseline(r *realCluster, objs map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(r.baseline)) {
		switch uid, ok := objs[k]; {
		case !ok:
			c.violate("I1: %s is missing from %s at %s", k, r.kube.Name, time.Now().Format("15:04:05.000"))
		case uid != r.baseline[k]:
			c.violate("I1: %s was deleted and made again in %s (uid %s, was %s)", k, r.kube.Name, uid, r.baseline[k])
			r.baseline[k] = uid // once
		}
	}
}

// editRealCluster applies the next edit of one of a real cluster's
// policies; it counts once the API server accepted it.
func (c *chaos) editRealCluster(ctx context.Context, r *realCluster, tr *track) {
	c.mu.Lock()
	next := c.edits[tr.at] + 1
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := r.kube.ApplyYAML(ctx, tr.manifest(next)); err == nil {
		c.mu.Lock()
		c.edits[tr.at] = max(c.edits[tr.at], next)
		c.mu.Unlock()
	}
}

// freezeRaftLeader stops a real cluster's agent leader (SIGSTOP) for 2 to
// 5 s: the others elect a new leader meanwhile, and the old one wakes with
// its writes held by the write fence.
func (c *chaos) freezeRaftLeader(ctx context.Context) {
	r := c.real[c.rng.IntN(len(c.real))]
	frozen := time.Duration(2000+c.rng.IntN(3000)) * time.Millisecond
	lead, _ := r.group.Leaders(ctx)
	if len(lead) != 1 {
		c.record("skipped: no single Raft leader to freeze", "no single leader in %s to freeze (%d lead); skipped", r.kube.Name, len(lead))
		return
	}
	p := lead[0].Proc
	c.record("freeze an agent's Raft leader", "SIGSTOP %s (leader of %s) for %v", p.Name, r.kube.Name, frozen)
	c.freeze(p, frozen)
}

// pauseAPIServer stops a real cluster's kube-apiserver (SIGSTOP) for 2 to
// 5 s.
func (c *chaos) pauseAPIServer() {
	r := c.real[c.rng.IntN(len(c.real))]
	paused := time.Duration(2000+c.rng.IntN(3000)) * time.Millisecond
	_, pid := r.kube.PIDs()
	c.record("pause an API server", "SIGSTOP the kube-apiserver of %s for %v", r.kube.Name, paused)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		c.violate("pausing the API server of %s: %v", r.kube.Name, err)
		return
	}
	time.Sleep(paused)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		c.violate("resuming the API server of %s: %v", r.kube.Name, err)
	}
}

// checkWriters checks I3 on every real cluster's audit log.
func (c *chaos) checkWriters() {
	for _, r := range c.real {
		events, err := r.kube.AuditEvents()
		if err != nil {
			c.violate("I3: reading the audit log of %s: %v", r.kube.Name, err)
			continue
		}
		stints, _ := writerStints(events)
		writes := 0
		for _, s := range stints {
			writes += s.writes
		}
		c.t.Logf("chaos: %s: %d agent writes in %d leadership stints: %v", r.kube.Name, writes, len(stints), stints)
		for _, b := range overlappingWriters(events) {
			c.violate("I3 in %s: %s", r.kube.Name, b)
		}
	}
}

// await waits until the cluster's API server holds the first edit, and
// records the baseline.
func (r *realCluster) await(t *testing.T, c *chaos) {
	t.Helper()
	procs := append(slices.Clone(c.plane.Procs), r.group.Procs()...)
	for _, tr := range r.tracks {
		err := harness.Wait(t.Context(), 120*time.Second, "the first "+tr.policy+" edit in "+r.kube.Name, func(ctx context.Context) (bool, error) {
			got, err := tr.held(ctx, r.kube)
			return err == nil && got == 1, nil
		}, procs...)
		if err != nil {
			t.Fatal(err)
		}
		c.held[tr.at] = 1
	}
	var err error
	if r.baseline, err = r.objects(t.Context()); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for k := range r.baseline {
		kinds[strings.SplitN(k, "/", 2)[0]]++
	}
	if kinds["destinationrules"] == 0 || kinds["virtualservices"] == 0 || kinds["authorizationpolicies"] < 2 {
		t.Fatalf("%s holds %v Meshplane objects, want DestinationRules, VirtualServices and AuthorizationPolicies (deny by default, allow)", r.kube.Name, kinds)
	}
	t.Logf("chaos: %s converged with %d Meshplane objects (%v)", r.kube.Name, len(r.baseline), kinds)
}
