// Package connectrpc is distribution's inbound adapter: DistributionService
// over Connect, gRPC and gRPC-Web.
package connectrpc

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"connectrpc.com/connect"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/distribution/internal/app"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Handler implements DistributionService.
type Handler struct {
	distributionv1connect.UnimplementedDistributionServiceHandler
	d *app.Distributor
}

var _ distributionv1connect.DistributionServiceHandler = (*Handler)(nil)

// NewHandler returns a handler over the distributor.
func NewHandler(d *app.Distributor) *Handler { return &Handler{d: d} }

// Watch serves the caller's own cluster, named by its certificate, with
// the generated message types. WatchHandler serves the procedure instead;
// this one is what the generated interface asks for.
func (h *Handler) Watch(ctx context.Context, req *connect.Request[distributionv1.WatchRequest], stream *connect.ServerStream[distributionv1.WatchResponse]) error {
	return h.watch(ctx, req.Msg, stream.Send, func(u app.Update) error {
		m := &distributionv1.WatchResponse{}
		if err := proto.Unmarshal(encodeUpdate(u), m); err != nil {
			return fmt.Errorf("decode output version %s: %w", u.Version, err)
		}
		return stream.Send(m)
	})
}

// WatchEncoded is Watch sending the output as translation stored it, or
// the delta cut from it, without decoding it (EncodedWatchResponse is
// WatchResponse on the wire).
func (h *Handler) WatchEncoded(ctx context.Context, req *connect.Request[distributionv1.WatchRequest], stream *connect.ServerStream[distributionv1.EncodedWatchResponse]) error {
	return h.watch(ctx, req.Msg, func(*distributionv1.WatchResponse) error { return stream.Send(nil) }, func(u app.Update) error {
		return stream.Send(&distributionv1.EncodedWatchResponse{Snapshot: u.Snapshot, Delta: u.Delta})
	})
}

// WatchHandler serves the Watch procedure with WatchEncoded. Mount it
// beside the generated handler, which it takes precedence over, being the
// longer path.
func (h *Handler) WatchHandler(opts ...connect.HandlerOption) (string, http.Handler) {
	p := distributionv1connect.DistributionServiceWatchProcedure
	return p, connect.NewServerStreamHandler(p, h.WatchEncoded, opts...)
}

// encodeUpdate is the WatchResponse encoding of u.
func encodeUpdate(u app.Update) []byte {
	b, _ := proto.Marshal(&distributionv1.EncodedWatchResponse{Snapshot: u.Snapshot, Delta: u.Delta})
	return b
}

func (h *Handler) watch(ctx context.Context, req *distributionv1.WatchRequest, flush func(*distributionv1.WatchResponse) error, send func(app.Update) error) error {
	cluster, err := platform.ClusterFromContext(ctx)
	if err != nil {
		return err
	}
	// Flush the response headers now. Connect and gRPC clients return from
	// Watch only once headers arrive, and an agent that already holds the
	// current version may get no message for hours: without this it would
	// hang in the call, unable to tell a live watch from a dead dial.
	if err := flush(nil); err != nil {
		return err
	}
	r := app.WatchRequest{Have: req.GetVersion(), AcceptDelta: req.GetAcceptDelta(), DeltaBase: req.GetDeltaBase()}
	if err := h.d.WatchUpdates(ctx, cluster, r, send); err != nil {
		return toConnect(err)
	}
	return nil
}

func (h *Handler) Ack(ctx context.Context, req *connect.Request[distributionv1.AckRequest]) (*connect.Response[distributionv1.AckResponse], error) {
	cluster, err := platform.ClusterFromContext(ctx)
	if err != nil {
		return nil, err
	}
	c := req.Msg.GetCounts()
	counts := app.AckCounts{Applied: int(c.GetApplied()), Deleted: int(c.GetDeleted())}
	if err := h.d.AckCounted(ctx, cluster, req.Msg.GetVersion(), req.Msg.GetResults(), counts); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&distributionv1.AckResponse{}), nil
}

func (h *Handler) ListAcks(ctx context.Context, _ *connect.Request[distributionv1.ListAcksRequest]) (*connect.Response[distributionv1.ListAcksResponse], error) {
	recs, latest, err := h.d.ListAcks(ctx)
	if err != nil {
		return nil, toConnect(err)
	}
	watched, err := h.d.Watched(ctx)
	if err != nil {
		return nil, toConnect(err)
	}
	resp := &distributionv1.ListAcksResponse{}
	for _, r := range recs {
		ack := &distributionv1.ClusterAck{
			Cluster:       r.Cluster,
			LatestVersion: latest[r.Cluster],
			AckedVersion:  r.Version,
			ApplyErrors:   uint32(r.ApplyErrors),
			HeldDeletions: uint32(r.HeldDeletions()),
			Connected:     watched[r.Cluster],
		}
		if !r.AckedAt.IsZero() {
			ack.AckedAt = timestamppb.New(r.AckedAt)
		}
		resp.Clusters = append(resp.Clusters, ack)
		delete(watched, r.Cluster)
	}
	// Agents that watch but have acknowledged nothing the store holds
	// (yet, or since it was emptied) are listed too: connected, with no
	// acked version.
	for _, c := range slices.Sorted(maps.Keys(watched)) {
		if watched[c] {
			resp.Clusters = append(resp.Clusters, &distributionv1.ClusterAck{Cluster: c, Connected: true})
		}
	}
	return connect.NewResponse(resp), nil
}
