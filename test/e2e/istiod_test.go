package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	rbacconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	// Istio's routes name this retry predicate; protojson needs its type
	// to print them.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	"github.com/meshplane/meshplane/libs/kube/istiotest"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// meshEstate is an estate (four plane processes, a management cluster,
// east and west with bookinfo and an agent each) whose workload clusters
// each run a real istiod on their API server.
type meshEstate struct {
	*estate
	istiods map[string]*istiotest.Istiod
}

// startMeshEstate starts the estate, gives each workload cluster istiod's
// objects (for discovery), an east-west gateway at harness.GatewayIP(i) and
// bookinfo pods with IPs in 10.<i+1>.0.0/24, then a real istiod whose log must reject
// nothing by the end of the test.
func startMeshEstate(t *testing.T) *meshEstate {
	t.Helper()
	istiotest.SkipIfAsked(t)
	if _, err := istiotest.PilotDiscoveryPath(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	e := &meshEstate{estate: startEstateWith(t, estateOptions{mgmt: true, federated: true}), istiods: map[string]*istiotest.Istiod{}}
	for i, c := range e.clusters {
		td := c.Name + ".local"
		if err := harness.RunPods(ctx, c, harness.BookinfoNamespace, i+1); err != nil {
			t.Fatal(err)
		}
		e.istiods[c.Name] = harness.StartIstiod(t, c, td)
	}
	return e
}

// sidecar connects to cluster c's istiod as the sidecar of bookinfo pod
// name; the stream ends with the test, or after timeout.
func (e *meshEstate) sidecar(t *testing.T, c *kubetest.Cluster, pod string, timeout time.Duration) *istiotest.ADS {
	t.Helper()
	p, err := harness.Sidecar(t.Context(), c.Clientset(), harness.BookinfoNamespace, pod)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	ads, err := e.istiods[c.Name].Connect(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ads.Close)
	return ads
}

// eventuallyXDS polls what, on a new stream each time, until it returns
// "", and fails with its last answer after two minutes.
func eventuallyXDS(t *testing.T, what string, procs []*harness.Process, f func() string) {
	t.Helper()
	var last string
	err := harness.Wait(t.Context(), 2*time.Minute, what, func(context.Context) (bool, error) {
		last = f()
		return last == "", nil
	}, procs...)
	if err != nil {
		t.Fatalf("%v; last: %s", err, last)
	}
}

// mgmtPolicies are applied in the management cluster: east's and west's
// meshes federated in a VirtualMesh that denies by default (AccessPolicies
// take effect only then), an AccessPolicy letting productpage of either
// cluster GET reviews, and reviewsPolicy.
const mgmtPolicies = `apiVersion: v1
kind: Namespace
metadata: {name: meshplane}
---
apiVersion: v1
kind: Namespace
metadata: {name: bookinfo}
---
apiVersion: networking.meshplane.dev/v1
kind: VirtualMesh
metadata: {name: global, namespace: meshplane}
spec:
  meshes:
  - {name: istiod-istio-system-east, namespace: istio-system}
  - {name: istiod-istio-system-west, namespace: istio-system}
  federation:
    permissive: {}
  globalAccessPolicy: ENABLED
---
` + harness.ReviewsAccessPolicyYAML

// reviewsTrafficPolicy is a TrafficPolicy on reviews in both clusters:
// retries, a timeout and a v1/v2 shift.
func reviewsTrafficPolicy(attempts int) []byte {
	return []byte(fmt.Sprintf(`apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: reviews, namespace: bookinfo}
spec:
  destinationSelector:
  - kubeServiceMatcher:
      labels: {app: reviews}
      namespaces: [bookinfo]
  policy:
    requestTimeout: 7s
    retries: {attempts: %d, perTryTimeout: 2s}
    trafficShift:
      destinations:
      - kubeService: {name: reviews, namespace: bookinfo, subset: {version: v1}}
        weight: 80
      - kubeService: {name: reviews, namespace: bookinfo, subset: {version: v2}}
        weight: 20
`, attempts))
}

const reviewsHost = "reviews.bookinfo.svc.cluster.local"

// Issue 17 items 2 and 6 through real Meshplane processes: the four plane
// services, an agent per workload cluster applying to its real API server,
// and a real istiod per workload cluster reading that API server. The
// policies are applied in the management cluster; what the test checks is
// what istiod tells a sidecar (xDS fetched by the test's ADS client, which
// plays the pod; no Envoy runs). Every istiod's log must reject and ignore
// nothing (checked at cleanup).
func TestIstiodSidecarConfig(t *testing.T) {
	harness.RequireE2E(t)
	e := startMeshEstate(t)
	east, west := e.clusters[0], e.clusters[1]
	if err := e.mgmt.ApplyYAML(t.Context(), append([]byte(mgmtPolicies+"---\n"), reviewsTrafficPolicy(2)...)); err != nil {
		t.Fatal(err)
	}

	t.Run("TrafficPolicyRoute", func(t *testing.T) { trafficPolicyRoute(t, e, east, west) })
	t.Run("AccessPolicyRBAC", func(t *testing.T) { accessPolicyRBAC(t, e, east) })
	t.Run("FederatedHostEndpoints", func(t *testing.T) { federatedHostEndpoints(t, e, east, west) })
}

// routeSays describes what the route for reviews:9080 must carry.
type routeSays struct {
	attempts        uint32
	perTry, timeout time.Duration
	weights         map[string]uint32 // cluster name -> weight
}

// check returns "" when rc's route for reviews:9080 carries want, else
// what differs.
func (want routeSays) check(rc *routev3.RouteConfiguration) string {
	vh := istiotest.VirtualHost(rc, reviewsHost)
	if vh == nil || len(vh.GetRoutes()) == 0 {
		return "no virtual host (or no route) for " + reviewsHost
	}
	// The policy has no matchers: one route, the catch-all, Istio's last.
	r := vh.GetRoutes()[len(vh.GetRoutes())-1]
	ra := r.GetRoute()
	rp := ra.GetRetryPolicy()
	var diffs []string
	if got := rp.GetNumRetries().GetValue(); got != want.attempts {
		diffs = append(diffs, fmt.Sprintf("retry_policy.num_retries %d, want %d", got, want.attempts))
	}
	if got := rp.GetPerTryTimeout().AsDuration(); got != want.perTry {
		diffs = append(diffs, fmt.Sprintf("retry_policy.per_try_timeout %v, want %v", got, want.perTry))
	}
	if got := ra.GetTimeout().AsDuration(); got != want.timeout {
		diffs = append(diffs, fmt.Sprintf("timeout %v, want %v", got, want.timeout))
	}
	got := map[string]uint32{}
	for _, c := range ra.GetWeightedClusters().GetClusters() {
		got[c.GetName()] = c.GetWeight().GetValue()
	}
	if fmt.Sprint(got) != fmt.Sprint(want.weights) {
		diffs = append(diffs, fmt.Sprintf("weighted_clusters %v, want %v", got, want.weights))
	}
	return strings.Join(diffs, "; ")
}

// The TrafficPolicy's retries, timeout and weighted subset shift are on
// the route that productpage's sidecar gets for reviews:9080 in both
// clusters, and the subset clusters exist. Then edits of the retries
// reach the sidecar's route: the time from applying each edit in the
// management cluster to istiod's push of the route that carries it is
// logged, and its median (docs/benchmarks.md).
func trafficPolicyRoute(t *testing.T, e *meshEstate, east, west *kubetest.Cluster) {
	v1 := "outbound|9080|version-v1|" + reviewsHost
	v2 := "outbound|9080|version-v2|" + reviewsHost
	want := routeSays{attempts: 2, perTry: 2 * time.Second, timeout: 7 * time.Second, weights: map[string]uint32{v1: 80, v2: 20}}
	ads := map[string]*istiotest.ADS{}
	for _, c := range e.clusters {
		a := e.sidecar(t, c, "productpage-v1-0", 10*time.Minute)
		ads[c.Name] = a
		awaitRoute(t, e, c, a, want)
		cs, err := a.Clusters()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{v1, v2} {
			if cs[name].GetType() != clusterv3.Cluster_EDS {
				t.Errorf("%s: subset cluster %s: %v, want an EDS cluster (the DestinationRule's subset)", c.Name, name, cs[name])
			}
		}
	}

	var took, inKube []time.Duration
	for attempts := uint32(3); attempts <= 7; attempts++ {
		want.attempts = attempts
		written := watchRetries(t, east, attempts)
		start := time.Now()
		if err := e.mgmt.ApplyYAML(t.Context(), reviewsTrafficPolicy(int(attempts))); err != nil {
			t.Fatal(err)
		}
		at := awaitRoute(t, e, east, ads[east.Name], want)
		var vs time.Time
		select {
		case vs = <-written:
		case <-time.After(time.Minute):
			t.Fatalf("east's VirtualService reviews never showed %d retries, though the route did", attempts)
		}
		took, inKube = append(took, at.Sub(start)), append(inKube, vs.Sub(start))
		t.Logf("edit retries.attempts -> %d: VirtualService in east's API server after %v, in east's sidecar route after %v",
			attempts, vs.Sub(start).Round(time.Millisecond), at.Sub(start).Round(time.Millisecond))
	}
	awaitRoute(t, e, west, ads[west.Name], want)
	slices.Sort(took)
	slices.Sort(inKube)
	t.Logf("policy edit in the management cluster -> route in the sidecar's xDS (istiod's push to the test's ADS client): median %v of %d edits (min %v, max %v); "+
		"-> VirtualService readable in the cluster's API server: median %v",
		took[len(took)/2].Round(time.Millisecond), len(took), took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond),
		inKube[len(inKube)/2].Round(time.Millisecond))
}

