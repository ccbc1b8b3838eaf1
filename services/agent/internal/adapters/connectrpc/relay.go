// Package connectrpc is the agent's outbound adapter: Connect clients of
// registration, ingest and distribution.
package connectrpc

import (
	"context"
	"errors"
	"io"

	"connectrpc.com/connect"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/app"
)

// Registrar calls RegistrationService.Register.
type Registrar struct {
	client       registrationv1connect.RegistrationServiceClient
	agentVersion string
}

var _ app.Registrar = (*Registrar)(nil)

// NewRegistrar returns a registrar over a client that presents no
// certificate.
func NewRegistrar(client registrationv1connect.RegistrationServiceClient, agentVersion string) *Registrar {
	return &Registrar{client: client, agentVersion: agentVersion}
}

func (r *Registrar) Register(ctx context.Context, cluster, token string, csrPEM []byte) ([]byte, []byte, error) {
	resp, err := r.client.Register(ctx, connect.NewRequest(&registrationv1.RegisterRequest{
		Cluster: cluster, Token: token, CsrPem: csrPEM, AgentVersion: r.agentVersion,
	}))
	if err != nil {
		return nil, nil, err
	}
	return resp.Msg.GetCertificateChainPem(), resp.Msg.GetTrustBundlePem(), nil
}

// Relay is the management plane's ingest and distribution services.
type Relay struct {
	ingest       ingestv1connect.IngestServiceClient
	dist         distributionv1connect.DistributionServiceClient
	agentVersion string
}

var _ app.Relay = (*Relay)(nil)

// NewRelay returns a relay over mTLS clients.
func NewRelay(ingest ingestv1connect.IngestServiceClient, dist distributionv1connect.DistributionServiceClient, agentVersion string) *Relay {
	return &Relay{ingest: ingest, dist: dist, agentVersion: agentVersion}
}

func (r *Relay) OpenPush(ctx context.Context) (app.PushStream, error) {
	return &pushStream{s: r.ingest.Push(ctx)}, nil
}

type pushStream struct {
	s *connect.BidiStreamForClient[ingestv1.PushRequest, ingestv1.PushResponse]
}

func (p *pushStream) Send(s *snapshotv1.InputSnapshot) error {
	err := p.s.Send(&ingestv1.PushRequest{Snapshot: s})
	if errors.Is(err, io.EOF) {
		// The server ended the stream; its reason comes from Receive.
		_, rerr := p.s.Receive()
		if rerr != nil {
			return rerr
		}
	}
	return err
}

func (p *pushStream) Receive() (string, error) {
	resp, err := p.s.Receive()
	if err != nil {
		return "", err
	}
	return resp.GetStoredVersion(), nil
}

func (p *pushStream) Close() error {
	return errors.Join(p.s.CloseRequest(), p.s.CloseResponse())
}

func (r *Relay) Watch(ctx context.Context, have string) (app.WatchStream, error) {
	s, err := r.dist.Watch(ctx, connect.NewRequest(&distributionv1.WatchRequest{Version: have, AgentVersion: r.agentVersion}))
	if err != nil {
		return nil, err
	}
	return &watchStream{s: s}, nil
}

type watchStream struct {
	s *connect.ServerStreamForClient[distributionv1.WatchResponse]
}

func (w *watchStream) Receive() (*snapshotv1.OutputSnapshot, error) {
	if !w.s.Receive() {
		if err := w.s.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	return w.s.Msg().GetSnapshot(), nil
}

func (w *watchStream) Close() error { return w.s.Close() }

func (r *Relay) Ack(ctx context.Context, version string, results []*snapshotv1.ApplyResult) error {
	_, err := r.dist.Ack(ctx, connect.NewRequest(&distributionv1.AckRequest{Version: version, Results: results}))
	return err
}
