package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/test/e2e/harness"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkedCluster is the part of `meshctl check -o json` these tests read.
type checkedCluster struct {
	Cluster string `json:"cluster"`
	Push    string `json:"push"`
	Applied string `json:"applied"`
	Refused *struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"refused"`
}

// meshctlCheck runs `meshctl check -o json` against the all-in-one plane
// and returns cluster's entry (nil when absent). check exits 1 whenever
// something is unhealthy, which these tests provoke; only a report that
// does not parse is an error.
func meshctlCheck(ctx context.Context, plane *harness.Plane, cluster string) (*checkedCluster, string, error) {
	cert, key, err := plane.PKI.ServiceCert("meshctl")
	if err != nil {
		return nil, "", err
	}
	cmd := exec.CommandContext(ctx, harness.Binary(binDir, harness.CmdMeshctl), "check", "-o", "json", "--addr", plane.Ingest,
		"--ca-file", plane.PKI.RootFile(), "--cert-file", cert, "--key-file", key, "--server-name", "localhost")
	out, _ := cmd.Output()
	var rep struct {
		Clusters []checkedCluster `json:"clusters"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, string(out), fmt.Errorf("meshctl check -o json: %w: %s", err, out)
	}
	for i := range rep.Clusters {
		if rep.Clusters[i].Cluster == cluster {
			return &rep.Clusters[i], string(out), nil
		}
	}
	return nil, string(out), nil
}

