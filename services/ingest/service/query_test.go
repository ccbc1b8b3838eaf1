package service_test

import (
	"slices"
	"testing"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// estateSnapshot is a sealed snapshot of cluster with an istiod mesh, and a
// workload and a destination per "namespace/name" service.
func estateSnapshot(cluster string, services ...[2]string) *snapshotv1.InputSnapshot {
	s := &snapshotv1.InputSnapshot{Cluster: cluster, Agent: &snapshotv1.AgentInfo{Version: "v1.2.3", Replica: "agent-0"},
		Meshes: []*discoveryv1.Mesh{{Metadata: &commonv1.ObjectMeta{Name: "istiod-istio-system-" + cluster, Namespace: "istio-system", Cluster: cluster}}},
	}
	for _, svc := range services {
		ns, name := svc[0], svc[1]
		s.Workloads = append(s.Workloads, &discoveryv1.Workload{Metadata: &commonv1.ObjectMeta{Name: name + "-v1-" + ns + "-" + cluster, Namespace: ns, Cluster: cluster}})
		s.Destinations = append(s.Destinations, &discoveryv1.Destination{
			Metadata: &commonv1.ObjectMeta{Name: name + "-" + ns + "-" + cluster, Namespace: ns, Cluster: cluster},
			Spec: &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
				Ref: &commonv1.ClusterObjectRef{Name: name, Namespace: ns, Cluster: cluster},
			}}},
		})
	}
	snapshots.SealInput(s)
	return s
}

func names[T interface{ GetMetadata() *commonv1.ObjectMeta }](objs []T) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, o.GetMetadata().GetName())
	}
	return out
}

func TestQueryDiscovered(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			cfg := memoryConfig()
			if backend == "redis" {
				cfg.Redis.Addrs = redistest.Start(t).Addr()
			}
			e := newEnv(t, cfg)
			east := estateSnapshot("east", [2]string{"bookinfo", "reviews"}, [2]string{"bookinfo", "ratings"}, [2]string{"shop", "cart"})
			west := estateSnapshot("west", [2]string{"bookinfo", "reviews"})
			for id, s := range map[string]*snapshotv1.InputSnapshot{eastID: east, westID: west} {
				stream := e.client(t, id, nil).Push(streamCtx(t))
				if _, err := push(t, stream, s); err != nil {
					t.Fatalf("push %s: %v", s.GetCluster(), err)
				}
				_ = stream.CloseRequest()
				_ = stream.CloseResponse()
			}

			for _, p := range protocols {
				t.Run(p.name, func(t *testing.T) {
					c := e.client(t, translation, p.opts)
					for _, tc := range []struct {
						name                            string
						filter                          *ingestv1.DiscoveryFilter
						meshes, workloads, destinations []string
					}{
						{
							name:         "no filter",
							meshes:       []string{"istiod-istio-system-east", "istiod-istio-system-west"},
							workloads:    []string{"ratings-v1-bookinfo-east", "reviews-v1-bookinfo-east", "cart-v1-shop-east", "reviews-v1-bookinfo-west"},
							destinations: []string{"ratings-bookinfo-east", "reviews-bookinfo-east", "cart-shop-east", "reviews-bookinfo-west"},
						},
						{
							name:         "cluster",
							filter:       &ingestv1.DiscoveryFilter{Cluster: "west"},
							meshes:       []string{"istiod-istio-system-west"},
							workloads:    []string{"reviews-v1-bookinfo-west"},
							destinations: []string{"reviews-bookinfo-west"},
						},
						{
							name:         "namespace",
							filter:       &ingestv1.DiscoveryFilter{Namespace: "shop"},
							meshes:       []string{},
							workloads:    []string{"cart-v1-shop-east"},
							destinations: []string{"cart-shop-east"},
						},
						{
							name:         "name substring",
							filter:       &ingestv1.DiscoveryFilter{NameContains: "review"},
							meshes:       []string{},
							workloads:    []string{"reviews-v1-bookinfo-east", "reviews-v1-bookinfo-west"},
							destinations: []string{"reviews-bookinfo-east", "reviews-bookinfo-west"},
						},
						{
							name:         "all fields together",
							filter:       &ingestv1.DiscoveryFilter{Cluster: "east", Namespace: "bookinfo", NameContains: "rat"},
							meshes:       []string{},
							workloads:    []string{"ratings-v1-bookinfo-east"},
							destinations: []string{"ratings-bookinfo-east"},
						},
						{
							name:         "cluster that never pushed",
							filter:       &ingestv1.DiscoveryFilter{Cluster: "north"},
							meshes:       []string{},
							workloads:    []string{},
							destinations: []string{},
						},
					} {
						t.Run(tc.name, func(t *testing.T) {
							m, err := c.ListMeshes(t.Context(), connect.NewRequest(&ingestv1.ListMeshesRequest{Filter: tc.filter}))
							if err != nil {
								t.Fatalf("ListMeshes: %v", err)
							}
							w, err := c.ListWorkloads(t.Context(), connect.NewRequest(&ingestv1.ListWorkloadsRequest{Filter: tc.filter}))
							if err != nil {
								t.Fatalf("ListWorkloads: %v", err)
							}
							d, err := c.ListDestinations(t.Context(), connect.NewRequest(&ingestv1.ListDestinationsRequest{Filter: tc.filter}))
							if err != nil {
								t.Fatalf("ListDestinations: %v", err)
							}
							if got := names(m.Msg.GetMeshes()); !slices.Equal(got, tc.meshes) {
								t.Errorf("meshes %v, want %v", got, tc.meshes)
							}
							if got := names(w.Msg.GetWorkloads()); !slices.Equal(got, tc.workloads) {
								t.Errorf("workloads %v, want %v", got, tc.workloads)
							}
							if got := names(d.Msg.GetDestinations()); !slices.Equal(got, tc.destinations) {
								t.Errorf("destinations %v, want %v", got, tc.destinations)
							}
						})
					}
				})
			}
		})
	}
}

// The query API is for management services and tools: an agent's
// certificate is refused.
func TestQueryAccess(t *testing.T) {
	e := newEnv(t, memoryConfig())
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := e.client(t, eastID, p.opts)
			_, err := c.ListMeshes(t.Context(), connect.NewRequest(&ingestv1.ListMeshesRequest{}))
			wantCode(t, err, connect.CodePermissionDenied)
			_, err = c.ListWorkloads(t.Context(), connect.NewRequest(&ingestv1.ListWorkloadsRequest{}))
			wantCode(t, err, connect.CodePermissionDenied)
			_, err = c.ListDestinations(t.Context(), connect.NewRequest(&ingestv1.ListDestinationsRequest{}))
			wantCode(t, err, connect.CodePermissionDenied)
		})
	}
}
