// Package connectrpc holds ingest's Connect adapters: the inbound
// IngestService, and the outbound notifier that calls translation.
package connectrpc

import (
	"context"
	"log/slog"

	"connectrpc.com/connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Handler implements IngestService.
type Handler struct {
	ingestv1connect.UnimplementedIngestServiceHandler
	in  *app.Ingestor
	log *slog.Logger
}

var _ ingestv1connect.IngestServiceHandler = (*Handler)(nil)

// NewHandler returns a handler over the ingestor.
func NewHandler(in *app.Ingestor, log *slog.Logger) *Handler { return &Handler{in: in, log: log} }

func (h *Handler) ListClusters(context.Context, *connect.Request[ingestv1.ListClustersRequest]) (*connect.Response[ingestv1.ListClustersResponse], error) {
	resp := &ingestv1.ListClustersResponse{}
	for _, st := range h.in.Clusters() {
		c := &ingestv1.ClusterConnectivity{
			Cluster: st.Cluster, Connected: st.Connections > 0, Stale: st.Stale, Version: st.Version,
			AgentVersion: st.AgentVersion, Replica: st.Replica, Management: st.Management,
		}
		if !st.LastPush.IsZero() {
			c.LastPush = timestamppb.New(st.LastPush)
		}
		if r := st.Refused; r != nil {
			c.Refused = &ingestv1.PushRefusal{Reason: r.Reason, Message: r.Message, RefusedAt: timestamppb.New(r.At)}
		}
		resp.Clusters = append(resp.Clusters, c)
	}
	return connect.NewResponse(resp), nil
}

func (h *Handler) GetInputSnapshot(ctx context.Context, req *connect.Request[ingestv1.GetInputSnapshotRequest]) (*connect.Response[ingestv1.GetInputSnapshotResponse], error) {
	s, err := h.in.Snapshot(ctx, req.Msg.GetCluster())
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&ingestv1.GetInputSnapshotResponse{Snapshot: s}), nil
}

func discoveryFilter(f *ingestv1.DiscoveryFilter) app.DiscoveryFilter {
	return app.DiscoveryFilter{Cluster: f.GetCluster(), Namespace: f.GetNamespace(), NameContains: f.GetNameContains()}
}

func (h *Handler) ListMeshes(ctx context.Context, req *connect.Request[ingestv1.ListMeshesRequest]) (*connect.Response[ingestv1.ListMeshesResponse], error) {
	meshes, err := h.in.Meshes(ctx, discoveryFilter(req.Msg.GetFilter()))
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&ingestv1.ListMeshesResponse{Meshes: meshes}), nil
}

func (h *Handler) ListWorkloads(ctx context.Context, req *connect.Request[ingestv1.ListWorkloadsRequest]) (*connect.Response[ingestv1.ListWorkloadsResponse], error) {
	workloads, err := h.in.Workloads(ctx, discoveryFilter(req.Msg.GetFilter()))
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&ingestv1.ListWorkloadsResponse{Workloads: workloads}), nil
}

func (h *Handler) ListDestinations(ctx context.Context, req *connect.Request[ingestv1.ListDestinationsRequest]) (*connect.Response[ingestv1.ListDestinationsResponse], error) {
	destinations, err := h.in.Destinations(ctx, discoveryFilter(req.Msg.GetFilter()))
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&ingestv1.ListDestinationsResponse{Destinations: destinations}), nil
}
