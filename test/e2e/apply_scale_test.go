package e2e

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/test/e2e/harness"
	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// metricAtLeast waits until sample on admin is at least min, and returns
// it.
func metricAtLeast(t *testing.T, ctx context.Context, admin, sample string, min int, procs []*harness.Process) int {
	t.Helper()
	var n int
	err := harness.Wait(ctx, 60*time.Second, fmt.Sprintf("%s >= %d on %s", sample, min, admin), func(ctx context.Context) (bool, error) {
		got, err := metric(ctx, admin, sample)
		n, _ = strconv.Atoi(got)
		return err == nil && got != "" && n >= min, fmt.Errorf("%s = %q (%v)", sample, got, err)
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The agent process against a real API server, with two distribution
// replicas and Redis, applies only what changed (issue 14):
//   - a new version travels as a delta and rewrites only the object that
//     changed;
//   - with the output indexes gone from Redis, the next version comes as
//     the whole snapshot, and still only the changed object is touched;
//   - an agent restarted with nothing changed writes nothing (every
//     DestinationRule keeps its resourceVersion) and acknowledges;
//   - an owned object a user deletes or edits is put back, and counted.
func TestAgentAppliesOnlyWhatChanged(t *testing.T) {
	ctx, p, east, agentAdmin, redis := setupFaultsRedis(t)
	alive := p.running()
	rvs := resourceVersions(t, ctx, east)

	// 1. A delta.
	deltas0, _ := metric(ctx, agentAdmin, `meshplane_agent_deltas_total{outcome="applied"}`)
	if err := east.Clientset().CoreV1().Services(harness.BookinfoNamespace).Delete(ctx, "ratings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ctx, east, "ratings", alive)
	n0, _ := strconv.Atoi(deltas0)
	deltas := metricAtLeast(t, ctx, agentAdmin, `meshplane_agent_deltas_total{outcome="applied"}`, n0+1, alive)
	sameVersions(t, "after a delta", rvs, resourceVersions(t, ctx, east), "ratings")
	if v, _ := metric(ctx, agentAdmin, `meshplane_agent_deltas_total{outcome="refused"}`); v != "0" {
		t.Errorf("deltas refused: %q, want 0", v)
	}

	// 2. No index of the version the agent holds: the whole snapshot.
	keys, err := redis.Client(t).Keys(ctx, "meshplane:{meshplane}:index3:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("output indexes in Redis: %v (%v), want some", keys, err)
	}
	if err := redis.Client(t).Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := east.Clientset().CoreV1().Services(harness.BookinfoNamespace).Delete(ctx, "details", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ctx, east, "details", alive)
	waitMetric(t, ctx, p.admin("distribution-1"), `meshplane_distribution_versions_behind{cluster="east"}`, "0", alive)
	if got, _ := metric(ctx, agentAdmin, `meshplane_agent_deltas_total{outcome="applied"}`); got != strconv.Itoa(deltas) {
		t.Errorf("deltas applied went %d -> %s without an index to diff from, want the whole snapshot", deltas, got)
	}
	sameVersions(t, "after a whole snapshot", rvs, resourceVersions(t, ctx, east), "ratings", "details")

	// 3. A restart with nothing changed writes nothing.
	rvs = resourceVersions(t, ctx, east)
	stopped := p.agents[0]
	if err := stopped.Terminate(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	p.agents = slices.DeleteFunc(p.agents, func(a *harness.Process) bool { return a == stopped })
	_, agentAdmin = p.startAgent(east, "token-east-e2e-faults")
	alive = p.running()
	waitMetric(t, ctx, agentAdmin, `meshplane_agent_connected{stream="watch"}`, "1", alive)
	waitMetric(t, ctx, p.admin("distribution-1"), `meshplane_distribution_versions_behind{cluster="east"}`, "0", alive)
	sameVersions(t, "after a restart with nothing changed", rvs, resourceVersions(t, ctx, east))

	// 4. Drift: a deleted and an edited DestinationRule are put back.
	dr := east.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace)
	old, err := dr.Get(ctx, "reviews", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := dr.Delete(ctx, "reviews", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dr.Patch(ctx, "productpage", types.MergePatchType, []byte(`{"spec":{"host":"evil.example.com"}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	err = harness.Wait(ctx, 30*time.Second, "the deleted and the edited DestinationRules put back", func(ctx context.Context) (bool, error) {
		back, err := dr.Get(ctx, "reviews", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		pp, err := dr.Get(ctx, "productpage", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return back.GetUID() != old.GetUID() && specJSON(pp) != `{"host":"evil.example.com"}` && !containsHost(pp.Object, "evil.example.com"), nil
	}, alive...)
	if err != nil {
		t.Fatal(err)
	}
	metricAtLeast(t, ctx, agentAdmin, `meshplane_agent_drift_corrected_total{kind="DestinationRule"}`, 2, alive)
}

func containsHost(obj map[string]any, host string) bool {
	spec, _ := obj["spec"].(map[string]any)
	h, _ := spec["host"].(string)
	return h == host
}

// A delta that does not check out, with processes: distribution's index
// of the version the agent holds is made to claim an object the agent
// does not hold (Redis tampered with), so the next delta leaves that
// object out. The agent process refuses the delta (counted), asks for the
// whole snapshot, converges on it, and deletes nothing: every
// DestinationRule keeps its UID.
func TestAgentRefusesADeltaThatDoesNotCheckOut(t *testing.T) {
	ctx, p, east, agentAdmin, redis := setupFaultsRedis(t)
	alive := p.running()
	rdb := redis.Client(t)
	settled := func() {
		t.Helper()
		waitMetric(t, ctx, p.admin("distribution-1"), `meshplane_distribution_versions_behind{cluster="east"}`, "0", alive)
	}
	// newestIndex returns the newest version distribution kept an index
	// of for east, and the index.
	newestIndex := func() (string, snapshots.OutputIndex) {
		t.Helper()
		v, err := rdb.LIndex(ctx, "meshplane:{meshplane}:indexes3:east", 0).Result()
		if err != nil {
			t.Fatalf("the newest output index of east: %v", err)
		}
		raw, err := rdb.Get(ctx, "meshplane:{meshplane}:index3:east:"+v).Bytes()
		if err != nil {
			t.Fatalf("the output index of east version %s: %v", v, err)
		}
		idx, err := snapshots.DecodeIndex(raw)
		if err != nil {
			t.Fatal(err)
		}
		return v, idx
	}
	services := east.Clientset().CoreV1().Services(harness.BookinfoNamespace)
	ratings, err := services.Get(ctx, "ratings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	extra := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "extra", Namespace: harness.BookinfoNamespace, Labels: ratings.Labels},
		Spec:       corev1.ServiceSpec{Selector: ratings.Spec.Selector, Ports: ratings.Spec.Ports},
	}

	// A version with the Service's DestinationRule, then one without.
	settled()
	if _, err := services.Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDR(t, ctx, east, "extra", alive)
	settled()
	_, with := newestIndex()
	if err := services.Delete(ctx, "extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ctx, east, "extra", alive)
	settled()
	held, without := newestIndex()

	// The index of the version the agent holds now claims what the first
	// one held too: the DestinationRule of the Service.
	var added []snapshots.IndexEntry
	for _, e := range with.Objects {
		if _, ok := without.Objects.Get(e.Key); !ok {
			added = append(added, e)
		}
	}
	without.Objects = append(without.Objects, added...)
	slices.SortFunc(without.Objects, func(a, b snapshots.IndexEntry) int { return cmp.Compare(a.Key, b.Key) })
	if len(added) == 0 {
		t.Fatal("the version with the Service holds no object the one without lacks")
	}
	if err := rdb.Set(ctx, "meshplane:{meshplane}:index3:east:"+held, without.Encode(), goredis.KeepTTL).Err(); err != nil {
		t.Fatal(err)
	}
	uids := destinationRuleUIDs(t, ctx, east)
	refused0, _ := metric(ctx, agentAdmin, `meshplane_agent_deltas_total{outcome="refused"}`)
	n0, _ := strconv.Atoi(refused0)

	// The Service again: the delta from the tampered index leaves its
	// DestinationRule out, and the agent refuses it.
	if _, err := services.Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	metricAtLeast(t, ctx, agentAdmin, `meshplane_agent_deltas_total{outcome="refused"}`, n0+1, alive)
	waitDR(t, ctx, east, "extra", alive)
	settled()
	after := destinationRuleUIDs(t, ctx, east)
	for name, uid := range uids {
		if after[name] != uid {
			t.Errorf("DestinationRule %s: UID %s -> %q: the refused delta deleted or replaced it", name, uid, after[name])
		}
	}
	if len(after) != len(uids)+1 {
		t.Errorf("%d DestinationRules after, want the %d before and extra's", len(after), len(uids))
	}
}

// destinationRuleUIDs returns the UIDs of c's bookinfo DestinationRules by
// name.
func destinationRuleUIDs(t *testing.T, ctx context.Context, c *kubetest.Cluster) map[string]string {
	t.Helper()
	list, err := c.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, u := range list.Items {
		out[u.GetName()] = string(u.GetUID())
	}
	return out
}
