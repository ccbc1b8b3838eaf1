package app_test

import (
	"strings"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	multiclusterv1 "github.com/meshplane/meshplane/libs/gen/meshplane/multicluster/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// grantEveryCluster is the management cluster's input, with a ScopeGrant
// that lets the policies of clusters change every cluster.
func grantEveryCluster(clusters ...string) *snapshotv1.InputSnapshot {
	in := &snapshotv1.InputSnapshot{Cluster: snapshots.DefaultInstall, ScopeGrants: []*multiclusterv1.ScopeGrant{{
		Metadata: &commonv1.ObjectMeta{Name: "all", Namespace: snapshots.DefaultInstall, Generation: 1, CreationTimestamp: timestamppb.Now()},
		Spec:     &multiclusterv1.ScopeGrantSpec{Clusters: clusters, Targets: []*multiclusterv1.ScopeGrantSpec_Target{{}}},
	}}}
	snapshots.SealInput(in)
	return in
}

// takeover is gamma's input: a TrafficPolicy on east's reviews that claims
// the retries field, with a creation time from 1970, and with the
// first-seen time an agent might try to set as well.
func takeover() *snapshotv1.InputSnapshot {
	backdated := timestamppb.New(time.Unix(1, 0))
	in := &snapshotv1.InputSnapshot{Cluster: "gamma", TrafficPolicies: []*networkingv1.TrafficPolicy{{
		Metadata: &commonv1.ObjectMeta{Name: "takeover", Namespace: "default", Cluster: "gamma", Generation: 1, Uid: "gamma-1",
			CreationTimestamp: backdated, FirstSeen: backdated},
		Spec: &networkingv1.TrafficPolicySpec{
			DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
				KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{Name: "reviews", Namespace: "default", Cluster: "east"}}},
			}}},
			Policy: &networkingv1.TrafficPolicySpec_Policy{Retries: &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: 9}},
		},
	}}}
	snapshots.SealInput(in)
	return in
}

func statusJSON(o *snapshotv1.OutputSnapshot, kind, name string) string {
	for _, s := range o.GetStatuses() {
		if s.GetKind() == kind && s.GetName() == name {
			return string(s.GetStatus())
		}
	}
	return ""
}

// A workload cluster cannot take another cluster's policy's fields by
// backdating its own: conflicts are settled in the order the plane first
// saw the resources, not by the creation times agents send. The order is
// kept in the store, so it holds after a restart in which the backdated
// policy reports first.
func TestAcceptanceOrderIsWhenThePlaneFirstSawIt(t *testing.T) {
	store := newRecordStore()
	outputs := snapstore.NewMemory(newOutput)
	tr, stop := startWithStore(t, store, outputs, time.Minute)
	submitAndWait(t, tr, outputs, grantEveryCluster("gamma"))
	// East's policy, created now in east's API server.
	east := withRetries(1, 3)
	east.TrafficPolicies[0].Metadata.CreationTimestamp = timestamppb.Now()
	snapshots.SealInput(east)
	submitAndWait(t, tr, outputs, east)
	gamma := submitAndWait(t, tr, outputs, takeover())

	check := func(when string, gammaOut *snapshotv1.OutputSnapshot) {
		t.Helper()
		eastOut, ok := tr.Output("east")
		if !ok {
			t.Fatalf("%s: east has no output", when)
		}
		if vs := virtualServiceOf(eastOut); !strings.Contains(vs, `"attempts":3`) || strings.Contains(vs, `"attempts":9`) {
			t.Errorf("%s: east's VirtualService %s, want east's own retries (3), not gamma's backdated policy's (9)", when, vs)
		}
		if st := statusJSON(eastOut, domain.KindTrafficPolicy, "retries"); !strings.Contains(st, `"state":"ACCEPTED"`) {
			t.Errorf("%s: east's policy status %s, want ACCEPTED", when, st)
		}
		if st := statusJSON(gammaOut, domain.KindTrafficPolicy, "takeover"); !strings.Contains(st, `"state":"INVALID"`) || !strings.Contains(st, "retries.default.east") {
			t.Errorf("%s: gamma's backdated policy status %s, want INVALID, in conflict with east's policy", when, st)
		}
	}
	check("first seen in order", gamma)

	gammaKey := domain.ObjectKey{Cluster: "gamma", Namespace: "default", Name: "takeover"}
	var eastSeen, gammaSeen time.Time
	waitUntil(t, "both first-seen times to be stored", func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		eastSeen = store.m[domain.KindTrafficPolicy+" "+retriesKey.String()].FirstSeen
		gammaSeen = store.m[domain.KindTrafficPolicy+" "+gammaKey.String()].FirstSeen
		return !eastSeen.IsZero() && !gammaSeen.IsZero()
	})
	if !eastSeen.Before(gammaSeen) || gammaSeen.Before(time.Unix(1e9, 0)) {
		t.Fatalf("stored first-seen times: east %v, gamma %v; want east first, and gamma's not the time it sent", eastSeen, gammaSeen)
	}
	stop()

	// A new plane, with an empty output store: gamma reports before east.
	outputs2 := snapstore.NewMemory(newOutput)
	tr, _ = startWithStore(t, store, outputs2, time.Minute)
	submitAndWait(t, tr, outputs2, grantEveryCluster("gamma"))
	submitAndWait(t, tr, outputs2, takeover())
	submitAndWait(t, tr, outputs2, east)
	waitUntil(t, "gamma's policy to be translated with east's input", func() bool {
		o, _ := tr.Output("gamma")
		return strings.Contains(statusJSON(o, domain.KindTrafficPolicy, "takeover"), "retries.default.east")
	})
	gamma, _ = tr.Output("gamma")
	check("after a restart in which gamma reported first", gamma)
}