// watchRetries watches c's VirtualService reviews from now on, and sends
// the time its last HTTP route first says attempts retries.
func watchRetries(t *testing.T, c *kubetest.Cluster, attempts uint32) <-chan time.Time {
	t.Helper()
	vss := c.Dynamic().Resource(virtualServices).Namespace(harness.BookinfoNamespace)
	cur, err := vss.Get(t.Context(), "reviews", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := vss.Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=reviews", ResourceVersion: cur.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan time.Time, 1)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			at := time.Now()
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			routes, _, _ := unstructured.NestedSlice(u.Object, "spec", "http")
			if len(routes) == 0 {
				continue
			}
			got, _, _ := unstructured.NestedInt64(routes[len(routes)-1].(map[string]any), "retries", "attempts")
			if got == int64(attempts) {
				out <- at
				return
			}
		}
	}()
	return out
}

// awaitRoute waits for istiod's route 9080 on ads to carry want, and
// returns when it arrived; a failure prints the VirtualService and the
// route.
func awaitRoute(t *testing.T, e *meshEstate, c *kubetest.Cluster, ads *istiotest.ADS, want routeSays) time.Time {
	t.Helper()
	var diff string
	rc, at, err := ads.AwaitRoutes("9080", 2*time.Minute, func(rc *routev3.RouteConfiguration) bool {
		diff = want.check(rc)
		return diff == ""
	})
	if err != nil {
		t.Fatalf("%s: productpage's route for %s:9080: %s (%v)\nVirtualService: %s\nroute: %s\nistiod: %v",
			c.Name, reviewsHost, diff, err, objectSpec(t, c, virtualServices, harness.BookinfoNamespace, "reviews"),
			protoJSON(istiotest.VirtualHost(rc, reviewsHost)), e.istiods[c.Name].Exited())
	}
	return at
}

