package connectrpc

import (
	"context"

	"connectrpc.com/connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	"github.com/meshplane/meshplane/services/agent/internal/app"
)

// Renewer calls RegistrationService.Renew over mTLS with the agent's
// current certificate.
type Renewer struct {
	client       registrationv1connect.RegistrationServiceClient
	agentVersion string
}

var _ app.Renewer = (*Renewer)(nil)

// NewRenewer returns a renewer over a client that presents the agent's
// certificate.
func NewRenewer(client registrationv1connect.RegistrationServiceClient, agentVersion string) *Renewer {
	return &Renewer{client: client, agentVersion: agentVersion}
}

func (r *Renewer) Renew(ctx context.Context, csrPEM []byte) ([]byte, []byte, error) {
	resp, err := r.client.Renew(ctx, connect.NewRequest(&registrationv1.RenewRequest{CsrPem: csrPEM, AgentVersion: r.agentVersion}))
	if err != nil {
		return nil, nil, err
	}
	return resp.Msg.GetCertificateChainPem(), resp.Msg.GetTrustBundlePem(), nil
}
