package service_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"testing"
	"time"

	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	distribution "github.com/meshplane/meshplane/services/distribution/service"
	ingest "github.com/meshplane/meshplane/services/ingest/service"
	translation "github.com/meshplane/meshplane/services/translation/service"
	"google.golang.org/protobuf/proto"
)

// plane is a management plane in this process: ingest, translation and
// distribution with memory stores on one mTLS platform server, as the
// all-in-one mounts them (registration is left out: the console notes that
// certificates were not checked).
type plane struct {
	addr   string
	ca     *platformtest.CA
	inputs snapshots.Store[*snapshotv1.InputSnapshot]
	tr     *translation.Service
}

// startPlane starts a plane that runs until the test ends.
func startPlane(t *testing.T) *plane {
	t.Helper()
	ca := platformtest.NewCA(t, "plane")
	log := slog.New(slog.DiscardHandler)
	inputs := snapstore.NewMemory(func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} })
	outputs := snapstore.NewMemory(func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	acks := snapstore.NewMemoryAcks()

	tcfg := translation.DefaultConfig()
	tcfg.Debounce, tcfg.SafeStartWindow = 0, 0
	tr, err := translation.New(tcfg, translation.WithLogger(log), translation.WithStores(inputs, outputs), translation.WithAcks(acks))
	if err != nil {
		t.Fatal(err)
	}
	icfg := ingest.DefaultConfig()
	icfg.WatchManagement = "false"
	ing, err := ingest.New(icfg, ingest.WithLogger(log), ingest.WithInputs(inputs), ingest.WithOutputs(outputs), ingest.WithNotifier(tr))
	if err != nil {
		t.Fatal(err)
	}
	dist, err := distribution.New(distribution.DefaultConfig(), distribution.WithLogger(log), distribution.WithOutputs(outputs), distribution.WithAcks(acks))
	if err != nil {
		t.Fatal(err)
	}
	opts := platform.NewServerOptions()
	opts.Addr, opts.AdminAddr = "127.0.0.1:0", ""
	opts.TLS = ca.ServerTLS(t, platform.ClientAuthRequire)
	opts.TrustDomain = pki.DefaultTrustDomain
	srv, err := platform.NewServer(opts, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []platform.Component{ing, tr, dist} {
		c.Mount(srv)
	}
	srv.SetReady(true)
	addr, _ := platformtest.Serve(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- platform.RunAll(ctx, ing.Run, tr.Run, dist.Run) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("plane stopped with an error: %v", err)
		}
	})
	return &plane{addr: addr, ca: ca, inputs: inputs, tr: tr}
}

// consoleCert is the console's service certificate from the plane's CA.
func (p *plane) consoleCert(t *testing.T) tls.Certificate {
	return p.ca.ClientCert(t, pki.ServiceID(pki.DefaultTrustDomain, "console").String())
}

// push stores in as its cluster's input and has translation translate it,
// as ingest does after an agent's push.
func (p *plane) push(t *testing.T, in *snapshotv1.InputSnapshot) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.inputs.Put(ctx, in.GetCluster(), in.GetVersion(), in); err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.tr.Notify(ctx, in.GetCluster(), in.GetVersion(), b); err != nil {
		t.Fatal(err)
	}
}

// pushAccessLogs sends entries to ingest as cluster's agent does.
func (p *plane) pushAccessLogs(t *testing.T, cluster string, entries ...*observabilityv1.AccessLogEntry) {
	t.Helper()
	cert := p.ca.ClientCert(t, pki.ClusterID(pki.DefaultTrustDomain, cluster).String())
	o := p.ca.ClientOptions(t, p.addr, &cert)
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	stream := ingestv1connect.NewIngestServiceClient(hc, platform.BaseURL(o)).PushAccessLogs(context.Background())
	if err := stream.Send(&ingestv1.PushAccessLogsRequest{Entries: entries}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CloseAndReceive(); err != nil {
		t.Fatalf("PushAccessLogs: %v", err)
	}
}
