package connectrpc

import (
	"context"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"google.golang.org/protobuf/types/known/durationpb"
)

// IntermediateSigner calls RegistrationService.SignIntermediate over mTLS
// with the agent's current certificate: the cluster the server signs for
// is the one the certificate names.
type IntermediateSigner struct {
	client registrationv1connect.RegistrationServiceClient
}

var _ app.IntermediateSigner = (*IntermediateSigner)(nil)

// NewIntermediateSigner returns a signer over a client that presents the
// agent's certificate.
func NewIntermediateSigner(client registrationv1connect.RegistrationServiceClient) *IntermediateSigner {
	return &IntermediateSigner{client: client}
}

func (s *IntermediateSigner) SignIntermediate(ctx context.Context, req app.IntermediateRequest) (app.SignedIntermediate, error) {
	msg := &registrationv1.SignIntermediateRequest{
		VirtualMesh: &commonv1.ObjectRef{Namespace: req.VirtualMeshNamespace, Name: req.VirtualMeshName},
		Mesh:        &commonv1.ObjectRef{Namespace: req.MeshNamespace, Name: req.MeshName},
		CsrPem:      req.CSRPEM,
	}
	if req.TTL > 0 {
		msg.Ttl = durationpb.New(req.TTL)
	}
	resp, err := s.client.SignIntermediate(ctx, connect.NewRequest(msg))
	if err != nil {
		return app.SignedIntermediate{}, err
	}
	return app.SignedIntermediate{
		CertPEM:  resp.Msg.GetCertificatePem(),
		ChainPEM: resp.Msg.GetCertificateChainPem(),
		RootPEM:  resp.Msg.GetRootCertificatePem(),
	}, nil
}
