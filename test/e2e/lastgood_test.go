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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// reviewsPolicy is a TrafficPolicy, applied in east, that selects the
// reviews Service in both clusters with policy as its spec.policy.
func reviewsPolicy(name, policy string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: %s, namespace: bookinfo}
spec:
  destinationSelector:
  - kubeServiceMatcher:
      labels: {app: reviews}
      namespaces: [bookinfo]
  policy:
%s`, name, policy))
}

// policyStatus is the status written back onto a TrafficPolicy (or another
// Meshplane resource: see readStatus), with the generation it is read at.
type policyStatus struct {
	generation         int64
	ObservedGeneration string // as written: protojson encodes an int64 as a string
	State              string
	LastKnownGood      bool
	Errors             []string
}

func readPolicyStatus(ctx context.Context, c *kubetest.Cluster, name string) (*policyStatus, error) {
	return readStatus(ctx, c, trafficPolicies, harness.BookinfoNamespace, name)
}

// readStatus reads the status of any Meshplane resource whose status has
// observedGeneration, state, lastKnownGood and errors at its top
// (TrafficPolicy, AccessPolicy, VirtualMesh, ...).
func readStatus(ctx context.Context, c *kubetest.Cluster, gvr schema.GroupVersionResource, namespace, name string) (*policyStatus, error) {
	u, err := c.Dynamic().Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	st := &policyStatus{generation: u.GetGeneration()}
	og, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "observedGeneration")
	st.ObservedGeneration = fmt.Sprint(og)
	st.State, _, _ = unstructured.NestedString(u.Object, "status", "state")
	st.LastKnownGood, _, _ = unstructured.NestedBool(u.Object, "status", "lastKnownGood")
	st.Errors, _, _ = unstructured.NestedStringSlice(u.Object, "status", "errors")
	return st, nil
}

// waitPolicyStatus waits until the policy's status is for its current
// generation and ok accepts it.
func waitPolicyStatus(t *testing.T, c *kubetest.Cluster, name, what string, ok func(*policyStatus) bool, procs []*harness.Process) *policyStatus {
	t.Helper()
	var last *policyStatus
	err := harness.Wait(t.Context(), 90*time.Second, what, func(ctx context.Context) (bool, error) {
		st, err := readPolicyStatus(ctx, c, name)
		if err != nil {
			return false, err
		}
		last = st
		return st.ObservedGeneration == fmt.Sprint(st.generation) && ok(st), nil
	}, procs...)
	if err != nil {
		t.Fatalf("%v; last status %+v", err, last)
	}
	return last
}

// virtualService returns the reviews VirtualService of c.
func reviewsVirtualService(ctx context.Context, c *kubetest.Cluster) (*unstructured.Unstructured, error) {
	return c.Dynamic().Resource(virtualServices).Namespace(harness.BookinfoNamespace).Get(ctx, "reviews", metav1.GetOptions{})
}

// A policy that was ACCEPTED keeps its effect in every cluster whatever its
// later edits do wrong: the VirtualService it made in east and west is
// neither deleted nor changed (same UID and resource version) when an edit
// names a service that does not exist, or sets a duration the CRD schema
// lets through but that does not decode; the status says INVALID with
// lastKnownGood for the new generation, naming the field. A new policy
// that never decoded has no effect and says why. A valid edit takes
// effect, and only deleting the policy removes what it made.
func TestInvalidEditsKeepWorkingConfig(t *testing.T) {
	harness.RequireE2E(t)
	ctx := t.Context()
	e := startEstateWith(t, estateOptions{allInOne: true, mgmt: true})
	east := e.clusters[0]
	const name = "reviews-retries"
	// east's policies may change west: a ScopeGrant in the management
	// cluster says so.
	grantScope(t, e.mgmt, e.procs, "east")

	if err := east.ApplyYAML(ctx, reviewsPolicy(name, "    retries: {attempts: 3, perTryTimeout: 2s}\n")); err != nil {
		t.Fatal(err)
	}
	waitPolicyStatus(t, east, name, "reviews-retries ACCEPTED", func(st *policyStatus) bool { return st.State == "ACCEPTED" }, e.procs)
	held := map[string]*unstructured.Unstructured{}
	for _, c := range e.clusters {
		err := harness.Wait(ctx, 60*time.Second, "VirtualService reviews with 3 attempts in "+c.Name, func(ctx context.Context) (bool, error) {
			vs, err := reviewsVirtualService(ctx, c)
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			held[c.Name] = vs
			return strings.Contains(specJSON(vs), `"attempts":3`), nil
		}, e.procs...)
		if err != nil {
			t.Fatal(err)
		}
	}
	unchanged := func(step string) {
		t.Helper()
		for _, c := range e.clusters {
			vs, err := reviewsVirtualService(ctx, c)
			if err != nil {
				t.Fatalf("%s: VirtualService reviews in %s: %v (it must never be deleted)", step, c.Name, err)
			}
			if vs.GetUID() != held[c.Name].GetUID() || vs.GetResourceVersion() != held[c.Name].GetResourceVersion() {
				t.Errorf("%s: VirtualService reviews in %s was rewritten: uid %s rv %s, was %s %s; spec %s",
					step, c.Name, vs.GetUID(), vs.GetResourceVersion(), held[c.Name].GetUID(), held[c.Name].GetResourceVersion(), specJSON(vs))
			}
		}
	}
	heldInForce := func(field string) func(*policyStatus) bool {
		return func(st *policyStatus) bool {
			errs := strings.Join(st.Errors, "\n")
			return st.State == "INVALID" && st.LastKnownGood && strings.Contains(errs, field) && strings.Contains(errs, "generation 1") && strings.Contains(errs, "stays in force")
		}
	}

	// 1. A mirror to a service that does not exist (the example in
	// meshctl.md).
	if err := east.ApplyYAML(ctx, reviewsPolicy(name, "    retries: {attempts: 3, perTryTimeout: 2s}\n    mirror: {kubeService: {name: nosuch}, percentage: 10}\n")); err != nil {
		t.Fatal(err)
	}
	st := waitPolicyStatus(t, east, name, "the dangling mirror reported INVALID with lastKnownGood", heldInForce("spec.policy.mirror.kubeService: service nosuch.bookinfo"), e.procs)
	if st.generation != 2 {
		t.Errorf("generation %d after one edit, want 2", st.generation)
	}
	unchanged("dangling reference")

	// 2. A duration that passes the CRD pattern but does not decode.
	if err := east.ApplyYAML(ctx, reviewsPolicy(name, "    retries: {attempts: 3, perTryTimeout: 99999999999999s}\n")); err != nil {
		t.Fatal(err)
	}
	waitPolicyStatus(t, east, name, "the undecodable duration reported INVALID with lastKnownGood", heldInForce("spec.policy.retries.perTryTimeout: does not decode"), e.procs)
	unchanged("undecodable duration")

	// 3. A new policy that never decoded gets a status and has no effect.
	const broken = "ratings-broken"
	if err := east.ApplyYAML(ctx, []byte(`apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: ratings-broken, namespace: bookinfo}
