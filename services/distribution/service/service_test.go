package service_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/distribution/service"
	"google.golang.org/protobuf/proto"
)

const (
	td     = "test.local"
	eastID = "spiffe://" + td + "/cluster/east"
	westID = "spiffe://" + td + "/cluster/west"
	toolID = "spiffe://" + td + "/service/meshctl"
)

var protocols = []struct {
	name string
	opts []connect.ClientOption
}{
	{"connect", nil},
	{"grpc", []connect.ClientOption{connect.WithGRPC()}},
}

func output(cluster string, names ...string) *snapshotv1.OutputSnapshot {
	o := &snapshotv1.OutputSnapshot{Cluster: cluster}
	for _, n := range names {
		o.Objects = append(o.Objects, &snapshotv1.Object{ApiVersion: "networking.istio.io/v1", Kind: "DestinationRule", Namespace: "default", Name: n})
	}
	snapshots.SealOutput(o)
	return o
}

type env struct {
	ca      *platformtest.CA
	addr    string
	admin   string
	outputs snapshots.Store[*snapshotv1.OutputSnapshot]
	// wrap, when set, wraps the transport of clients made after it is set.
	wrap func(http.RoundTripper) http.RoundTripper
}

// newEnv serves the service over a memory output store.
func newEnv(t *testing.T) *env {
	t.Helper()
	outputs := snapstore.NewMemory(func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	e := newEnvWith(t, service.DefaultConfig(), service.WithOutputs(outputs))
	e.outputs = outputs
	return e
}

// newEnvWith builds the service from cfg and opts, runs it, and serves it
// over mTLS on loopback until the test ends.
func newEnvWith(t *testing.T, cfg service.Config, opts ...service.Option) *env {
	t.Helper()
	return newEnvCA(t, platformtest.NewCA(t, "test CA"), cfg, opts...)
}

// newEnvCA is newEnvWith with a given CA, so that replicas share one.
func newEnvCA(t testing.TB, ca *platformtest.CA, cfg service.Config, opts ...service.Option) *env {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	reg := platform.NewRegistry()
	svc, err := service.New(cfg, append([]service.Option{service.WithLogger(log), service.WithRegisterer(reg)}, opts...)...)
	if err != nil {
		t.Fatalf("service.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	so := platform.NewServerOptions()
	so.Addr, so.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	so.TrustDomain = td
	so.TLS = ca.ServerTLS(t, platform.ClientAuthRequire)
	srv, err := platform.NewServer(so, log, reg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	svc.Mount(srv)
	srv.SetReady(true)
	addr, admin := platformtest.Serve(t, srv)
	return &env{ca: ca, addr: addr, admin: admin}
}

func (e *env) client(t testing.TB, id string, protoOpts []connect.ClientOption) distributionv1connect.DistributionServiceClient {
	t.Helper()
	hc, base, opts := e.httpClient(t, id)
	return distributionv1connect.NewDistributionServiceClient(hc, base, append(opts, protoOpts...)...)
}

// httpClient is the HTTP client, base URL and client options of id's
// client.
func (e *env) httpClient(t testing.TB, id string) (*http.Client, string, []connect.ClientOption) {
	t.Helper()
	cert := e.ca.ClientCert(t, id)
	o := e.ca.ClientOptions(t, e.addr, &cert)
	o.Timeout = 10 * time.Second
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	if e.wrap != nil {
		hc.Transport = e.wrap(hc.Transport)
	}
	return hc, platform.BaseURL(o), platform.DefaultClientOptions(o)
}

func (e *env) put(t *testing.T, o *snapshotv1.OutputSnapshot) {
	t.Helper()
	if err := e.outputs.Put(t.Context(), o.GetCluster(), o.GetVersion(), o); err != nil {
		t.Fatal(err)
	}
}

// watchStream opens a watch that ends with the test or after a deadline, so
// a missing message fails the test instead of hanging it.
func watchStream(t *testing.T, c distributionv1connect.DistributionServiceClient, have string) *connect.ServerStreamForClient[distributionv1.WatchResponse] {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	stream, err := c.Watch(ctx, connect.NewRequest(&distributionv1.WatchRequest{Version: have, AgentVersion: "test"}))
	if err != nil {
		cancel()
		t.Fatalf("Watch: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = stream.Close()
	})
	return stream
}

func next(t *testing.T, stream *connect.ServerStreamForClient[distributionv1.WatchResponse]) *snapshotv1.OutputSnapshot {
	t.Helper()
	if !stream.Receive() {
		t.Fatalf("watch ended: %v", stream.Err())
	}
	return stream.Msg().GetSnapshot()
}

func wantCode(t *testing.T, err error, want connect.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("call succeeded, want code %v", want)
	}
	if got := connect.CodeOf(err); got != want {
		t.Fatalf("got %v (code %v), want code %v", err, got, want)
	}
}

func TestWatchServesOwnCluster(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t)
			east1, west1 := output("east", "reviews"), output("west", "details")
			e.put(t, east1)
			e.put(t, west1)

			east := watchStream(t, e.client(t, eastID, p.opts), "")
			if got := next(t, east); !proto.Equal(got, east1) {
				t.Fatalf("east was sent %s of %s, want its own %s", got.GetVersion(), got.GetCluster(), east1.GetVersion())
			}
			// West was sent west1 on an earlier watch, so the store
			// remembers it (a version it forgot would be sent again).
			if got := next(t, watchStream(t, e.client(t, westID, p.opts), "")); !proto.Equal(got, west1) {
				t.Fatalf("west was sent %s of %s, want %s", got.GetVersion(), got.GetCluster(), west1.GetVersion())
			}
			west := watchStream(t, e.client(t, westID, p.opts), west1.GetVersion())

			// A change for west only, then one for east: the next thing
			// east sees is its own change.
			west2 := output("west", "details", "ratings")
			e.put(t, west2)
			east2 := output("east", "reviews", "ratings")
			e.put(t, east2)
			if got := next(t, east); !proto.Equal(got, east2) {
				t.Fatalf("east was sent %s of %s, want %s", got.GetVersion(), got.GetCluster(), east2.GetVersion())
			}
			// West resumed from the version it held, so its first message
			// is the change.
			if got := next(t, west); !proto.Equal(got, west2) {
				t.Fatalf("west was sent %s of %s, want %s", got.GetVersion(), got.GetCluster(), west2.GetVersion())
			}
		})
	}
}

