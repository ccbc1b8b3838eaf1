package harness

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
)

// SimAgent is an in-process stand-in for an agent, for load tests: it has
// its own cluster certificate and its own mTLS connections, pushes input
// snapshots to ingest and watches distribution like the real agent, but its
// apply step is a no-op: it acks every object of a snapshot as applied at
// once, so a measurement through it leaves out the API server.
type SimAgent struct {
	Cluster string

	http   []*http.Client
	ingest ingestv1connect.IngestServiceClient
	dist   distributionv1connect.DistributionServiceClient

	pushMu sync.Mutex
	push   *connect.BidiStreamForClient[ingestv1.PushRequest, ingestv1.PushResponse]
	// stop ends the push stream, which outlives any one Push call.
	streamCtx context.Context
	stop      context.CancelFunc

	// Acked receives every snapshot once its ack has been recorded.
	Acked chan Acked
	// Deltas makes Watch ask for deltas from the version it acked last, as
	// the real agent does, instead of whole snapshots: set it before
	// Watch. A load test of many outputs then holds, and decodes, one
	// whole snapshot per agent instead of one per version.
	Deltas bool
}

// Acked is a version the SimAgent acknowledged, and when the ack returned:
// a whole snapshot, or with Deltas a delta from the version acked before.
type Acked struct {
	Version  string
	Snapshot *snapshotv1.OutputSnapshot
	Delta    *snapshotv1.OutputDelta
	At       time.Time
}

// Statuses are the statuses the acked version adds or changes: all of a
// whole snapshot's.
func (a Acked) Statuses() []*snapshotv1.ResourceStatus {
	if a.Delta != nil {
		return a.Delta.GetStatuses()
	}
	return a.Snapshot.GetStatuses()
}

