// Package connectrpc is the agent's outbound adapter: Connect clients of
// registration, ingest and distribution.
package connectrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"connectrpc.com/connect"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
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
//
// Distribution may be reached through several addresses (replicas, or
// their Services in several places). The relay uses one at a time: Watch
// starts with the one that served last and moves to the next when a dial
// fails, and a watch stream that breaks makes the next Watch start with the
// following address. Acks go to the address of the current watch and fall
// back to the others. Any replica serves any agent, and versions are
// content hashes, so a move to another replica re-sends nothing the agent
// already holds.
type Relay struct {
	ingest       *IngestPushClient
	dists        []distributionv1connect.DistributionServiceClient
	agentVersion string

	// cur indexes dists: the address to try first.
	cur atomic.Int64

	// held is the last snapshot a watch returned, which the agent holds in
	// full: deltas are asked for from it and applied to it. It holds none
	// at start and after a delta that did not check out.
	held snapshots.DeltaReceiver
	// noDeltas asks for whole snapshots only.
	noDeltas bool
	// onDelta observes each delta received: applied, or refused because it
	// did not check out.
	onDelta func(applied bool)
}

var _ app.Relay = (*Relay)(nil)

// IngestPushClient calls IngestService.Push with EncodedPushRequest (the
// same wire format as PushRequest): the agent sends the canonical encoding
// that its snapshot's version hashes, and ingest checks and stores those
// bytes without decoding and encoding the snapshot again.
type IngestPushClient struct {
	c *connect.Client[ingestv1.EncodedPushRequest, ingestv1.PushResponse]
}

// NewIngestPushClient returns a Push client of the ingest service at
// baseURL, with the client options opts.
func NewIngestPushClient(httpClient connect.HTTPClient, baseURL string, opts ...connect.ClientOption) *IngestPushClient {
	method := ingestv1.File_meshplane_ingest_v1_ingest_proto.Services().ByName("IngestService").Methods().ByName("Push")
	opts = append(append([]connect.ClientOption{}, opts...), connect.WithSchema(method))
	return &IngestPushClient{c: connect.NewClient[ingestv1.EncodedPushRequest, ingestv1.PushResponse](
		httpClient, baseURL+ingestv1connect.IngestServicePushProcedure, opts...)}
}

// NewRelay returns a relay over mTLS clients. dists must not be empty.
func NewRelay(ingest *IngestPushClient, dists []distributionv1connect.DistributionServiceClient, agentVersion string, opts ...RelayOption) *Relay {
	r := &Relay{ingest: ingest, dists: dists, agentVersion: agentVersion}
	for _, o := range opts {
		o(r)
	}
	return r
}

// RelayOption sets an optional setting of a Relay.
type RelayOption func(*Relay)

// WithDeltas sets whether watches ask for deltas (without the option,
// they do), and a function told of each delta received: whether it
// checked out.
func WithDeltas(on bool, observe func(applied bool)) RelayOption {
	return func(r *Relay) { r.noDeltas, r.onDelta = !on, observe }
}

// order returns the indexes of dists starting with the current one.
func (r *Relay) order() []int {
	n := len(r.dists)
	start := int(r.cur.Load()) % n
	out := make([]int, n)
	for i := range n {
		out[i] = (start + i) % n
	}
	return out
}

// moveOff makes the address after i the first to try, unless another
// caller has already moved off i.
func (r *Relay) moveOff(i int) {
	r.cur.CompareAndSwap(int64(i), int64((i+1)%len(r.dists)))
}

// failover reports whether an error may be cured by another replica.
func failover(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeDeadlineExceeded, connect.CodeAborted, connect.CodeInternal:
		return true
	}
	return false
}

func (r *Relay) OpenPush(ctx context.Context) (app.PushStream, error) {
	return &pushStream{s: r.ingest.c.CallBidiStream(ctx)}, nil
}