func TestAckAndListAcks(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t)
			v1 := output("east", "reviews", "ratings")
			e.put(t, v1)
			agent := e.client(t, eastID, p.opts)
			stream := watchStream(t, agent, "")
			next(t, stream)

			before := time.Now()
			if _, err := agent.Ack(t.Context(), connect.NewRequest(&distributionv1.AckRequest{
				Version: v1.GetVersion(),
				Results: []*snapshotv1.ApplyResult{
					{Ref: &snapshotv1.ObjectRef{Kind: "DestinationRule", Name: "reviews"}, Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED},
					{Ref: &snapshotv1.ObjectRef{Kind: "DestinationRule", Name: "ratings"}, Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_CONFLICT, Error: "owned by another manager"},
					{Ref: &snapshotv1.ObjectRef{Kind: "VirtualService", Name: "details"}, Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_DELETION_HELD},
				},
			})); err != nil {
				t.Fatalf("Ack: %v", err)
			}
			_, err := agent.Ack(t.Context(), connect.NewRequest(&distributionv1.AckRequest{}))
			wantCode(t, err, connect.CodeInvalidArgument)

			res, err := e.client(t, toolID, p.opts).ListAcks(t.Context(), connect.NewRequest(&distributionv1.ListAcksRequest{}))
			if err != nil {
				t.Fatalf("ListAcks: %v", err)
			}
			acks := res.Msg.GetClusters()
			if len(acks) != 1 {
				t.Fatalf("ListAcks = %v, want one cluster", acks)
			}
			a := acks[0]
			if a.GetCluster() != "east" || a.GetAckedVersion() != v1.GetVersion() || a.GetLatestVersion() != v1.GetVersion() ||
				a.GetApplyErrors() != 1 || a.GetHeldDeletions() != 1 || !a.GetConnected() {
				t.Fatalf("ListAcks = %v, want east acked and connected at %s with 1 apply error and 1 held deletion", a, v1.GetVersion())
			}
			if at := a.GetAckedAt().AsTime(); a.GetAckedAt() == nil || at.Before(before.Add(-time.Second)) || at.After(time.Now()) {
				t.Fatalf("acked_at %v is not the time of the ack", a.GetAckedAt())
			}

			// An agent that watches but has acknowledged nothing is listed
			// as connected, with no acked version.
			watchStream(t, e.client(t, westID, p.opts), "")
			platformtest.Eventually(t, 10*time.Second, "west listed as connected", func() bool {
				res, err := e.client(t, toolID, p.opts).ListAcks(t.Context(), connect.NewRequest(&distributionv1.ListAcksRequest{}))
				if err != nil {
					t.Fatalf("ListAcks: %v", err)
				}
				for _, a := range res.Msg.GetClusters() {
					if a.GetCluster() == "west" {
						if a.GetAckedVersion() != "" || a.GetAckedAt() != nil {
							t.Fatalf("west listed with an ack it never sent: %v", a)
						}
						return a.GetConnected()
					}
				}
				return false
			})
		})
	}
}

