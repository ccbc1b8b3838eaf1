package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/test/e2e/harness"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var resourceRecords = schema.GroupVersionResource{Group: "translation.meshplane.dev", Version: "v1", Resource: "resourcerecords"}

// A restart of the plane while a policy is INVALID with lastKnownGood
// keeps its last valid version: translation reads it back from the
// ResourceRecord it keeps in the management cluster, publishes the same
// output as before the restart, and the VirtualService in the workload
// cluster is neither deleted nor rewritten.
func TestPlaneRestartKeepsLastGood(t *testing.T) {
	harness.RequireE2E(t)
	ctx := t.Context()
	clusters := kubetest.StartMany(t, kubetest.Options{Name: "mgmt"}, kubetest.Options{Name: "east"})
	mgmt, east := clusters[0], clusters[1]
	const recordsNS = "meshplane"
	if _, err := mgmt.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: recordsNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	redis := redistest.Start(t)
	dir := testDir(t)
	p, tokens := startFaultPlane(t, dir, redis.Addr(), "east")
	// Translation keeps the last valid versions in the management cluster.
	p.down("translation", false)
	p.extraArgs = map[string][]string{"translation": {"--kubeconfig", mgmt.Kubeconfig(), "--records-namespace", recordsNS}}
	p.start("translation")

	if err := east.ApplyYAML(ctx, harness.Bookinfo(east.Name)); err != nil {
		t.Fatal(err)
	}
	p.startAgent(east, tokens["east"])
	const name = "reviews-retries"
	if err := east.ApplyYAML(ctx, reviewsPolicy(name, "    retries: {attempts: 3, perTryTimeout: 2s}\n")); err != nil {
		t.Fatal(err)
	}
	waitPolicyStatus(t, east, name, "reviews-retries ACCEPTED", func(st *policyStatus) bool { return st.State == "ACCEPTED" }, p.running())
	err := harness.Wait(ctx, 60*time.Second, "a ResourceRecord for reviews-retries in the management cluster", func(ctx context.Context) (bool, error) {
		list, err := mgmt.Dynamic().Resource(resourceRecords).Namespace(recordsNS).List(ctx, metav1.ListOptions{LabelSelector: "meshplane.dev/kind=TrafficPolicy"})
		if err != nil {
			return false, err
		}
		for _, it := range list.Items {
			spec, _ := it.Object["spec"].(map[string]any)
			if spec["name"] == name && spec["cluster"] == "east" && fmt.Sprint(spec["lastGoodGeneration"]) == "1" {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d records", len(list.Items))
	}, p.running()...)
	if err != nil {
		t.Fatal(err)
	}

	// An invalid edit: the last valid version stays in force.
	if err := east.ApplyYAML(ctx, reviewsPolicy(name, "    retries: {attempts: -4, perTryTimeout: 2s}\n")); err != nil {
		t.Fatal(err)
	}
	waitPolicyStatus(t, east, name, "the invalid edit reported with lastKnownGood", func(st *policyStatus) bool {
		return st.State == "INVALID" && st.LastKnownGood && strings.Contains(strings.Join(st.Errors, "\n"), "generation 1")
	}, p.running())
	vs, err := reviewsVirtualService(ctx, east)
	if err != nil || !strings.Contains(specJSON(vs), `"attempts":3`) {
		t.Fatalf("VirtualService reviews before the restart: %v %v", err, vs)
	}
	outputs := snapstore.NewRedis(redis.Client(t), snapshots.DefaultInstall, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	before, err := outputs.Version(ctx, "east")
	if err != nil || before == "" {
		t.Fatalf("output version of east: %q, %v", before, err)
	}

	// The plane's translation restarts with nothing in memory.
	p.down("translation", true)
	p.start("translation")
	waitMetric(t, ctx, p.admin("translation"), "meshplane_translation_last_good_loaded", "1", p.running())
	// It has published east's output again, and it is the same one.
	err = harness.Wait(ctx, 60*time.Second, "translation to publish east's output after the restart", func(ctx context.Context) (bool, error) {
		got, err := metric(ctx, p.admin("translation"), `meshplane_translation_output_objects{cluster="east"}`)
		return got != "" && got != "0", err
	}, p.running()...)
	if err != nil {
		t.Fatal(err)
	}
	if after, err := outputs.Version(ctx, "east"); err != nil || after != before {
		t.Errorf("east's output after the restart is %q (%v), want the same as before, %q: the last valid version was lost", after, err, before)
	}
	got, err := reviewsVirtualService(ctx, east)
	if err != nil {
		t.Fatalf("VirtualService reviews after the restart: %v (it must never be deleted)", err)
	}
	if got.GetUID() != vs.GetUID() || got.GetResourceVersion() != vs.GetResourceVersion() {
		t.Errorf("VirtualService reviews was rewritten by the restart: %s", specJSON(got))
	}
}