type pushStream struct {
	s          *connect.BidiStreamForClient[ingestv1.EncodedPushRequest, ingestv1.PushResponse]
	sendClosed atomic.Bool
}

// Send sends s in its canonical encoding, the one its version hashes.
func (p *pushStream) Send(s *snapshotv1.InputSnapshot) error {
	e, err := snapshots.EncodeInput(s)
	if err != nil {
		return err
	}
	err = p.s.Send(&ingestv1.EncodedPushRequest{Snapshot: e.Data})
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

func (p *pushStream) CloseSend() error {
	if p.sendClosed.Swap(true) {
		return nil
	}
	return p.s.CloseRequest()
}

func (p *pushStream) Close() error {
	return errors.Join(p.CloseSend(), p.s.CloseResponse())
}

func (r *Relay) Watch(ctx context.Context, have string) (app.WatchStream, error) {
	var errs []error
	for _, i := range r.order() {
		req := &distributionv1.WatchRequest{Version: have, AgentVersion: r.agentVersion, AcceptDelta: !r.noDeltas}
		if !r.noDeltas {
			req.DeltaBase = r.held.Version()
		}
		s, err := r.dists[i].Watch(ctx, connect.NewRequest(req))
		if err == nil {
			r.cur.Store(int64(i))
			return &watchStream{s: s, broken: func() { r.moveOff(i) }, relay: r}, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil || !failover(err) {
			break
		}
		r.moveOff(i)
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, fmt.Errorf("every distribution address failed: %w", errors.Join(errs...))
}

type watchStream struct {
	s      *connect.ServerStreamForClient[distributionv1.WatchResponse]
	broken func()
	relay  *Relay
}

// Receive returns the next version. A delta is applied to the snapshot
// the relay holds and returned only when the state it makes is the
// version it names (snapshots.ApplyDelta): one that does not check out is
// an error, and the next watch asks for the whole snapshot, so the agent
// never applies, or garbage-collects from, a state the plane did not send.
func (w *watchStream) Receive() (*snapshotv1.OutputSnapshot, error) {
	if !w.s.Receive() {
		err := w.s.Err()
		if err == nil {
			err = io.EOF
		}
		// The replica went away or ended the stream: start the next
		// watch elsewhere, unless the agent itself cancelled.
		if connect.CodeOf(err) != connect.CodeCanceled {
			w.broken()
		}
		return nil, err
	}
	msg := w.s.Msg()
	if d := msg.GetDelta(); d != nil && msg.GetSnapshot() == nil {
		// A delta that does not check out leaves nothing held: the next
		// watch asks for the whole snapshot.
		s, err := w.relay.held.Apply(d)
		if w.relay.onDelta != nil {
			w.relay.onDelta(err == nil)
		}
		if err != nil {
			return nil, fmt.Errorf("delta to version %s: %w", d.GetVersion(), err)
		}
		return s, nil
	}
	s := msg.GetSnapshot()
	if s != nil {
		w.relay.held.Hold(s)
	}
	return s, nil
}

func (w *watchStream) Close() error { return w.s.Close() }

// Ack sends the outcomes the plane needs one by one (all but APPLIED and
// DELETED) and counts the rest: at the reference estate an ack would
// otherwise list 21,000 results for a one-object edit.
func (r *Relay) Ack(ctx context.Context, version string, results []*snapshotv1.ApplyResult) error {
	req := &distributionv1.AckRequest{Version: version, Counts: &distributionv1.AckCounts{}}
	for _, res := range results {
		switch res.GetOutcome() {
		case snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED:
			req.Counts.Applied++
		case snapshotv1.ApplyOutcome_APPLY_OUTCOME_DELETED:
			req.Counts.Deleted++
		default:
			req.Results = append(req.Results, res)
		}
	}
	var errs []error
	for _, i := range r.order() {
		_, err := r.dists[i].Ack(ctx, connect.NewRequest(req))
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil || !failover(err) {
			break
		}
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return fmt.Errorf("every distribution address failed: %w", errors.Join(errs...))
}
