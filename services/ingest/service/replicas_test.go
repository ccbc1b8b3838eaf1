package service_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/services/ingest/service"
)

// replica is one ingest process: the service and its mTLS server, which
// stop can end before the test does.
type replica struct {
	addr string
	stop func()
}

func startReplica(t *testing.T, ca *platformtest.CA, cfg service.Config, notifier service.TranslationNotifier, opts ...service.Option) *replica {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), nil)).With("replica", cfg.Replica)
	svc, err := service.New(cfg, append([]service.Option{service.WithLogger(log), service.WithNotifier(notifier)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	so := platform.NewServerOptions()
	so.Addr, so.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	so.TrustDomain = td
	so.TLS = ca.ServerTLS(t, platform.ClientAuthRequire)
	srv, err := platform.NewServer(so, log, platform.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	svc.Mount(srv)
	srv.SetReady(true)
	ln := platformtest.Listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() {
		_ = svc.Run(ctx)
		done <- struct{}{}
	}()
	go func() {
		_ = srv.Serve(ctx, ln)
		done <- struct{}{}
	}()
	stopped := false
	r := &replica{addr: ln.Addr().String(), stop: func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		<-done
	}}
	t.Cleanup(r.stop)
	return r
}

func replicaClient(t *testing.T, ca *platformtest.CA, addr, id string) ingestv1connect.IngestServiceClient {
	t.Helper()
	cert := ca.ClientCert(t, id)
	o := ca.ClientOptions(t, addr, &cert)
	o.Timeout = 10 * time.Second
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return ingestv1connect.NewIngestServiceClient(hc, platform.BaseURL(o), platform.DefaultClientOptions(o)...)
}

// TestAgentMovesBetweenReplicas: two ingest replicas share a real Redis.
// An agent pushes to replica A; A stops; replica B serves the agent's
// snapshot at once, before the agent has reconnected; the agent moves to
// B and resends the same snapshot, which is acknowledged with the same
// version and is not news to translation; B reports the cluster connected
// to itself.
func TestAgentMovesBetweenReplicas(t *testing.T) {
	r := redistest.Start(t)
	ca := platformtest.NewCA(t, "test CA")
	notifier := &recordingNotifier{}
	cfgFor := func(name string) service.Config {
		cfg := memoryConfig()
		cfg.Replica = name
		cfg.Redis.Addrs = r.Addr()
		return cfg
	}
	a := startReplica(t, ca, cfgFor("ingest-a"), notifier)
	b := startReplica(t, ca, cfgFor("ingest-b"), notifier)
	ctx := t.Context()
	snap := sealed("east", "reviews", "ratings")

	// The agent pushes to A.
	streamCtx, closeStream := context.WithCancel(ctx)
	defer closeStream()
	toA := replicaClient(t, ca, a.addr, eastID).Push(streamCtx)
	if err := toA.Send(&ingestv1.PushRequest{Snapshot: snap}); err != nil {
		t.Fatal(err)
	}
	ack, err := toA.Receive()
	if err != nil {
		t.Fatal(err)
	}
	if ack.GetStoredVersion() != snap.GetVersion() {
		t.Fatalf("A stored %s, want %s", ack.GetStoredVersion(), snap.GetVersion())
	}
	if got := notifier.notices("east"); !slices.Equal(got, []string{snap.GetVersion()}) {
		t.Fatalf("translation was told %v, want %s once", got, snap.GetVersion())
	}

	// A goes away; its stream breaks.
	a.stop()
	if _, err := toA.Receive(); err == nil {
		t.Fatal("the stream to the stopped replica still works")
	}
	closeStream()

	// B serves the snapshot at once, before the agent is back.
	tools := replicaClient(t, ca, b.addr, translation)
	got, err := tools.GetInputSnapshot(ctx, connect.NewRequest(&ingestv1.GetInputSnapshotRequest{Cluster: "east"}))
	if err != nil {
		t.Fatalf("B has no snapshot for east while the agent moves: %v", err)
	}
	if got.Msg.GetSnapshot().GetVersion() != snap.GetVersion() {
		t.Fatalf("B serves version %s, want %s", got.Msg.GetSnapshot().GetVersion(), snap.GetVersion())
	}
	dests, err := tools.ListDestinations(ctx, connect.NewRequest(&ingestv1.ListDestinationsRequest{Filter: &ingestv1.DiscoveryFilter{Cluster: "east"}}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(dests.Msg.GetDestinations()); n != 2 {
		t.Fatalf("B lists %d destinations of east, want 2", n)
	}

	// The agent moves to B and resends everything, as it does on every
	// reconnect.
	toB := replicaClient(t, ca, b.addr, eastID).Push(ctx)
	defer func() {
		_ = toB.CloseRequest()
		_ = toB.CloseResponse()
	}()
	if err := toB.Send(&ingestv1.PushRequest{Snapshot: snap}); err != nil {
		t.Fatal(err)
	}
	ack, err = toB.Receive()
	if err != nil {
		t.Fatal(err)
	}
	if ack.GetStoredVersion() != snap.GetVersion() {
		t.Fatalf("B stored %s, want %s", ack.GetStoredVersion(), snap.GetVersion())
	}
	// The same version: translation's input is unchanged, so it is not
	// told again.
	if got := notifier.notices("east"); !slices.Equal(got, []string{snap.GetVersion()}) {
		t.Fatalf("translation was told %v after the move, want only the first %s", got, snap.GetVersion())
	}
	list, err := tools.ListClusters(ctx, connect.NewRequest(&ingestv1.ListClustersRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	cs := list.Msg.GetClusters()
	if len(cs) != 1 || cs[0].GetCluster() != "east" || !cs[0].GetConnected() || cs[0].GetReplica() != "ingest-b" || cs[0].GetVersion() != snap.GetVersion() {
		t.Fatalf("B reports %v, want east connected to ingest-b at %s", cs, snap.GetVersion())
	}
}