func TestAccess(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t)
			e.put(t, output("east", "reviews"))
			t.Run("service watching", func(t *testing.T) {
				stream := watchStream(t, e.client(t, toolID, p.opts), "")
				if stream.Receive() {
					t.Fatalf("a service was sent %v", stream.Msg())
				}
				wantCode(t, stream.Err(), connect.CodePermissionDenied)
			})
			t.Run("service acking", func(t *testing.T) {
				_, err := e.client(t, toolID, p.opts).Ack(t.Context(), connect.NewRequest(&distributionv1.AckRequest{Version: "v"}))
				wantCode(t, err, connect.CodePermissionDenied)
			})
			t.Run("cluster listing acks", func(t *testing.T) {
				_, err := e.client(t, eastID, p.opts).ListAcks(t.Context(), connect.NewRequest(&distributionv1.ListAcksRequest{}))
				wantCode(t, err, connect.CodePermissionDenied)
			})
			t.Run("service listing acks", func(t *testing.T) {
				if _, err := e.client(t, toolID, p.opts).ListAcks(t.Context(), connect.NewRequest(&distributionv1.ListAcksRequest{})); err != nil {
					t.Fatalf("ListAcks: %v", err)
				}
			})
			t.Run("cluster of a foreign trust domain", func(t *testing.T) {
				stream := watchStream(t, e.client(t, "spiffe://other.local/cluster/east", p.opts), "")
				if stream.Receive() {
					t.Fatalf("a foreign cluster was sent %v", stream.Msg())
				}
				wantCode(t, stream.Err(), connect.CodeUnauthenticated)
			})
		})
	}
}

func TestNewNeedsAStore(t *testing.T) {
	if _, err := service.New(service.DefaultConfig()); err == nil {
		t.Fatal("New without Redis or an output store succeeded")
	}
}

// With Redis, changes published by translation (any replica) reach the
// watchers, also after Redis restarts; the watch stays open meanwhile.
func TestWatchThroughRedis(t *testing.T) {
	r := redistest.Start(t)
	cfg := service.DefaultConfig()
	cfg.Redis.Addrs = r.Addr()
	e := newEnvWith(t, cfg)
	e.outputs = snapstore.NewRedis(r.Client(t), cfg.Install, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })

	v1 := output("east", "reviews")
	e.put(t, v1)
	stream := watchStream(t, e.client(t, eastID, nil), "")
	if got := next(t, stream); !proto.Equal(got, v1) {
		t.Fatalf("sent %s, want %s", got.GetVersion(), v1.GetVersion())
	}
	v2 := output("east", "reviews", "ratings")
	e.put(t, v2)
	if got := next(t, stream); !proto.Equal(got, v2) {
		t.Fatalf("sent %s, want %s", got.GetVersion(), v2.GetVersion())
	}

	r.Kill()
	if err := r.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The change notice is lost if it is published before distribution has
	// subscribed again; the resync on resubscription or the next change
	// brings it. Keep writing until the watcher is sent it.
	v3 := output("east", "details")
	got := make(chan *snapshotv1.OutputSnapshot, 1)
	go func() {
		if stream.Receive() {
			got <- stream.Msg().GetSnapshot()
		}
		close(got)
	}()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_ = e.outputs.Put(t.Context(), "east", v3.GetVersion(), v3) // fails until the client reconnects
		select {
		case s, ok := <-got:
			if !ok {
				t.Fatalf("watch ended: %v", stream.Err())
			}
			if !proto.Equal(s, v3) {
				t.Fatalf("sent %s after the restart, want %s", s.GetVersion(), v3.GetVersion())
			}
			return
		case <-tick.C:
		case <-deadline:
			t.Fatal("no snapshot sent after Redis restarted")
		}
	}
}

// Watch sends the output as translation stored it: the bytes, not a
// decoding of them encoded again. The stored encoding has its version
// after its objects, which protobuf-go never writes.
func TestWatchSendsTheStoredBytes(t *testing.T) {
	e := newEnv(t)
	o := output("east", "a", "b")
	objects, err := proto.Marshal(&snapshotv1.OutputSnapshot{Objects: o.GetObjects()})
	if err != nil {
		t.Fatal(err)
	}
	head, err := proto.Marshal(&snapshotv1.OutputSnapshot{Cluster: o.GetCluster(), Version: o.GetVersion()})
	if err != nil {
		t.Fatal(err)
	}
	stored := append(objects, head...)
	if err := snapshots.PutEncoded(t.Context(), e.outputs, "east", snapshots.Encoded[*snapshotv1.OutputSnapshot]{Version: o.GetVersion(), Data: stored}); err != nil {
		t.Fatal(err)
	}
	hc, base, opts := e.httpClient(t, eastID)
	c := connect.NewClient[distributionv1.WatchRequest, distributionv1.EncodedWatchResponse](hc, base+distributionv1connect.DistributionServiceWatchProcedure, opts...)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	stream, err := c.CallServerStream(ctx, connect.NewRequest(&distributionv1.WatchRequest{AgentVersion: "test"}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if !stream.Receive() {
		t.Fatalf("watch ended: %v", stream.Err())
	}
	if got := stream.Msg().GetSnapshot(); !bytes.Equal(got, stored) {
		t.Fatalf("watch sent %d bytes that are not the %d stored", len(got), len(stored))
	}
	// The generated client reads the same message.
	if got := next(t, watchStream(t, e.client(t, eastID, nil), "")); !proto.Equal(got, o) {
		t.Fatalf("the generated client read %v, want %v", got, o)
	}
}
