package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// auditedEast starts a plane on one Redis, and cluster east (with an
// audit log of writes) holding bookinfo.
func auditedEast(t *testing.T, dir string) (*harness.Plane, map[string]string, *kubetest.Cluster) {
	t.Helper()
	harness.RequireE2E(t)
	east := kubetest.Start(t, kubetest.Options{Name: "east", Audit: true})
	redis := redistest.Start(t)
	plane, tokens, err := harness.StartPlane(t.Context(), harness.PlaneOptions{BinDir: binDir, Dir: dir, RedisAddr: redis.Addr(), Clusters: []string{"east"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	if err := east.ApplyYAML(t.Context(), harness.Bookinfo("east")); err != nil {
		t.Fatal(err)
	}
	return plane, tokens, east
}

// TestAgentReplicasFailOver runs three agent processes of one cluster as a
// Raft group against a real API server and a real management plane: one
// leader applies; when it is killed another takes over and the cluster
// converges on the next change.
func TestAgentReplicasFailOver(t *testing.T) {
	ctx, dir := t.Context(), t.TempDir()
	plane, tokens, east := auditedEast(t, dir)

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

// TestFrozenLeaderWakesWithItsWritesHeld freezes (SIGSTOP) the agent
// leader in the middle of a long apply, throttled to 20 writes a second:
// the others elect a new leader, which carries on. When the old leader
// thaws, the writes it had queued must not reach the API server (the
// write fence holds them until a quorum confirms a leadership it no
// longer has). The API server's audit log is the judge: the old leader's
// writes all came before the thaw, and no two replicas' writes overlap.
func TestFrozenLeaderWakesWithItsWritesHeld(t *testing.T) {
	ctx, dir := t.Context(), t.TempDir()
	plane, tokens, east := auditedEast(t, dir)
	// 300 more Services: 300 more DestinationRules to write.
	var extra strings.Builder
	const services = 300
	for i := range services {
		fmt.Fprintf(&extra, "---\napiVersion: v1\nkind: Service\nmetadata: {name: extra-%03d, namespace: %s}\nspec: {selector: {app: reviews}, ports: [{name: http, port: 9080}]}\n", i, harness.BookinfoNamespace)
	}
	if err := east.ApplyYAML(ctx, []byte(extra.String())); err != nil {
		t.Fatal(err)
	}
	group, err := plane.StartAgentGroup(harness.AgentGroupOptions{
		BinDir: binDir, Cluster: "east", Token: tokens["east"], Kubeconfig: east.Kubeconfig(), Dir: dir,
		Args: []string{"--kube-qps", "20", "--kube-burst", "1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(group.Stop)
	procs := append(slices.Clone(plane.Procs), group.Procs()...)

	drs := func(ctx context.Context) (int, error) {
		l, err := east.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	}
	var first *harness.AgentReplica
	err = harness.Wait(ctx, 90*time.Second, "a leader applying", func(ctx context.Context) (bool, error) {
		lead, agreed := group.Leaders(ctx)
		n, err := drs(ctx)
		if len(lead) != 1 || agreed != lead[0].Name || err != nil || n < 20 {
			return false, err
		}
		first = lead[0]
		return true, nil
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := drs(ctx); n >= services {
		t.Fatalf("%d DestinationRules already: the apply ended before the freeze; throttle it more", n)
	}

	// Freeze the leader mid-apply until another has led and written.
	if err := first.Proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozenAt := time.Now()
	var thawedAt time.Time
	thaw := func() {
		if thawedAt.IsZero() {
			thawedAt = time.Now()
			first.Proc.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)
	var others []*harness.Process
	for _, r := range group.Replicas {
		if r != first {
			others = append(others, r.Proc)
		}
	}
	err = harness.Wait(ctx, 60*time.Second, "another replica leading and writing", func(ctx context.Context) (bool, error) {
		events, err := east.AuditEvents()
		if err != nil {
			return false, err
		}
		stints, _ := writerStints(events)
		return len(stints) > 0 && stints[len(stints)-1].replica != first.Name, nil
	}, append(slices.Clone(plane.Procs), others...)...)
	if err != nil {
		t.Fatal(err)
	}
	thaw()
	err = harness.Wait(ctx, 120*time.Second, "every DestinationRule applied", func(ctx context.Context) (bool, error) {
		n, err := drs(ctx)
		return err == nil && n >= services+len(harness.BookinfoServices), err
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
	// The old leader has had time to send whatever it held: the next
	// confirmations have failed, and its duties have stopped.
	err = harness.Wait(ctx, 30*time.Second, "the thawed replica to know it follows", func(ctx context.Context) (bool, error) {
		st, err := first.Raft(ctx)
		return err == nil && st.State == "Follower", nil
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}

	events, err := east.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	stints, _ := writerStints(events)
	t.Logf("writers: %v (frozen at %s, thawed at %s)", stints, frozenAt.Format("15:04:05.000000"), thawedAt.Format("15:04:05.000000"))
	// A request already sent when the process froze may be answered
	// after it; nothing may be sent after the thaw.
	for _, s := range stints {
		if s.replica == first.Name && s.lastStart.After(thawedAt) {
			t.Errorf("the frozen leader wrote after it thawed (last request received %s): %s", s.lastStart.Format("15:04:05.000000"), s)
		}
	}
	if broken := overlappingWriters(events); len(broken) > 0 {
		t.Errorf("audit log of east: %s", strings.Join(broken, "; "))
	}
}