// NewSimAgent issues a certificate for cluster from the plane's CA and
// builds clients for ingest and distribution.
func (p *Plane) NewSimAgent(cluster string) (*SimAgent, error) {
	certPEM, keyPEM, err := p.PKI.CA.IssueKeyPair(pki.LeafOptions{ID: pki.ClusterID(p.PKI.TrustDomain, cluster), TTL: 24 * time.Hour})
	if err != nil {
		return nil, fmt.Errorf("issue certificate of cluster %s: %w", cluster, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return p.NewSimAgentWithCert(cluster, cert)
}

// RegisterSimAgent registers cluster with registration, as the agent does
// (a new key, a CSR and the bootstrap token), and returns a SimAgent that
// uses the certificate it was issued: one that deregistration revokes.
func (p *Plane) RegisterSimAgent(ctx context.Context, cluster, token string) (*SimAgent, error) {
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	csr, err := pki.NewCSR(key, pki.ClusterID(p.PKI.TrustDomain, cluster))
	if err != nil {
		return nil, err
	}
	o := platform.NewClientOptions()
	o.Addr, o.CAFile, o.ServerName = p.Registration, p.PKI.RootFile(), "localhost"
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		return nil, err
	}
	defer hc.CloseIdleConnections()
	rc := registrationv1connect.NewRegistrationServiceClient(hc, platform.BaseURL(o), platform.DefaultClientOptions(o)...)
	res, err := rc.Register(ctx, connect.NewRequest(&registrationv1.RegisterRequest{Cluster: cluster, Token: token, CsrPem: csr, AgentVersion: "sim"}))
	if err != nil {
		return nil, fmt.Errorf("register cluster %s: %w", cluster, err)
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(res.Msg.GetCertificateChainPem(), keyPEM)
	if err != nil {
		return nil, err
	}
	return p.NewSimAgentWithCert(cluster, cert)
}

// NewSimAgentWithCert returns a SimAgent of cluster that presents cert.
func (p *Plane) NewSimAgentWithCert(cluster string, cert tls.Certificate) (*SimAgent, error) {
	newClient := func(addr string) (*http.Client, platform.ClientOptions, error) {
		o := platform.NewClientOptions()
		o.Addr, o.CAFile, o.ServerName = addr, p.PKI.RootFile(), "localhost"
		o.CertificateSource = func() (*tls.Certificate, error) { return &cert, nil }
		c, err := platform.NewHTTPClient(o, nil)
		return c, o, err
	}
	ic, io, err := newClient(p.Ingest)
	if err != nil {
		return nil, err
	}
	dc, do, err := newClient(p.Distribution)
	if err != nil {
		return nil, err
	}
	streamCtx, stop := context.WithCancel(context.Background())
	return &SimAgent{
		Cluster: cluster, streamCtx: streamCtx, stop: stop,
		http:   []*http.Client{ic, dc},
		ingest: ingestv1connect.NewIngestServiceClient(ic, platform.BaseURL(io), platform.DefaultClientOptions(io)...),
		dist:   distributionv1connect.NewDistributionServiceClient(dc, platform.BaseURL(do), platform.DefaultClientOptions(do)...),
		Acked:  make(chan Acked, 64),
	}, nil
}

// Push sends an input snapshot on the agent's push stream, opened on first
// use and kept until Close, and waits for ingest to accept it.
func (a *SimAgent) Push(in *snapshotv1.InputSnapshot) error {
	a.pushMu.Lock()
	defer a.pushMu.Unlock()
	if a.push == nil {
		a.push = a.ingest.Push(a.streamCtx)
	}
	if err := a.push.Send(&ingestv1.PushRequest{Snapshot: in}); err != nil {
		a.push = nil
		return fmt.Errorf("cluster %s: push: %w", a.Cluster, err)
	}
	resp, err := a.push.Receive()
	if err != nil {
		a.push = nil
		return fmt.Errorf("cluster %s: push response: %w", a.Cluster, err)
	}
	if resp.GetStoredVersion() != in.GetVersion() {
		return fmt.Errorf("cluster %s: ingest stored version %s, pushed %s", a.Cluster, resp.GetStoredVersion(), in.GetVersion())
	}
	return nil
}

// Watch follows distribution until ctx ends (whole snapshots, or deltas
// with Deltas), acking each version with every object and status applied.
// It returns the first error other than the end of ctx.
func (a *SimAgent) Watch(ctx context.Context) error {
	req := &distributionv1.WatchRequest{}
	var held string
	if a.Deltas {
		// A new stream starts from no version held in full: the first
		// response is a whole snapshot.
		req.AcceptDelta = true
	}
	stream, err := a.dist.Watch(ctx, connect.NewRequest(req))
	if err != nil {
		return fmt.Errorf("cluster %s: watch: %w", a.Cluster, err)
	}
	defer stream.Close()
	for stream.Receive() {
		got := Acked{Snapshot: stream.Msg().GetSnapshot(), Delta: stream.Msg().GetDelta()}
		var applied int
		switch {
		case got.Delta != nil:
			if got.Delta.GetBaseVersion() != held {
				return fmt.Errorf("cluster %s: a delta from %q, holding %q", a.Cluster, got.Delta.GetBaseVersion(), held)
			}
			got.Version = got.Delta.GetVersion()
			applied = len(got.Delta.GetObjects()) + len(got.Delta.GetStatuses())
		case got.Snapshot != nil:
			got.Version = got.Snapshot.GetVersion()
			applied = len(got.Snapshot.GetObjects()) + len(got.Snapshot.GetStatuses())
		default:
			continue
		}
		held = got.Version
		// Every object and status applied: counted, as the agent acks
		// them, not listed.
		counts := &distributionv1.AckCounts{Applied: uint32(applied)}
		if _, err := a.dist.Ack(ctx, connect.NewRequest(&distributionv1.AckRequest{Version: got.Version, Counts: counts})); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("cluster %s: ack %s: %w", a.Cluster, got.Version, err)
		}
		got.At = time.Now()
		select {
		case a.Acked <- got:
		case <-ctx.Done():
			return nil
		}
	}
	if err := stream.Err(); err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("cluster %s: watch stream: %w", a.Cluster, err)
	}
	return nil
}

// Ack sends one acknowledgement with the cluster's certificate, as an
// agent would, whatever it holds.
func (a *SimAgent) Ack(ctx context.Context, version string, results []*snapshotv1.ApplyResult) error {
	_, err := a.dist.Ack(ctx, connect.NewRequest(&distributionv1.AckRequest{Version: version, Results: results}))
	return err
}

// Close ends the push stream and the idle connections.
func (a *SimAgent) Close() {
	a.pushMu.Lock()
	if a.push != nil {
		_ = a.push.CloseRequest()
		_ = a.push.CloseResponse()
		a.push = nil
	}
	a.pushMu.Unlock()
	a.stop()
	for _, c := range a.http {
		c.CloseIdleConnections()
	}
}
