package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// waitSpec waits until the object of resource at namespace/name in c has
// a spec whose JSON contains every string of want, and returns that JSON.
func waitSpec(t *testing.T, c *kubetest.Cluster, resource schema.GroupVersionResource, namespace, name string, want []string, procs []*harness.Process) string {
	t.Helper()
	var last string
	err := harness.Wait(t.Context(), 120*time.Second, fmt.Sprintf("%s %s/%s in %s with %q", resource.Resource, namespace, name, c.Name, want), func(ctx context.Context) (bool, error) {
		u, err := c.Dynamic().Resource(resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = "not found"
			return false, nil
		}
		if err != nil {
			return false, err
		}
		b, err := json.Marshal(u.Object["spec"])
		if err != nil {
			return false, err
		}
		last = string(b)
		for _, w := range want {
			if !strings.Contains(last, w) {
				return false, nil
			}
		}
		return true, nil
	}, procs...)
	if err != nil {
		t.Fatalf("%v; last spec %s", err, last)
	}
	return last
}

// Issue 16 items 1-3 across two real API servers with their agents: a
// TrafficPolicy applied in east shifts 10% of east's traffic for reviews to
// reviews v2 in west, which a VirtualMesh federates. East's VirtualService
// routes to the federated host's subset, east's DestinationRule for that
// host names the subset, west's DestinationRule for it gives the subset its
// labels (for the east-west gateway), and west's clients of east's reviews
// get a VirtualService for reviews.bookinfo.svc.east.global with the same
// shift. An edit of the weights reaches both clusters.
func TestCrossClusterShiftReachesBothClusters(t *testing.T) {
	harness.RequireE2E(t)
	ctx := t.Context()
	e := startEstateWith(t, estateOptions{allInOne: true, mgmt: true, federated: true})
	east, west := e.clusters[0], e.clusters[1]
	// The VirtualMesh and the policy are applied in east and name west's
	// mesh and service: the management cluster grants east that scope.
	grantScope(t, e.mgmt, e.procs, "east")
	policy := func(local, remote int) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: meshplane-config}
---
apiVersion: networking.meshplane.dev/v1
kind: VirtualMesh
metadata: {name: global, namespace: meshplane-config}
spec:
  meshes:
  - {name: istiod-istio-system-east, namespace: istio-system}
  - {name: istiod-istio-system-west, namespace: istio-system}
  federation:
    permissive: {}
---
apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: reviews-to-west, namespace: bookinfo}
spec:
  destinationSelector:
  - kubeServiceRefs:
      services: [{name: reviews, namespace: bookinfo, cluster: east}]
  policy:
    trafficShift:
      destinations:
      - weight: %d
        kubeService: {name: reviews}
      - weight: %d
        kubeService: {name: reviews, cluster: west, subset: {version: v2}}
`, local, remote)
	}
	if err := east.ApplyYAML(ctx, []byte(policy(90, 10))); err != nil {
		t.Fatal(err)
	}
	waitPolicyStatus(t, east, "reviews-to-west", "reviews-to-west ACCEPTED", func(st *policyStatus) bool { return st.State == "ACCEPTED" }, e.procs)

	remote := `{"host":"reviews.bookinfo.svc.west.global","subset":"version-v2"},"weight":10`
	waitSpec(t, east, virtualServices, harness.BookinfoNamespace, "reviews",
		[]string{`{"host":"reviews.bookinfo.svc.cluster.local"},"weight":90`, remote}, e.procs)
	waitSpec(t, east, destinationRules, harness.IstioNamespace, "reviews.bookinfo.svc.west.global",
		[]string{`"subsets":[{"name":"version-v2"}]`}, e.procs)
	waitSpec(t, west, destinationRules, harness.BookinfoNamespace, "reviews.bookinfo.svc.west.global",
		[]string{`"labels":{"version":"v2"}`, `"name":"version-v2"`}, e.procs)
	waitSpec(t, west, virtualServices, harness.IstioNamespace, "reviews.bookinfo.svc.east.global",
		[]string{`"hosts":["reviews.bookinfo.svc.east.global"]`, `{"host":"reviews.bookinfo.svc.east.global"},"weight":90`,
			`{"host":"reviews.bookinfo.svc.cluster.local","subset":"version-v2"},"weight":10`}, e.procs)

	// An edit of the weights reaches both clusters.
	if err := east.ApplyYAML(ctx, []byte(policy(80, 20))); err != nil {
		t.Fatal(err)
	}
	waitSpec(t, east, virtualServices, harness.BookinfoNamespace, "reviews",
		[]string{`{"host":"reviews.bookinfo.svc.west.global","subset":"version-v2"},"weight":20`}, e.procs)
	waitSpec(t, west, virtualServices, harness.IstioNamespace, "reviews.bookinfo.svc.east.global",
		[]string{`{"host":"reviews.bookinfo.svc.east.global"},"weight":80`, `"weight":20`}, e.procs)
}
