package istiotest

import (
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// DescribeVirtualHost says where each route goes, its timeout and
// retries, as the demo's route command prints them.
func TestDescribeVirtualHost(t *testing.T) {
	vh := &routev3.VirtualHost{
		Name:    "reviews.bookinfo.svc.cluster.local:9080",
		Domains: []string{"reviews.bookinfo.svc.cluster.local", "reviews"},
		Routes: []*routev3.Route{
			{
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/health"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "outbound|9080|version-v1|reviews.bookinfo.svc.cluster.local"},
				}},
			},
			{
				Name:  "default",
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
						{Name: "outbound|9080|version-v1|reviews.bookinfo.svc.cluster.local", Weight: wrapperspb.UInt32(80)},
						{Name: "outbound|9080|version-v2|reviews.bookinfo.svc.cluster.local", Weight: wrapperspb.UInt32(20)},
					}}},
					Timeout: durationpb.New(7 * time.Second),
					RetryPolicy: &routev3.RetryPolicy{RetryOn: "connect-failure", NumRetries: wrapperspb.UInt32(4),
						PerTryTimeout: durationpb.New(2 * time.Second)},
				}},
			},
		},
	}
	want := `virtual host reviews.bookinfo.svc.cluster.local:9080 (domains reviews.bookinfo.svc.cluster.local, reviews)
  route 1, match path "/health"
    to outbound|9080|version-v1|reviews.bookinfo.svc.cluster.local
    timeout none
    retries none
  route 2 (default), match prefix "/"
    to outbound|9080|version-v1|reviews.bookinfo.svc.cluster.local weight 80, outbound|9080|version-v2|reviews.bookinfo.svc.cluster.local weight 20
    timeout 7s
    retries 4, per try timeout 2s, on connect-failure
`
	if got := DescribeVirtualHost(vh); got != want {
		t.Errorf("DescribeVirtualHost:\n%s\nwant:\n%s", got, strings.TrimSpace(want))
	}
}
