package service_test

import (
	"testing"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Describe, over mTLS, returns the destinations of the last translation
// with the policies applied to them, filtered; cluster identities may not
// call it.
func TestDescribe(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t)
			ingest := e.client(t, ingestID, p.opts)
			in := input("east", "reviews", "ratings")
			in.TrafficPolicies = []*networkingv1.TrafficPolicy{{
				Metadata: &commonv1.ObjectMeta{Name: "reviews-timeout", Namespace: "default", Cluster: "east", Generation: 3},
				Spec: &networkingv1.TrafficPolicySpec{
					DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
						KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{Name: "reviews"}}},
					}}},
					Policy: &networkingv1.TrafficPolicySpec_Policy{RequestTimeout: durationpb.New(2e9)},
				},
			}}
			snapshots.SealInput(in)
			if _, err := ingest.Notify(t.Context(), connect.NewRequest(&translationv1.NotifyRequest{Cluster: "east", Version: in.GetVersion(), Snapshot: in})); err != nil {
				t.Fatalf("Notify: %v", err)
			}
			var res *translationv1.DescribeResponse
			eventually(t, "Describe to show the translated destinations", func() bool {
				r, err := ingest.Describe(t.Context(), connect.NewRequest(&translationv1.DescribeRequest{Cluster: "east"}))
				if err != nil {
					t.Fatalf("Describe: %v", err)
				}
				res = r.Msg
				return len(res.GetDestinations()) == 2
			})
			if n := res.GetDestinations()[0].GetSpec().GetKubeService().GetRef().GetName(); n != "ratings" {
				t.Errorf("first destination %q, want ratings (sorted by name)", n)
			}
			r, err := ingest.Describe(t.Context(), connect.NewRequest(&translationv1.DescribeRequest{Cluster: "east", Namespace: "default", Name: "reviews"}))
			if err != nil {
				t.Fatalf("Describe reviews: %v", err)
			}
			if len(r.Msg.GetDestinations()) != 1 {
				t.Fatalf("Describe reviews: %d destinations, want 1", len(r.Msg.GetDestinations()))
			}
			applied := r.Msg.GetDestinations()[0].GetStatus().GetAppliedTrafficPolicies()
			if len(applied) != 1 || applied[0].GetRef().GetName() != "reviews-timeout" || applied[0].GetObservedGeneration() != 3 {
				t.Fatalf("reviews: applied traffic policies %v, want reviews-timeout at generation 3", applied)
			}
			if got := r.Msg.GetDestinations()[0].GetStatus().GetLocalFqdn(); got != "reviews.default.svc.cluster.local" {
				t.Errorf("local FQDN %q", got)
			}
			none, err := ingest.Describe(t.Context(), connect.NewRequest(&translationv1.DescribeRequest{Cluster: "west"}))
			if err != nil {
				t.Fatalf("Describe west: %v", err)
			}
			if len(none.Msg.GetDestinations())+len(none.Msg.GetMeshes())+len(none.Msg.GetWorkloads()) != 0 {
				t.Errorf("Describe of an unknown cluster returned %v", none.Msg)
			}

			_, err = e.client(t, eastID, p.opts).Describe(t.Context(), connect.NewRequest(&translationv1.DescribeRequest{}))
			wantCode(t, err, connect.CodePermissionDenied)
		})
	}
}
