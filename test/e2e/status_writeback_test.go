package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/test/e2e/harness"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var trafficPolicies = schema.GroupVersionResource{Group: "networking.meshplane.dev", Version: "v1", Resource: "trafficpolicies"}

// The statuses that translation computes for a cluster's own resources
// are written back onto them by its agent: ACCEPTED for a valid policy,
// INVALID with the reason for a broken one, each for the generation seen.
func TestStatusWriteBack(t *testing.T) {
	ctx, p, east, _ := setupFaults(t)
	ns := harness.BookinfoNamespace
	if err := east.ApplyYAML(ctx, []byte(fmt.Sprintf(`
apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: reviews-timeout, namespace: %[1]s}
spec:
  destinationSelector:
  - kubeServiceRefs:
      services: [{name: reviews, namespace: %[1]s}]
  policy: {requestTimeout: 2s}
---
apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: bad-regex, namespace: %[1]s}
spec:
  destinationSelector:
  - kubeServiceRefs:
      services: [{name: reviews, namespace: %[1]s}]
  httpRequestMatchers:
  - regex: /a/(b
  policy: {requestTimeout: 1s}
`, ns))); err != nil {
		t.Fatal(err)
	}
	waitState := func(name, want, errorPart string) *unstructured.Unstructured {
		t.Helper()
		var got *unstructured.Unstructured
		err := harness.Wait(ctx, 60*time.Second, fmt.Sprintf("TrafficPolicy %s to be %s", name, want), func(ctx context.Context) (bool, error) {
			u, err := east.Dynamic().Resource(trafficPolicies).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got = u
			state, _, _ := unstructured.NestedString(u.Object, "status", "state")
			errs, _, _ := unstructured.NestedStringSlice(u.Object, "status", "errors")
			return state == want && strings.Contains(strings.Join(errs, "\n"), errorPart), fmt.Errorf("status = %v", u.Object["status"])
		}, p.running()...)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	good := waitState("reviews-timeout", "ACCEPTED", "")
	if g, _, _ := unstructured.NestedFieldNoCopy(good.Object, "status", "observedGeneration"); fmt.Sprint(g) != fmt.Sprint(good.GetGeneration()) {
		t.Errorf("status.observedGeneration = %v, want %d", g, good.GetGeneration())
	}
	waitState("bad-regex", "INVALID", "regex")

	// Nothing changed: the status is not written again.
	rv := good.GetResourceVersion()
	if err := east.Clientset().CoreV1().Services(ns).Delete(ctx, "ratings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ctx, east, "ratings", p.running())
	u, err := east.Dynamic().Resource(trafficPolicies).Namespace(ns).Get(ctx, "reviews-timeout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u.GetResourceVersion() != rv {
		t.Errorf("an unchanged status was written again: resourceVersion %s -> %s, status %v", rv, u.GetResourceVersion(), u.Object["status"])
	}
}
