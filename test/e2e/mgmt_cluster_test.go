package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A TrafficPolicy applied in the management cluster (a third API server,
// read by ingest, with no agent) reaches both workload clusters' API
// servers as the VirtualService it asks for, and its status comes back on
// the resource in the management cluster.
func TestManagementClusterPolicyReachesBothClusters(t *testing.T) {
	harness.RequireE2E(t)
	ctx := t.Context()
	dir := t.TempDir()
	clusters := kubetest.StartMany(t, kubetest.Options{Name: "east"}, kubetest.Options{Name: "west"}, kubetest.Options{Name: "mgmt", SkipIstioCRDs: true})
	workload, mgmt := clusters[:2], clusters[2]
	redis := redistest.Start(t)
	plane, tokens, err := harness.StartPlane(ctx, harness.PlaneOptions{
		BinDir: binDir, Dir: dir, RedisAddr: redis.Addr(), Clusters: []string{"east", "west"},
		IngestArgs: []string{"--kubeconfig", mgmt.Kubeconfig(), "--watch-management-cluster", "true", "--management-debounce", "50ms"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	procs := append([]*harness.Process{}, plane.Procs...)
	for _, c := range workload {
		if err := c.ApplyYAML(ctx, harness.Bookinfo(c.Name)); err != nil {
			t.Fatalf("apply bookinfo to %s: %v", c.Name, err)
		}
		agent, err := plane.StartAgent(harness.AgentOptions{
			BinDir: binDir, Cluster: c.Name, Token: tokens[c.Name], Kubeconfig: c.Kubeconfig(),
			LogDir: filepath.Join(dir, "logs"), StateDir: filepath.Join(dir, "agent-"+c.Name),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(agent.Stop)
		procs = append(procs, agent)
	}

	if err := mgmt.ApplyYAML(ctx, []byte(`apiVersion: v1
kind: Namespace
metadata: {name: bookinfo}
---
apiVersion: networking.meshplane.dev/v1
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
		t.Fatal(err)
	}

	for _, c := range workload {
		err := harness.Wait(ctx, 90*time.Second, fmt.Sprintf("VirtualService reviews with 4 retries in %s", c.Name), func(ctx context.Context) (bool, error) {
			u, err := c.Dynamic().Resource(virtualServices).Namespace(harness.BookinfoNamespace).Get(ctx, "reviews", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			spec, _ := json.Marshal(u.Object["spec"])
			var got struct {
				Hosts []string `json:"hosts"`
				HTTP  []struct {
					Retries struct {
						Attempts int `json:"attempts"`
					} `json:"retries"`
				} `json:"http"`
			}
			if err := json.Unmarshal(spec, &got); err != nil {
				return false, err
			}
			if len(got.Hosts) != 1 || got.Hosts[0] != "reviews.bookinfo.svc.cluster.local" || len(got.HTTP) == 0 {
				return false, fmt.Errorf("%s: VirtualService spec = %s", c.Name, spec)
			}
			return got.HTTP[len(got.HTTP)-1].Retries.Attempts == 4, nil
		}, procs...)
		if err != nil {
			t.Fatal(err)
		}
	}

	// The status that translation computed lands on the resource in the
	// management cluster, for its current generation.
	var status any
	err = harness.Wait(ctx, 60*time.Second, "an ACCEPTED status on the management cluster's TrafficPolicy", func(ctx context.Context) (bool, error) {
		u, err := mgmt.Dynamic().Resource(trafficPolicies).Namespace("bookinfo").Get(ctx, "reviews-retries", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status = u.Object["status"]
		state, _, _ := unstructured.NestedString(u.Object, "status", "state")
		observed, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "observedGeneration")
		return state == "ACCEPTED" && fmt.Sprint(observed) == fmt.Sprint(u.GetGeneration()), nil
	}, procs...)
	if err != nil {
		t.Fatalf("%v; last status: %v", err, status)
	}
}