spec:
  destinationSelector:
  - kubeServiceRefs: {services: [{name: ratings, namespace: bookinfo}]}
  policy: {requestTimeout: 99999999999999s}
`)); err != nil {
		t.Fatal(err)
	}
	waitPolicyStatus(t, east, broken, "the new undecodable policy reported INVALID without lastKnownGood", func(st *policyStatus) bool {
		return st.State == "INVALID" && !st.LastKnownGood && strings.Contains(strings.Join(st.Errors, "\n"), "spec.policy.requestTimeout: does not decode")
	}, e.procs)
	for _, c := range e.clusters {
		if _, err := c.Dynamic().Resource(virtualServices).Namespace(harness.BookinfoNamespace).Get(ctx, "ratings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("VirtualService ratings in %s: %v; a policy that never decoded must have no effect", c.Name, err)
		}
	}
	unchanged("a new undecodable policy")

	// 4. A valid edit takes effect in both clusters, on the same objects.
	if err := east.ApplyYAML(ctx, reviewsPolicy(name, "    retries: {attempts: 5, perTryTimeout: 2s}\n")); err != nil {
		t.Fatal(err)
	}
	waitPolicyStatus(t, east, name, "the valid edit ACCEPTED", func(st *policyStatus) bool { return st.State == "ACCEPTED" && !st.LastKnownGood }, e.procs)
	for _, c := range e.clusters {
		err := harness.Wait(ctx, 60*time.Second, "VirtualService reviews with 5 attempts in "+c.Name, func(ctx context.Context) (bool, error) {
			vs, err := reviewsVirtualService(ctx, c)
			if err != nil {
				return false, err
			}
			if vs.GetUID() != held[c.Name].GetUID() {
				return false, fmt.Errorf("VirtualService reviews in %s was recreated", c.Name)
			}
			return strings.Contains(specJSON(vs), `"attempts":5`), nil
		}, e.procs...)
		if err != nil {
			t.Fatal(err)
		}
	}

	// 5. Only deleting the policy removes what it made.
	if err := east.Dynamic().Resource(trafficPolicies).Namespace(harness.BookinfoNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range e.clusters {
		err := harness.Wait(ctx, 60*time.Second, "VirtualService reviews gone from "+c.Name, func(ctx context.Context) (bool, error) {
			_, err := reviewsVirtualService(ctx, c)
			return apierrors.IsNotFound(err), client(err)
		}, e.procs...)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// client keeps a NotFound from ending a wait.
func client(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func specJSON(u *unstructured.Unstructured) string {
	b, _ := json.Marshal(u.Object["spec"])
	return string(b)
}
