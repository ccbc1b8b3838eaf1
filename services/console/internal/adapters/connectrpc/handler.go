// Package connectrpc serves the ConsoleService to signed-in browsers: a
// session interceptor checks the cookie and CSRF header, and each method
// calls one use case, which authorizes the view.
package connectrpc

import (
	"context"
	"net/http"
	"time"

	"connectrpc.com/connect"
	consolev1 "github.com/meshplane/meshplane/libs/gen/meshplane/console/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/console/v1/consolev1connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"github.com/meshplane/meshplane/services/console/internal/app"
	"github.com/meshplane/meshplane/services/console/internal/domain"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Handler implements the ConsoleService.
type Handler struct {
	console  *app.Console
	sessions *app.Sessions
}

var _ consolev1connect.ConsoleServiceHandler = (*Handler)(nil)

// NewHandler builds the handler.
func NewHandler(console *app.Console, sessions *app.Sessions) *Handler {
	return &Handler{console: console, sessions: sessions}
}

// Mount returns the path and handler to mount under /api/ (with the
// prefix stripped). The session check runs inside opts' interceptors, so
// that calls it refuses are logged and counted too.
func (h *Handler) Mount(opts ...connect.HandlerOption) (string, http.Handler) {
	opts = append(opts, connect.WithInterceptors(sessionInterceptor{sessions: h.sessions}))
	return consolev1connect.NewConsoleServiceHandler(h, opts...)
}

func user(ctx context.Context) domain.User {
	s, _ := SessionFromContext(ctx)
	return s.User
}

// WhoAmI implements the ConsoleService.
func (h *Handler) WhoAmI(ctx context.Context, _ *connect.Request[consolev1.WhoAmIRequest]) (*connect.Response[consolev1.WhoAmIResponse], error) {
	s, _ := SessionFromContext(ctx)
	views, err := h.console.Views(ctx, s.User)
	if err != nil {
		return nil, toConnect(err)
	}
	res := &consolev1.WhoAmIResponse{Username: s.User.Username, Groups: s.User.Groups, SessionExpiresAt: timestamppb.New(h.sessions.Policy().ExpiresAt(s))}
	for _, v := range views {
		res.Views = append(res.Views, string(v))
	}
	return connect.NewResponse(res), nil
}

// GetOverview implements the ConsoleService.
func (h *Handler) GetOverview(ctx context.Context, _ *connect.Request[consolev1.GetOverviewRequest]) (*connect.Response[consolev1.GetOverviewResponse], error) {
	o, err := h.console.Overview(ctx, user(ctx))
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(overviewToProto(o)), nil
}

// GetGraph implements the ConsoleService.
func (h *Handler) GetGraph(ctx context.Context, req *connect.Request[consolev1.GetGraphRequest]) (*connect.Response[consolev1.GetGraphResponse], error) {
	g, err := h.console.Graph(ctx, user(ctx), time.Duration(req.Msg.GetWindowSeconds())*time.Second)
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(graphToProto(g)), nil
}

// ListPolicies implements the ConsoleService.
func (h *Handler) ListPolicies(ctx context.Context, req *connect.Request[consolev1.ListPoliciesRequest]) (*connect.Response[consolev1.ListPoliciesResponse], error) {
	ps, err := h.console.Policies(ctx, user(ctx), req.Msg.GetKind())
	if err != nil {
		return nil, toConnect(err)
	}
	res := &consolev1.ListPoliciesResponse{}
	for _, p := range ps {
		res.Policies = append(res.Policies, policyToProto(p))
	}
	return connect.NewResponse(res), nil
}

// Describe implements the ConsoleService.
func (h *Handler) Describe(ctx context.Context, req *connect.Request[consolev1.DescribeRequest]) (*connect.Response[consolev1.DescribeResponse], error) {
	m := req.Msg
	ds, err := h.console.Describe(ctx, user(ctx), m.GetKind(), m.GetName(), m.GetNamespace(), m.GetCluster())
	if err != nil {
		return nil, toConnect(err)
	}
	res := &consolev1.DescribeResponse{}
	for _, d := range ds {
		res.Descriptions = append(res.Descriptions, descriptionToProto(d))
	}
	return connect.NewResponse(res), nil
}

// GetOutput implements the ConsoleService.
func (h *Handler) GetOutput(ctx context.Context, req *connect.Request[consolev1.GetOutputRequest]) (*connect.Response[consolev1.GetOutputResponse], error) {
	o, err := h.console.Output(ctx, user(ctx), req.Msg.GetCluster(), req.Msg.GetVersion())
	if err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&consolev1.GetOutputResponse{Cluster: o.Cluster, Version: o.Version, Yaml: o.YAML, Versions: o.Versions}), nil
}

// TailAccessLogs implements the ConsoleService.
func (h *Handler) TailAccessLogs(ctx context.Context, req *connect.Request[consolev1.TailAccessLogsRequest], stream *connect.ServerStream[consolev1.TailAccessLogsResponse]) error {
	m := req.Msg
	wreq := &ingestv1.WatchAccessLogsRequest{Cluster: m.GetCluster(), Namespace: m.GetNamespace(), Workload: m.GetWorkload(), Policy: m.GetPolicy(), MinResponseCode: m.GetMinResponseCode(), Tail: m.GetTail()}
	err := h.console.TailAccessLogs(ctx, user(ctx), wreq, func(es []*observabilityv1.AccessLogEntry) error {
		return stream.Send(&consolev1.TailAccessLogsResponse{Entries: es})
	})
	return toConnect(err)
}
