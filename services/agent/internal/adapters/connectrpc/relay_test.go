package connectrpc_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/adapters/connectrpc"
	"google.golang.org/protobuf/proto"
)

// scriptedDistribution answers each Watch with the next response of a
// script, and records the requests.
type scriptedDistribution struct {
	distributionv1connect.UnimplementedDistributionServiceHandler
	mu       sync.Mutex
	script   []*distributionv1.WatchResponse
	requests []*distributionv1.WatchRequest
	acks     []*distributionv1.AckRequest
}

func (s *scriptedDistribution) Ack(_ context.Context, req *connect.Request[distributionv1.AckRequest]) (*connect.Response[distributionv1.AckResponse], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acks = append(s.acks, proto.Clone(req.Msg).(*distributionv1.AckRequest))
	return connect.NewResponse(&distributionv1.AckResponse{}), nil
}

func (s *scriptedDistribution) Watch(ctx context.Context, req *connect.Request[distributionv1.WatchRequest], stream *connect.ServerStream[distributionv1.WatchResponse]) error {
	s.mu.Lock()
	s.requests = append(s.requests, proto.Clone(req.Msg).(*distributionv1.WatchRequest))
	var resp *distributionv1.WatchResponse
	if len(s.script) > 0 {
		resp, s.script = s.script[0], s.script[1:]
	}
	s.mu.Unlock()
	if resp != nil {
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

func relayOutput(names ...string) *snapshotv1.OutputSnapshot {
	o := &snapshotv1.OutputSnapshot{Cluster: "east"}
	for _, n := range names {
		o.Objects = append(o.Objects, &snapshotv1.Object{ApiVersion: "networking.istio.io/v1", Kind: "DestinationRule", Namespace: "bookinfo", Name: n, Spec: []byte(`{"host":"` + n + `"}`)})
	}
	snapshots.SealOutput(o)
	return o
}

// The relay asks for deltas from the snapshot it holds in full, over a real
// HTTP/2 server: a delta that checks out is returned as the whole new
// version; one that does not is an error wrapping ErrDeltaMismatch, and
// the next watch asks for the whole snapshot (no delta base).
func TestRelayAppliesAndChecksDeltas(t *testing.T) {
	v1, v2 := relayOutput("a", "b", "c"), relayOutput("a", "b", "d")
	v3 := relayOutput("a", "e")
	good, _, err := snapshots.Diff(v1.GetVersion(), snapshots.IndexOutput(v1), v2)
	if err != nil {
		t.Fatal(err)
	}
	bad, _, err := snapshots.Diff(v2.GetVersion(), snapshots.IndexOutput(v2), v3)
	if err != nil {
		t.Fatal(err)
	}
	bad.Objects = nil // leaves out e: the state it makes is not v3
	dist := &scriptedDistribution{script: []*distributionv1.WatchResponse{
		{Snapshot: v1}, {Delta: good}, {Delta: bad}, {Snapshot: v3},
	}}
	mux := http.NewServeMux()
	mux.Handle(distributionv1connect.NewDistributionServiceHandler(dist))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := distributionv1connect.NewDistributionServiceClient(srv.Client(), srv.URL)

	var mu sync.Mutex
	outcomes := map[bool]int{}
	relay := connectrpc.NewRelay(nil, []distributionv1connect.DistributionServiceClient{client}, "test",
		connectrpc.WithDeltas(true, func(applied bool) { mu.Lock(); outcomes[applied]++; mu.Unlock() }))

	receive := func(have string) (*snapshotv1.OutputSnapshot, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		w, err := relay.Watch(ctx, have)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		return w.Receive()
	}
	if s, err := receive(""); err != nil || s.GetVersion() != v1.GetVersion() {
		t.Fatalf("first watch: %v, %v", s.GetVersion(), err)
	}
	s, err := receive(v1.GetVersion())
	if err != nil || !proto.Equal(s, v2) {
		t.Fatalf("after a good delta: %v, %v; want v2", s.GetVersion(), err)
	}
	if _, err := receive(v2.GetVersion()); !errors.Is(err, snapshots.ErrDeltaMismatch) {
		t.Fatalf("a delta that does not check out: %v, want ErrDeltaMismatch", err)
	}
	if s, err := receive(v2.GetVersion()); err != nil || s.GetVersion() != v3.GetVersion() {
		t.Fatalf("after the refused delta: %v, %v; want the whole of v3", s.GetVersion(), err)
	}

	dist.mu.Lock()
	defer dist.mu.Unlock()
	wantBases := []string{"", v1.GetVersion(), v2.GetVersion(), ""}
	for i, r := range dist.requests {
		if !r.GetAcceptDelta() || r.GetDeltaBase() != wantBases[i] {
			t.Errorf("watch %d asked accept_delta=%v from %q, want true from %q", i, r.GetAcceptDelta(), r.GetDeltaBase(), wantBases[i])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if outcomes[true] != 1 || outcomes[false] != 1 {
		t.Errorf("observed %d applied and %d refused deltas, want 1 and 1", outcomes[true], outcomes[false])
	}
}

// An ack lists only the outcomes the plane needs one by one and counts
// the APPLIED and DELETED ones.
func TestRelayAckCountsWhatWentRight(t *testing.T) {
	dist := &scriptedDistribution{}
	mux := http.NewServeMux()
	mux.Handle(distributionv1connect.NewDistributionServiceHandler(dist))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	relay := connectrpc.NewRelay(nil, []distributionv1connect.DistributionServiceClient{distributionv1connect.NewDistributionServiceClient(srv.Client(), srv.URL)}, "test")
	var results []*snapshotv1.ApplyResult
	add := func(n int, o snapshotv1.ApplyOutcome) {
		for range n {
			results = append(results, &snapshotv1.ApplyResult{Ref: &snapshotv1.ObjectRef{Kind: "DestinationRule", Name: "x"}, Outcome: o})
		}
	}
	add(1000, snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED)
	add(3, snapshotv1.ApplyOutcome_APPLY_OUTCOME_DELETED)
	add(2, snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED)
	add(1, snapshotv1.ApplyOutcome_APPLY_OUTCOME_CONFLICT)
	add(4, snapshotv1.ApplyOutcome_APPLY_OUTCOME_DELETION_HELD)
	if err := relay.Ack(t.Context(), "sha256:v", results); err != nil {
		t.Fatal(err)
	}
	dist.mu.Lock()
	defer dist.mu.Unlock()
	if len(dist.acks) != 1 {
		t.Fatalf("%d acks sent, want 1", len(dist.acks))
	}
	a := dist.acks[0]
	if a.GetVersion() != "sha256:v" || a.GetCounts().GetApplied() != 1000 || a.GetCounts().GetDeleted() != 3 || len(a.GetResults()) != 7 {
		t.Fatalf("ack: version %s, counts %v, %d results; want 1000 applied, 3 deleted and the 7 others listed", a.GetVersion(), a.GetCounts(), len(a.GetResults()))
	}
	for _, r := range a.GetResults() {
		if o := r.GetOutcome(); o == snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED || o == snapshotv1.ApplyOutcome_APPLY_OUTCOME_DELETED {
			t.Fatalf("an %v result was listed", o)
		}
	}
}