// A workload cluster cannot exhaust the plane or corrupt its records, with
// the plane run as the demo runs it (all-in-one, Redis) and a real agent
// on a real API server:
//   - a push over a per-cluster limit is refused: the last good input stays
//     in force, nothing is deleted from the cluster, and the refusal shows
//     in the metric and in meshctl check until the cluster is back within
//     the limit;
//   - an ack of a version never sent, with 100,000 results, is refused, and
//     meshctl check does not report the cluster behind.
func TestWorkloadClusterLimits(t *testing.T) {
	harness.RequireE2E(t)
	ctx := t.Context()
	east := kubetest.Start(t, kubetest.Options{Name: "east"})
	redis := redistest.Start(t)
	// Bookinfo has four Services: at the limit, not over it.
	plane, procs := startOneCluster(t, harness.PlaneOptions{RedisAddr: redis.Addr(), AllInOneArgs: []string{"--max-input-destinations", "4"}}, east)
	for _, svc := range harness.BookinfoServices {
		waitDR(t, ctx, east, svc, procs)
	}
	inputs := snapstore.NewRedis(redis.Client(t), snapshots.DefaultInstall, snapshots.Inputs, func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} })
	acks := snapstore.NewRedisAcks(redis.Client(t), snapshots.DefaultInstall)
	outputs := snapstore.NewRedis(redis.Client(t), snapshots.DefaultInstall, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	current := func(ctx context.Context) (bool, error) {
		c, out, err := meshctlCheck(ctx, plane, "east")
		return err == nil && c != nil && c.Applied == "current" && c.Refused == nil, fmt.Errorf("meshctl check: %v\n%s", err, out)
	}
	if err := harness.Wait(ctx, 60*time.Second, "east applied and current in meshctl check", current, procs...); err != nil {
		t.Fatal(err)
	}

	t.Run("bogus ack", func(t *testing.T) {
		before, err := acks.GetAck(ctx, "east")
		if err != nil {
			t.Fatal(err)
		}
		sim, err := plane.NewSimAgent("east")
		if err != nil {
			t.Fatal(err)
		}
		defer sim.Close()
		results := make([]*snapshotv1.ApplyResult, 100_000)
		for i := range results {
			results[i] = &snapshotv1.ApplyResult{
				Ref:     &snapshotv1.ObjectRef{ApiVersion: "networking.istio.io/v1", Kind: "DestinationRule", Namespace: "bookinfo", Name: fmt.Sprint("bogus-", i)},
				Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED,
			}
		}
		err = sim.Ack(ctx, snapshots.VersionPrefix+strings.Repeat("0", 64), results)
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), `was not sent to cluster "east"`) {
			t.Fatalf("bogus ack: %v, want InvalidArgument saying the version was not sent", err)
		}
		// The current version with more results than its output holds.
		version, err := outputs.Version(ctx, "east")
		if err != nil {
			t.Fatal(err)
		}
		err = sim.Ack(ctx, version, results)
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "100000 results") {
			t.Fatalf("ack with 100,000 results: %v, want InvalidArgument naming the count", err)
		}
		after, err := acks.GetAck(ctx, "east")
		if err != nil || after.Version != before.Version || len(after.Results) != len(before.Results) {
			t.Fatalf("ack record changed from %s (%d results) to %s (%d results), %v", before.Version, len(before.Results), after.Version, len(after.Results), err)
		}
		c, out, err := meshctlCheck(ctx, plane, "east")
		if err != nil || c == nil || c.Applied != "current" {
			t.Fatalf("meshctl check after bogus acks: %v\n%s", err, out)
		}
		v, err := metric(ctx, plane.Admin, `meshplane_distribution_ack_refusals_total{cluster="east",reason="not-sent"}`)
		if err != nil || v != "1" {
			t.Fatalf("ack_refusals_total{not-sent} = %q (%v), want 1", v, err)
		}
	})

	t.Run("push over a limit", func(t *testing.T) {
		good, err := inputs.Get(ctx, "east")
		if err != nil {
			t.Fatal(err)
		}
		if n := len(good.Value.GetDestinations()); n != 4 {
			t.Fatalf("east's input holds %d destinations, want bookinfo's 4", n)
		}
		drs := resourceVersions(t, ctx, east)
		// A fifth Service in front of a mesh workload: a fifth destination.
		if err := east.ApplyYAML(ctx, []byte(`apiVersion: v1
kind: Service
metadata: {name: ratings-extra, namespace: bookinfo, labels: {app: ratings}}
spec:
  selector: {app: ratings}
  ports: [{name: http, port: 9080, targetPort: 9080}]
`)); err != nil {
			t.Fatal(err)
		}
		var refused *checkedCluster
		err = harness.Wait(ctx, 60*time.Second, "meshctl check to show east's push refused", func(ctx context.Context) (bool, error) {
			c, out, err := meshctlCheck(ctx, plane, "east")
			refused = c
			return err == nil && c != nil && c.Refused != nil, fmt.Errorf("meshctl check: %v\n%s", err, out)
		}, procs...)
		if err != nil {
			t.Fatal(err)
		}
		if r := refused.Refused; r.Reason != "destinations" || !strings.Contains(r.Message, "5 destinations") || !strings.Contains(r.Message, "--max-input-destinations") {
			t.Fatalf("refusal in meshctl check = %+v, want the destinations limit and the count", r)
		}
		if !strings.Contains(refused.Push, "refused") {
			t.Errorf("push state %q does not say refused", refused.Push)
		}
		if v, err := metric(ctx, plane.Admin, `meshplane_ingest_push_refusals_total{cluster="east",reason="destinations"}`); err != nil || v == "" || v == "0" {
			t.Fatalf("push_refusals_total{east,destinations} = %q (%v), want at least 1", v, err)
		}
		// The last good input stays in force, and nothing in the cluster
		// is deleted or rewritten.
		now, err := inputs.Get(ctx, "east")
		if err != nil || now.Version != good.Version {
			t.Fatalf("east's input is %s (%v), want the last good %s", now.Version, err, good.Version)
		}
		sameVersions(t, "after the refused push", drs, resourceVersions(t, ctx, east))
		if _, err := east.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).Get(ctx, "ratings-extra", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("DestinationRule of the refused destination: %v, want none", err)
		}

		// Back within the limit: the next push is accepted, and the
		// refusal is no longer reported.
		if err := east.Clientset().CoreV1().Services(harness.BookinfoNamespace).Delete(ctx, "ratings-extra", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := harness.Wait(ctx, 90*time.Second, "east current again, with no refusal", current, procs...); err != nil {
			t.Fatal(err)
		}
		for _, svc := range harness.BookinfoServices {
			if _, err := east.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).Get(ctx, svc, metav1.GetOptions{}); err != nil {
				t.Errorf("DestinationRule %s: %v", svc, err)
			}
		}
	})
}
