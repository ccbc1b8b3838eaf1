package connectrpc

import (
	"context"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ClusterHandler implements ClusterService. The platform admits only
// service identities to it (see service.Mount); it does not check again.
type ClusterHandler struct {
	registrationv1connect.UnimplementedClusterServiceHandler
	r *app.Registrar
	h *Handler
	// helmValues are added to every CreateCluster answer: relayAddr,
	// trustDomain, caBundle.
	helmValues map[string]string
}

var _ registrationv1connect.ClusterServiceHandler = (*ClusterHandler)(nil)

// NewClusterHandler returns a handler over the registrar. helmValues are
// the install-wide values for the agent's chart.
func NewClusterHandler(r *app.Registrar, helmValues map[string]string, log *slog.Logger) *ClusterHandler {
	return &ClusterHandler{r: r, h: NewHandler(r, log, nil), helmValues: helmValues}
}

func (c *ClusterHandler) CreateCluster(ctx context.Context, req *connect.Request[registrationv1.CreateClusterRequest]) (*connect.Response[registrationv1.CreateClusterResponse], error) {
	created, err := c.r.CreateCluster(ctx, req.Msg.GetName(), req.Msg.GetRequireApproval(), req.Msg.GetTokenTtl().AsDuration())
	if err != nil {
		return nil, c.h.fail(ctx, "CreateCluster", err)
	}
	values := map[string]string{"cluster": created.Cluster.Name}
	for k, v := range c.helmValues {
		if v != "" {
			values[k] = v
		}
	}
	return connect.NewResponse(&registrationv1.CreateClusterResponse{
		Cluster:        toProto(created.Cluster),
		Token:          created.Token,
		TokenExpiresAt: timestamppb.New(created.TokenExpiresAt),
		HelmValues:     values,
	}), nil
}

func (c *ClusterHandler) ApproveCluster(ctx context.Context, req *connect.Request[registrationv1.ApproveClusterRequest]) (*connect.Response[registrationv1.ApproveClusterResponse], error) {
	cl, err := c.r.ApproveCluster(ctx, req.Msg.GetName())
	if err != nil {
		return nil, c.h.fail(ctx, "ApproveCluster", err)
	}
	return connect.NewResponse(&registrationv1.ApproveClusterResponse{Cluster: toProto(cl)}), nil
}

func (c *ClusterHandler) DeregisterCluster(ctx context.Context, req *connect.Request[registrationv1.DeregisterClusterRequest]) (*connect.Response[registrationv1.DeregisterClusterResponse], error) {
	cl, n, err := c.r.DeregisterCluster(ctx, req.Msg.GetName())
	if err != nil {
		return nil, c.h.fail(ctx, "DeregisterCluster", err)
	}
	return connect.NewResponse(&registrationv1.DeregisterClusterResponse{Cluster: toProto(cl), RevokedCertificates: int32(n)}), nil
}

func (c *ClusterHandler) GetCluster(ctx context.Context, req *connect.Request[registrationv1.GetClusterRequest]) (*connect.Response[registrationv1.GetClusterResponse], error) {
	cl, err := c.r.GetCluster(ctx, req.Msg.GetName())
	if err != nil {
		return nil, c.h.fail(ctx, "GetCluster", err)
	}
	return connect.NewResponse(&registrationv1.GetClusterResponse{Cluster: toProto(cl)}), nil
}

func (c *ClusterHandler) ListClusters(ctx context.Context, _ *connect.Request[registrationv1.ListClustersRequest]) (*connect.Response[registrationv1.ListClustersResponse], error) {
	cs, err := c.r.ListClusters(ctx)
	if err != nil {
		return nil, c.h.fail(ctx, "ListClusters", err)
	}
	out := make([]*registrationv1.Cluster, len(cs))
	for i, cl := range cs {
		out[i] = toProto(cl)
	}
	return connect.NewResponse(&registrationv1.ListClustersResponse{Clusters: out}), nil
}

var statusToProto = map[domain.Status]registrationv1.ClusterStatus{
	domain.StatusPendingApproval: registrationv1.ClusterStatus_CLUSTER_STATUS_PENDING_APPROVAL,
	domain.StatusApproved:        registrationv1.ClusterStatus_CLUSTER_STATUS_APPROVED,
	domain.StatusRegistered:      registrationv1.ClusterStatus_CLUSTER_STATUS_REGISTERED,
	domain.StatusDeregistered:    registrationv1.ClusterStatus_CLUSTER_STATUS_DEREGISTERED,
}

func toProto(c domain.Cluster) *registrationv1.Cluster {
	out := &registrationv1.Cluster{
		Name:         c.Name,
		Status:       statusToProto[c.Status],
		AgentVersion: c.AgentVersion,
		FirstSeen:    ts(c.FirstSeen),
		LastSeen:     ts(c.LastSeen),
		CreatedAt:    ts(c.CreatedAt),
	}
	if latest, ok := c.Latest(); ok {
		out.CertificateSerial = latest.Serial
		out.CertificateExpiresAt = ts(latest.NotAfter)
	}
	return out
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