// An AccessPolicy becomes the RBAC filter of the inbound listener of the
// selected pods' sidecars: reviews' sidecar in east allows GET from the
// identities of productpage in east and in west, in their own trust
// domains.
func accessPolicyRBAC(t *testing.T, e *meshEstate, east *kubetest.Cluster) {
	wants := []string{"spiffe://east.local/ns/bookinfo/sa/bookinfo-productpage", "spiffe://west.local/ns/bookinfo/sa/bookinfo-productpage"}
	var got string
	eventuallyXDS(t, "the RBAC filter of reviews' inbound listener in east", e.procs, func() string {
		ads := e.sidecar(t, east, "reviews-v1-0", time.Minute)
		defer ads.Close()
		ls, err := ads.Listeners()
		if err != nil {
			return err.Error()
		}
		l, ok := ls[istiotest.VirtualInbound]
		if !ok {
			return "no listener " + istiotest.VirtualInbound
		}
		rbacs, err := istiotest.InboundRBAC(l, 9080)
		if err != nil {
			return err.Error()
		}
		if len(rbacs) == 0 {
			return "no RBAC filter on the inbound HTTP filter chains of port 9080; the listener's chains: " + istiotest.DescribeChains(l) +
				"\nAuthorizationPolicy: " + objectSpec(t, east, authorizationPolicies, harness.BookinfoNamespace, "reviews")
		}
		for _, r := range rbacs {
			got = protoJSON(r)
			if r.GetRules().GetAction() != rbacconfigv3.RBAC_ALLOW {
				return fmt.Sprintf("RBAC action %v, want ALLOW: %s", r.GetRules().GetAction(), got)
			}
			if !slices.ContainsFunc(slices.Collect(maps.Values(r.GetRules().GetPolicies())), func(p *rbacconfigv3.Policy) bool {
				pj := protoJSON(p)
				return strings.Contains(pj, `"GET"`) && strings.Contains(pj, wants[0]) && strings.Contains(pj, wants[1])
			}) {
				return "no RBAC policy allows GET from " + strings.Join(wants, " and ") + ": " + got +
					"\nAuthorizationPolicy: " + objectSpec(t, east, authorizationPolicies, harness.BookinfoNamespace, "reviews")
			}
		}
		return ""
	})
	t.Logf("east: reviews' inbound RBAC filter (port 9080): %s", got)
}

