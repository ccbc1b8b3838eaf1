package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAgentReplicasFailOver runs three agent processes of one cluster as a
// Raft group against a real API server and a real management plane: one
// leader applies; when it is killed another takes over and the cluster
// converges on the next change.
func TestAgentReplicasFailOver(t *testing.T) {
	harness.RequireE2E(t)
	ctx := t.Context()
	dir := t.TempDir()
	east := kubetest.Start(t, kubetest.Options{Name: "east", Audit: true})
	redis := redistest.Start(t)
	plane, tokens, err := harness.StartPlane(ctx, harness.PlaneOptions{BinDir: binDir, Dir: dir, RedisAddr: redis.Addr(), Clusters: []string{"east"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	if err := east.ApplyYAML(ctx, harness.Bookinfo("east")); err != nil {
		t.Fatal(err)
	}

	group, err := plane.StartAgentGroup(harness.AgentGroupOptions{
		BinDir: binDir, Cluster: "east", Token: tokens["east"], Kubeconfig: east.Kubeconfig(), Dir: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(group.Stop)
	procs := append(slices.Clone(plane.Procs), group.Procs()...)

	// One leader, named by all; it applies.
	var first *harness.AgentReplica
	err = harness.Wait(ctx, 60*time.Second, "one leader named by every replica", func(ctx context.Context) (bool, error) {
		lead, agreed := group.Leaders(ctx)
		if len(lead) == 1 && agreed == lead[0].Name {
			first = lead[0]
			return true, nil
		}
		return false, nil
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range harness.BookinfoServices {
		waitDR(t, ctx, east, svc, procs)
	}

	// Kill the leader: another replica takes over and applies the next
	// change (a deleted Service loses its DestinationRule).
	first.Proc.Kill()
	var live []*harness.Process
	for _, p := range procs {
		if p != first.Proc {
			live = append(live, p)
		}
	}
	var second *harness.AgentReplica
	err = harness.Wait(ctx, 60*time.Second, "a new leader named by the two others", func(ctx context.Context) (bool, error) {
		lead, agreed := group.Leaders(ctx)
		if len(lead) == 1 && lead[0] != first && agreed == lead[0].Name {
			second = lead[0]
			return true, nil
		}
		return false, nil
	}, live...)
	if err != nil {
		t.Fatal(err)
	}
	if err := east.Clientset().CoreV1().Services(harness.BookinfoNamespace).Delete(ctx, "ratings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = harness.Wait(ctx, 90*time.Second, "the new leader deleting the ratings DestinationRule", func(ctx context.Context) (bool, error) {
		_, err := east.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).Get(ctx, "ratings", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}, live...)
	if err != nil {
		t.Fatal(err)
	}
	if lead, _ := group.Leaders(ctx); len(lead) != 1 || lead[0] != second {
		t.Fatalf("after the failover %d replicas lead, want only %s", len(lead), second.Name)
	}
	logs := second.Proc.LogTail(1 << 20)
	if !strings.Contains(logs, `"msg":"leading: starting the leader duties"`) {
		t.Errorf("%s did not log starting the leader duties", second.Name)
	}
	// The first leader's credentials reached it through the Raft log: it
	// did not register again.
	if !strings.Contains(logs, `"msg":"using stored agent certificate"`) || strings.Contains(logs, `"msg":"registered"`) {
		t.Errorf("%s registered again instead of using the replicated credentials", second.Name)
	}

	// The API server's audit log names the writer of every write: both
	// leaders wrote, each in its own term, one after the other (I3).
	events, err := east.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	stints, _ := writerStints(events)
	wrote := map[string]bool{}
	for _, s := range stints {
		wrote[s.replica] = true
	}
	if !wrote[first.Name] || !wrote[second.Name] || len(wrote) != 2 {
		t.Errorf("audit log: writes by %v, want by %s and %s only", stints, first.Name, second.Name)
	}
	if broken := overlappingWriters(events); len(broken) > 0 {
		t.Errorf("audit log of east: %s", strings.Join(broken, "; "))
	}
}
