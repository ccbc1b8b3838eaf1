// Package connectrpc is registration's inbound adapter: RegistrationService
// and ClusterService over Connect, gRPC and gRPC-Web.
package connectrpc

import (
	"context"
	"errors"
	"log/slog"

	"connectrpc.com/connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Handler implements RegistrationService.
type Handler struct {
	registrationv1connect.UnimplementedRegistrationServiceHandler
	r       *app.Registrar
	ints    *app.Intermediates
	log     *slog.Logger
	metrics *Metrics
}

var _ registrationv1connect.RegistrationServiceHandler = (*Handler)(nil)

// NewHandler returns a handler over the registrar; metrics may be nil.
func NewHandler(r *app.Registrar, log *slog.Logger, metrics *Metrics, opts ...HandlerOption) *Handler {
	h := &Handler{r: r, log: log, metrics: metrics}
	for _, o := range opts {
		o(h)
	}
	return h
}

// HandlerOption adds an optional use case to a Handler.
type HandlerOption func(*Handler)

// Register needs no client certificate: the token stands in for it.
func (h *Handler) Register(ctx context.Context, req *connect.Request[registrationv1.RegisterRequest]) (*connect.Response[registrationv1.RegisterResponse], error) {
	issued, err := h.r.Register(ctx, req.Msg.GetCluster(), req.Msg.GetToken(), req.Msg.GetCsrPem(), req.Msg.GetAgentVersion())
	if err != nil {
		h.metrics.fail("register", err)
		return nil, h.fail(ctx, "Register", err)
	}
	h.metrics.ok("register")
	return connect.NewResponse(&registrationv1.RegisterResponse{
		CertificateChainPem: issued.ChainPEM, TrustBundlePem: issued.BundlePEM, ExpiresAt: timestamppb.New(issued.ExpiresAt),
	}), nil
}

// Renew signs for the cluster named by the caller's certificate.
func (h *Handler) Renew(ctx context.Context, req *connect.Request[registrationv1.RenewRequest]) (*connect.Response[registrationv1.RenewResponse], error) {
	cluster, err := platform.ClusterFromContext(ctx)
	if err != nil {
		return nil, err
	}
	issued, err := h.r.Renew(ctx, cluster, req.Msg.GetCsrPem(), req.Msg.GetAgentVersion())
	if err != nil {
		h.metrics.fail("renew", err)
		return nil, h.fail(ctx, "Renew", err)
	}
	h.metrics.ok("renew")
	return connect.NewResponse(&registrationv1.RenewResponse{
		CertificateChainPem: issued.ChainPEM, TrustBundlePem: issued.BundlePEM, ExpiresAt: timestamppb.New(issued.ExpiresAt),
	}), nil
}

// WithIntermediates serves SignIntermediate with ints; without it the call
// is Unimplemented.
func WithIntermediates(ints *app.Intermediates) HandlerOption {
	return func(h *Handler) { h.ints = ints }
}

// SignIntermediate signs an Istio intermediate CA for a mesh of the cluster
// named by the caller's certificate; the request never names the cluster.
func (h *Handler) SignIntermediate(ctx context.Context, req *connect.Request[registrationv1.SignIntermediateRequest]) (*connect.Response[registrationv1.SignIntermediateResponse], error) {
	if h.ints == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("SignIntermediate is not configured on this server"))
	}
	cluster, err := platform.ClusterFromContext(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	issued, err := h.ints.Sign(ctx, cluster, app.IntermediateRequest{
		VirtualMesh: domain.ObjectRef{Name: m.GetVirtualMesh().GetName(), Namespace: m.GetVirtualMesh().GetNamespace()},
		Mesh:        domain.ObjectRef{Name: m.GetMesh().GetName(), Namespace: m.GetMesh().GetNamespace()},
		CSRPEM:      m.GetCsrPem(),
		TTL:         m.GetTtl().AsDuration(),
	})
	if err != nil {
		h.metrics.fail("sign_intermediate", err)
		return nil, h.fail(ctx, "SignIntermediate", err)
	}
	h.metrics.ok("sign_intermediate")
	return connect.NewResponse(&registrationv1.SignIntermediateResponse{
		CertificatePem: issued.CertPEM, CertificateChainPem: issued.ChainPEM, RootCertificatePem: issued.RootPEM, ExpiresAt: timestamppb.New(issued.ExpiresAt),
	}), nil
}

func (h *Handler) GetTrustBundle(context.Context, *connect.Request[registrationv1.GetTrustBundleRequest]) (*connect.Response[registrationv1.GetTrustBundleResponse], error) {
	return connect.NewResponse(&registrationv1.GetTrustBundleResponse{TrustBundlePem: h.r.TrustBundle()}), nil
}

// fail maps err and logs what the caller will not see: the detail of an
// internal error.
func (h *Handler) fail(ctx context.Context, call string, err error) error {
	cerr := toConnect(err)
	if connect.CodeOf(cerr) == connect.CodeInternal && h.log != nil {
		h.log.ErrorContext(ctx, call+" failed", "error", err)
	}
	return cerr
}
