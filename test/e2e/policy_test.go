package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/test/e2e/harness"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var virtualServices = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}

// A TrafficPolicy applied in one cluster selects the reviews Service in both
// clusters. By default it changes only its own cluster: east gets the
// VirtualService, west gets nothing, and the status says west is outside
// east's scope. Once a ScopeGrant in the management cluster grants east
// west, each cluster gets the VirtualService with the retries, and the
// DestinationRule gains the subsets of the traffic shift.
func TestTrafficPolicyReachesBothClusters(t *testing.T) {
	harness.RequireE2E(t)
	ctx := t.Context()
	e := startEstateWith(t, estateOptions{allInOne: true, mgmt: true})
	east, west := e.clusters[0], e.clusters[1]
	policy := `apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: reviews-retries, namespace: bookinfo}
spec:
  destinationSelector:
  - kubeServiceMatcher:
      labels: {app: reviews}
      namespaces: [bookinfo]
  policy:
    retries: {attempts: 3, perTryTimeout: 2s}
    trafficShift:
      destinations:
      - kubeService: {name: reviews, namespace: bookinfo, subset: {version: v1}}
        weight: 50
      - kubeService: {name: reviews, namespace: bookinfo, subset: {version: v2}}
        weight: 50
`
	if err := east.ApplyYAML(ctx, []byte(policy)); err != nil {
		t.Fatal(err)
	}
	waitPolicyStatus(t, east, "reviews-retries", "west refused: outside east's scope", func(st *policyStatus) bool {
		errs := strings.Join(st.Errors, "\n")
		return st.State == "INVALID" && strings.Contains(errs, "destination reviews.bookinfo.west: spec.destinationSelector") && strings.Contains(errs, "outside the scope of cluster \"east\"")
	}, e.procs)
	if _, err := reviewsVirtualService(ctx, east); err != nil {
		t.Fatalf("VirtualService reviews in east, the policy's own cluster: %v", err)
	}
	if _, err := reviewsVirtualService(ctx, west); !apierrors.IsNotFound(err) {
		t.Fatalf("VirtualService reviews in west: %v; east's policy must not change west without a grant", err)
	}

	grantScope(t, e.mgmt, e.procs, "east")
	for _, c := range e.clusters {
		var vs map[string]any
		err := harness.Wait(ctx, 90*time.Second, fmt.Sprintf("VirtualService reviews in %s", c.Name), func(ctx context.Context) (bool, error) {
			u, err := c.Dynamic().Resource(virtualServices).Namespace(harness.BookinfoNamespace).Get(ctx, "reviews", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			vs = u.Object
			return true, nil
		}, e.procs...)
		if err != nil {
			t.Fatal(err)
		}
		spec, _ := json.Marshal(vs["spec"])
		var got struct {
			Hosts []string `json:"hosts"`
			HTTP  []struct {
				Retries struct {
					Attempts int `json:"attempts"`
				} `json:"retries"`
				Route []struct {
					Destination struct {
						Host   string `json:"host"`
						Subset string `json:"subset"`
					} `json:"destination"`
					Weight int `json:"weight"`
				} `json:"route"`
			} `json:"http"`
		}
		if err := json.Unmarshal(spec, &got); err != nil {
			t.Fatal(err)
		}
		host := "reviews.bookinfo.svc.cluster.local"
		if len(got.Hosts) != 1 || got.Hosts[0] != host || len(got.HTTP) == 0 {
			t.Fatalf("%s: VirtualService spec = %s", c.Name, spec)
		}
		route := got.HTTP[len(got.HTTP)-1]
		if route.Retries.Attempts != 3 || len(route.Route) != 2 || route.Route[0].Weight+route.Route[1].Weight != 100 {
			t.Errorf("%s: route = %+v, want 3 retries and a 50/50 shift", c.Name, route)
		}
		for _, r := range route.Route {
			if r.Destination.Host != host || r.Destination.Subset == "" {
				t.Errorf("%s: route destination %+v, want %s with a subset", c.Name, r.Destination, host)
			}
		}
		// The subsets the routes name exist in the DestinationRule.
		dr, err := c.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).Get(ctx, "reviews", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		drSpec, _ := json.Marshal(dr.Object["spec"])
		var drGot struct {
			Subsets []struct {
				Name string `json:"name"`
			} `json:"subsets"`
		}
		if err := json.Unmarshal(drSpec, &drGot); err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, s := range drGot.Subsets {
			names[s.Name] = true
		}
		for _, r := range route.Route {
			if !names[r.Destination.Subset] {
				t.Errorf("%s: subset %q is routed to but missing from the DestinationRule %s", c.Name, r.Destination.Subset, drSpec)
			}
		}
	}
	// The Go integration example (examples/integration) sees the policy's
	// status through the generated clients.
	exampleSeesStatus(t, e.plane, "east TrafficPolicy bookinfo/reviews-retries ACCEPTED")
}

// exampleSeesStatus builds and runs examples/integration --once against the
// plane until its output holds want.
func exampleSeesStatus(t *testing.T, plane *harness.Plane, want string) {
	t.Helper()
	dir := t.TempDir()
	const pkg = "github.com/meshplane/meshplane/examples/integration"
	if err := harness.Build(t.Context(), dir, pkg); err != nil {
		t.Fatal(err)
	}
	cert, key, err := plane.PKI.ServiceCert("integration")
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	err = harness.Wait(t.Context(), 60*time.Second, "the integration example to print "+want, func(ctx context.Context) (bool, error) {
		cmd := exec.CommandContext(ctx, harness.Binary(dir, pkg), "--once", "--addr", plane.Registration,
			"--translation-addr", plane.Translation, "--ca-file", plane.PKI.RootFile(), "--cert-file", cert, "--key-file", key)
		out, err = cmd.CombinedOutput()
		if err != nil {
			return false, fmt.Errorf("integration example: %v: %s", err, out)
		}
		return strings.Contains(string(out), want), nil
	}, plane.Procs...)
	if err != nil {
		t.Fatalf("%v; last output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "CLUSTER") {
		t.Errorf("integration example printed no cluster table:\n%s", out)
	}
}
