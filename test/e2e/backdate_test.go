package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/test/e2e/harness"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// A workload cluster that may select east's services (a ScopeGrant says
// so) still cannot take a field from east's older policy by backdating its
// own: cluster gamma pushes, with its own certificate, a TrafficPolicy on
// east's reviews whose creationTimestamp (and firstSeen) say 1970. The plane
// orders policies by when it first saw them: east's policy stays ACCEPTED
// and its VirtualService in east's API server keeps east's retries and gets
// no fault; gamma's policy is INVALID, in conflict with east's, accepted
// earlier.
func TestBackdatedPolicyTakesNothing(t *testing.T) {
	harness.RequireE2E(t)
	ctx := t.Context()
	clusters := kubetest.StartMany(t, kubetest.Options{Name: "east"}, kubetest.Options{Name: "mgmt", SkipIstioCRDs: true})
	east, mgmt := clusters[0], clusters[1]
	redis := redistest.Start(t)
	plane, procs := startOneCluster(t, harness.PlaneOptions{RedisAddr: redis.Addr(), ManagementKubeconfig: mgmt.Kubeconfig()}, east)
	grantScope(t, mgmt, procs, "gamma")

	// East's own policy, accepted first.
	const name = "reviews-retries"
	if err := east.ApplyYAML(ctx, reviewsPolicy(name, "    retries: {attempts: 3, perTryTimeout: 2s}\n")); err != nil {
		t.Fatal(err)
	}
	waitPolicyStatus(t, east, name, "east's policy ACCEPTED", func(st *policyStatus) bool { return st.State == "ACCEPTED" }, procs)
	err := harness.Wait(ctx, 60*time.Second, "VirtualService reviews with east's retries", func(ctx context.Context) (bool, error) {
		vs, err := reviewsVirtualService(ctx, east)
		return err == nil && strings.Contains(specJSON(vs), `"attempts":3`), client(err)
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
	before, err := reviewsVirtualService(ctx, east)
	if err != nil {
		t.Fatal(err)
	}

	// Gamma pushes its backdated policy: all of reviews' traffic aborted
	// with 503, and east's retries field.
	gamma, err := plane.NewSimAgent("gamma")
	if err != nil {
		t.Fatal(err)
	}
	defer gamma.Close()
	backdated := timestamppb.New(time.Unix(0, 0))
	in := &snapshotv1.InputSnapshot{Cluster: "gamma", TrafficPolicies: []*networkingv1.TrafficPolicy{{
		Metadata: &commonv1.ObjectMeta{Name: "takeover", Namespace: "bookinfo", Cluster: "gamma", Generation: 1, Uid: "6a1b0000-0000-0000-0000-000000000001",
			CreationTimestamp: backdated, FirstSeen: backdated},
		Spec: &networkingv1.TrafficPolicySpec{
			DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
				KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{Name: "reviews", Namespace: "bookinfo", Cluster: "east"}}},
			}}},
			Policy: &networkingv1.TrafficPolicySpec_Policy{
				Retries: &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: 9},
			},
		},
	}}}
	snapshots.SealInput(in)
	if err := gamma.Push(in); err != nil {
		t.Fatal(err)
	}

	// Translation reports gamma's policy in gamma's output: INVALID, in
	// conflict with east's policy, which was accepted earlier.
	outputs := snapstore.NewRedis(redis.Client(t), snapshots.DefaultInstall, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	var status string
	err = harness.Wait(ctx, 60*time.Second, "gamma's backdated policy to be refused", func(ctx context.Context) (bool, error) {
		e, err := outputs.Get(ctx, "gamma")
		if err != nil {
			return false, nil // not published yet
		}
		for _, s := range e.Value.GetStatuses() {
			if s.GetKind() == "TrafficPolicy" && s.GetName() == "takeover" {
				status = string(s.GetStatus())
			}
		}
		return strings.Contains(status, `"state":"INVALID"`), fmt.Errorf("status %s", status)
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status, "conflicts with TrafficPolicy "+name+".bookinfo.east, accepted earlier") {
		t.Fatalf("gamma's policy status %s, want a conflict with east's policy, accepted earlier", status)
	}
	// East's output of that translation (published before gamma's) is
	// applied: nothing of gamma's is in east's API server.
	err = harness.Wait(ctx, 60*time.Second, "east's output applied", func(ctx context.Context) (bool, error) {
		c, out, err := meshctlCheck(ctx, plane, "east")
		return err == nil && c != nil && c.Applied == "current", fmt.Errorf("meshctl check: %v\n%s", err, out)
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := reviewsVirtualService(ctx, east)
	if apierrors.IsNotFound(err) {
		t.Fatal("VirtualService reviews was deleted")
	}
	if err != nil {
		t.Fatal(err)
	}
	if spec := specJSON(vs); !strings.Contains(spec, `"attempts":3`) || strings.Contains(spec, `"attempts":9`) || vs.GetResourceVersion() != before.GetResourceVersion() {
		t.Fatalf("VirtualService reviews in east changed to %s (rv %s, was %s); the backdated policy must take nothing", spec, vs.GetResourceVersion(), before.GetResourceVersion())
	}
	st, err := readPolicyStatus(ctx, east, name)
	if err != nil || st.State != "ACCEPTED" {
		t.Fatalf("east's policy status %+v (%v), want ACCEPTED", st, err)
	}
}