// Federation: in east, productpage's sidecar has a cluster for west's
// federated reviews whose endpoint is west's east-west gateway at its
// address and TLS port (EDS), and the route for that host goes to it.
func federatedHostEndpoints(t *testing.T, e *meshEstate, east, west *kubetest.Cluster) {
	host := "reviews.bookinfo.svc." + west.Name + ".global"
	name := "outbound|9080||" + host
	want := harness.GatewayIP(1) + ":15443"
	eventuallyXDS(t, "east's endpoints of "+name, e.procs, func() string {
		ads := e.sidecar(t, east, "productpage-v1-0", time.Minute)
		defer ads.Close()
		cs, err := ads.Clusters()
		if err != nil {
			return err.Error()
		}
		c, ok := cs[name]
		if !ok {
			return "no cluster " + name
		}
		if c.GetType() != clusterv3.Cluster_EDS {
			return fmt.Sprintf("cluster %s is %v, want EDS (a STATIC ServiceEntry)", name, c.GetType())
		}
		las, err := ads.Endpoints(name)
		if err != nil {
			return err.Error()
		}
		var got []string
		for _, ep := range istiotest.Flatten(las[name]) {
			got = append(got, fmt.Sprintf("%s:%d", ep.Address, ep.Port))
		}
		if len(got) != 1 || got[0] != want {
			return fmt.Sprintf("endpoints %v, want west's gateway %s\nServiceEntry: %s", got, want,
				objectSpec(t, east, serviceEntries, harness.IstioNamespace, host))
		}
		t.Logf("east: EDS of %s: %v", name, got)
		return ""
	})
}

// objectSpec returns the spec of an object as JSON, or why it cannot.
func objectSpec(t *testing.T, c *kubetest.Cluster, gvr schema.GroupVersionResource, namespace, name string) string {
	u, err := c.Dynamic().Resource(gvr).Namespace(namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	b, _ := json.Marshal(u.Object["spec"])
	return string(b)
}

func protoJSON(m proto.Message) string {
	b, err := protojson.Marshal(m)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
