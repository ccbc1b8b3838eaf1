// Package connectrpc is translation's inbound adapter: the internal
// TranslationService over Connect, gRPC and gRPC-Web.
package connectrpc

import (
	"context"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/services/translation/internal/app"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
)

// Handler implements TranslationService.
type Handler struct {
	translationv1connect.UnimplementedTranslationServiceHandler
	t *app.Translator
}

var _ translationv1connect.TranslationServiceHandler = (*Handler)(nil)

// NewHandler returns a handler over the translator.
func NewHandler(t *app.Translator) *Handler { return &Handler{t: t} }

// NotifyEncoded is Notify with the snapshot left in its wire encoding
// (EncodedNotifyRequest is NotifyRequest on the wire). Ingest stores a
// snapshot before it notifies, so translation has often read it from the
// store already, or is reading it: then it is not decoded a second time
// (2 MB of policies at the reference estate).
func (h *Handler) NotifyEncoded(ctx context.Context, req *connect.Request[translationv1.EncodedNotifyRequest]) (*connect.Response[translationv1.NotifyResponse], error) {
	m := req.Msg
	if len(m.GetSnapshot()) == 0 {
		return h.Notify(ctx, connect.NewRequest(&translationv1.NotifyRequest{Cluster: m.GetCluster(), Version: m.GetVersion()}))
	}
	claim, err := h.t.ClaimInput(ctx, m.GetCluster(), m.GetVersion())
	if err != nil {
		return nil, toConnect(err)
	}
	if claim == nil { // held, or decoded by the store's change notice
		return connect.NewResponse(&translationv1.NotifyResponse{}), nil
	}
	defer claim.Abandon()
	snap := &snapshotv1.InputSnapshot{}
	if err := proto.Unmarshal(m.GetSnapshot(), snap); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("decode the snapshot: %w", err))
	}
	if err := claim.SubmitEncoded(snap, m.GetSnapshot()); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&translationv1.NotifyResponse{}), nil
}

// NotifyHandler serves the Notify procedure with NotifyEncoded. Mount it
// at translationv1connect.TranslationServiceNotifyProcedure, beside the
// generated handler (which it takes precedence over, being the longer
// path).
func (h *Handler) NotifyHandler(opts ...connect.HandlerOption) (string, http.Handler) {
	p := translationv1connect.TranslationServiceNotifyProcedure
	return p, connect.NewUnaryHandler(p, h.NotifyEncoded, opts...)
}

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
