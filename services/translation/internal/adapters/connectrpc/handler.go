// Package connectrpc is translation's inbound adapter: the internal
// TranslationService over Connect, gRPC and gRPC-Web.
package connectrpc

import (
	"context"

	"connectrpc.com/connect"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/services/translation/internal/app"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
)

// Handler implements TranslationService.
type Handler struct {
	translationv1connect.UnimplementedTranslationServiceHandler
	t *app.Translator
}

var _ translationv1connect.TranslationServiceHandler = (*Handler)(nil)

// NewHandler returns a handler over the translator.
func NewHandler(t *app.Translator) *Handler { return &Handler{t: t} }

func (h *Handler) Notify(ctx context.Context, req *connect.Request[translationv1.NotifyRequest]) (*connect.Response[translationv1.NotifyResponse], error) {
	var err error
	if req.Msg.GetSnapshot() != nil {
		err = h.t.Submit(req.Msg.GetCluster(), req.Msg.GetSnapshot())
	} else {
		err = h.t.Refresh(ctx, req.Msg.GetCluster())
	}
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&translationv1.NotifyResponse{}), nil
}

func (h *Handler) GetOutputSnapshot(_ context.Context, req *connect.Request[translationv1.GetOutputSnapshotRequest]) (*connect.Response[translationv1.GetOutputSnapshotResponse], error) {
	out, ok := h.t.Output(req.Msg.GetCluster())
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, errNoOutput(req.Msg.GetCluster()))
	}
	return connect.NewResponse(&translationv1.GetOutputSnapshotResponse{Snapshot: out}), nil
}

func (h *Handler) GetStatus(context.Context, *connect.Request[translationv1.GetStatusRequest]) (*connect.Response[translationv1.GetStatusResponse], error) {
	safe, waiting := h.t.SafeMode()
	return connect.NewResponse(&translationv1.GetStatusResponse{
		SafeMode:        safe,
		ClustersWaiting: waiting,
		OutputVersions:  h.t.OutputVersions(),
		MissingClusters: h.t.MissingClusters(),
	}), nil
}

func (h *Handler) Describe(_ context.Context, req *connect.Request[translationv1.DescribeRequest]) (*connect.Response[translationv1.DescribeResponse], error) {
	d := h.t.Describe(domain.Filter{Cluster: req.Msg.GetCluster(), Namespace: req.Msg.GetNamespace(), Name: req.Msg.GetName()})
	return connect.NewResponse(&translationv1.DescribeResponse{Meshes: d.Meshes, Workloads: d.Workloads, Destinations: d.Destinations}), nil
}
