package service_test

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/translation/service"
	"google.golang.org/protobuf/proto"
)

const (
	td       = "test.local"
	ingestID = "spiffe://" + td + "/service/ingest"
	eastID   = "spiffe://" + td + "/cluster/east"
)

var protocols = []struct {
	name string
	opts []connect.ClientOption
}{
	{"connect", nil},
	{"grpc", []connect.ClientOption{connect.WithGRPC()}},
}

func input(cluster string, services ...string) *snapshotv1.InputSnapshot {
	in := &snapshotv1.InputSnapshot{Cluster: cluster}
	for _, s := range services {
		in.Destinations = append(in.Destinations, &discoveryv1.Destination{
			Metadata: &commonv1.ObjectMeta{Name: s + "-default-" + cluster, Namespace: "default", Cluster: cluster},
			Spec: &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
				Ref: &commonv1.ClusterObjectRef{Name: s, Namespace: "default", Cluster: cluster},
			}}},
		})
	}
	snapshots.SealInput(in)
	return in
}

type env struct {
	ca      *platformtest.CA
	addr    string
	inputs  *snapstore.Memory[*snapshotv1.InputSnapshot]
	outputs *snapstore.Memory[*snapshotv1.OutputSnapshot]
}

// newEnv serves the service with memory stores.
func newEnv(t *testing.T) *env {
	t.Helper()
	inputs := snapstore.NewMemory(func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} })
	outputs := snapstore.NewMemory(func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	e := newEnvWith(t, testConfig(), service.WithStores(inputs, outputs))
	e.inputs, e.outputs = inputs, outputs
	return e
}

func testConfig() service.Config {
	cfg := service.DefaultConfig()
	cfg.Debounce = 5 * time.Millisecond
	return cfg
}

// newEnvWith builds the service from cfg and opts, runs it, and serves it
// over mTLS on loopback until the test ends.
func newEnvWith(t *testing.T, cfg service.Config, opts ...service.Option) *env {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	svc, err := service.New(cfg, append([]service.Option{service.WithLogger(log)}, opts...)...)
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

	ca := platformtest.NewCA(t, "test CA")
	so := platform.NewServerOptions()
	so.Addr, so.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	so.TrustDomain = td
	so.TLS = ca.ServerTLS(t, platform.ClientAuthRequire)
	srv, err := platform.NewServer(so, log, platform.NewRegistry())
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	svc.Mount(srv)
	srv.SetReady(true)
	addr, _ := platformtest.Serve(t, srv)
	return &env{ca: ca, addr: addr}
}

func (e *env) client(t *testing.T, id string, protoOpts []connect.ClientOption) translationv1connect.TranslationServiceClient {
	t.Helper()
	hc, base, opts := e.dial(t, id, protoOpts)
	return translationv1connect.NewTranslationServiceClient(hc, base, opts...)
}

// dial returns an HTTP client with id's certificate, the server's base
// URL and the client options, protoOpts included.
func (e *env) dial(t *testing.T, id string, protoOpts []connect.ClientOption) (*http.Client, string, []connect.ClientOption) {
	t.Helper()
	cert := e.ca.ClientCert(t, id)
	o := e.ca.ClientOptions(t, e.addr, &cert)
	o.Timeout = 10 * time.Second
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return hc, platform.BaseURL(o), append(platform.DefaultClientOptions(o), protoOpts...)
}

// encodedNotify is a client of the Notify procedure that sends the
// snapshot as bytes, as ingest does (EncodedNotifyRequest).
func (e *env) encodedNotify(t *testing.T, id string, protoOpts []connect.ClientOption) *connect.Client[translationv1.EncodedNotifyRequest, translationv1.NotifyResponse] {
	t.Helper()
	hc, base, opts := e.dial(t, id, protoOpts)
	return connect.NewClient[translationv1.EncodedNotifyRequest, translationv1.NotifyResponse](hc, base+translationv1connect.TranslationServiceNotifyProcedure, opts...)
}

// Ingest notifies with the bytes it stored. A version translation already
// holds (read from the store first) is not decoded again; a new one is,
// and bytes that do not decode are refused.
func TestNotifyEncoded(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t)
			notify := e.encodedNotify(t, ingestID, p.opts)
			in := input("east", "reviews", "ratings")
			raw, err := proto.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := notify.CallUnary(t.Context(), connect.NewRequest(&translationv1.EncodedNotifyRequest{Cluster: "east", Version: in.GetVersion(), Snapshot: raw})); err != nil {
				t.Fatalf("Notify: %v", err)
			}
			ingest := e.client(t, ingestID, p.opts)
			if out := waitOutput(t, ingest, "east", 2); out.GetInputVersions()["east"] != in.GetVersion() {
				t.Fatalf("output from inputs %v, want east at %s", out.GetInputVersions(), in.GetVersion())
			}
			// Held already: the bytes are not looked at.
			if _, err := notify.CallUnary(t.Context(), connect.NewRequest(&translationv1.EncodedNotifyRequest{Cluster: "east", Version: in.GetVersion(), Snapshot: []byte("not a snapshot")})); err != nil {
				t.Fatalf("Notify of the held version: %v", err)
			}
			// A new version is decoded, and refused when it does not decode.
			_, err = notify.CallUnary(t.Context(), connect.NewRequest(&translationv1.EncodedNotifyRequest{Cluster: "east", Version: "sha256:new", Snapshot: []byte("not a snapshot")}))
			wantCode(t, err, connect.CodeInvalidArgument)
			// Only the management services may call it.
			_, err = e.encodedNotify(t, eastID, p.opts).CallUnary(t.Context(), connect.NewRequest(&translationv1.EncodedNotifyRequest{Cluster: "east", Version: in.GetVersion(), Snapshot: raw}))
			wantCode(t, err, connect.CodePermissionDenied)
		})
	}
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

// eventually polls cond until it holds, for at most 10 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	platformtest.Eventually(t, 10*time.Second, what, cond)
}

// waitOutput waits until GetOutputSnapshot returns an output for cluster
// with n objects.
func waitOutput(t *testing.T, c translationv1connect.TranslationServiceClient, cluster string, n int) *snapshotv1.OutputSnapshot {
	t.Helper()
	var out *snapshotv1.OutputSnapshot
	eventually(t, "an output for "+cluster, func() bool {
		res, err := c.GetOutputSnapshot(t.Context(), connect.NewRequest(&translationv1.GetOutputSnapshotRequest{Cluster: cluster}))
		if err != nil {
			if connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("GetOutputSnapshot: %v", err)
			}
			return false
		}
		out = res.Msg.GetSnapshot()
		return len(out.GetObjects()) == n
	})
	return out
}

func TestNotify(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t)
			ingest := e.client(t, ingestID, p.opts)
			in := input("east", "reviews", "ratings")
			if _, err := ingest.Notify(t.Context(), connect.NewRequest(&translationv1.NotifyRequest{
				Cluster: "east", Version: in.GetVersion(), Snapshot: in,
			})); err != nil {
				t.Fatalf("Notify: %v", err)
			}
			out := waitOutput(t, ingest, "east", 2)
			if out.GetCluster() != "east" || out.GetInputVersions()["east"] != in.GetVersion() {
				t.Fatalf("output %s for inputs %v, want east from %s", out.GetCluster(), out.GetInputVersions(), in.GetVersion())
			}
			// Published to the output store for distribution.
			eventually(t, "the output to be published", func() bool {
				v, _ := e.outputs.Version(t.Context(), "east")
				return v == out.GetVersion()
			})
			status, err := ingest.GetStatus(t.Context(), connect.NewRequest(&translationv1.GetStatusRequest{}))
			if err != nil {
				t.Fatalf("GetStatus: %v", err)
			}
			if status.Msg.GetOutputVersions()["east"] != out.GetVersion() {
				t.Fatalf("GetStatus output versions %v, want east at %s", status.Msg.GetOutputVersions(), out.GetVersion())
			}
		})
	}
}

// A notice without a snapshot makes translation read the input store.
func TestNotifyWithoutSnapshot(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t)
			ingest := e.client(t, ingestID, p.opts)
			_, err := ingest.Notify(t.Context(), connect.NewRequest(&translationv1.NotifyRequest{Cluster: "west"}))
			wantCode(t, err, connect.CodeNotFound)

			in := input("west", "details")
			if err := e.inputs.Put(t.Context(), "west", in.GetVersion(), in); err != nil {
				t.Fatal(err)
			}
			if _, err := ingest.Notify(t.Context(), connect.NewRequest(&translationv1.NotifyRequest{Cluster: "west", Version: in.GetVersion()})); err != nil {
				t.Fatalf("Notify: %v", err)
			}
			waitOutput(t, ingest, "west", 1)
		})
	}
}

func TestNotifyRefused(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t)
			in := input("east", "reviews")
			t.Run("cluster identity", func(t *testing.T) {
				_, err := e.client(t, eastID, p.opts).Notify(t.Context(), connect.NewRequest(&translationv1.NotifyRequest{
					Cluster: "east", Version: in.GetVersion(), Snapshot: in,
				}))
				wantCode(t, err, connect.CodePermissionDenied)
			})
			t.Run("cluster identity reading outputs", func(t *testing.T) {
				_, err := e.client(t, eastID, p.opts).GetOutputSnapshot(t.Context(), connect.NewRequest(&translationv1.GetOutputSnapshotRequest{Cluster: "east"}))
				wantCode(t, err, connect.CodePermissionDenied)
			})
			t.Run("snapshot naming another cluster", func(t *testing.T) {
				west := input("west", "reviews")
				_, err := e.client(t, ingestID, p.opts).Notify(t.Context(), connect.NewRequest(&translationv1.NotifyRequest{
					Cluster: "east", Version: west.GetVersion(), Snapshot: west,
				}))
				wantCode(t, err, connect.CodeInvalidArgument)
			})
			_, err := e.client(t, ingestID, p.opts).GetOutputSnapshot(t.Context(), connect.NewRequest(&translationv1.GetOutputSnapshotRequest{Cluster: "east"}))
			wantCode(t, err, connect.CodeNotFound)
		})
	}
}

// With Redis: outputs are published there, and published again when Redis
// comes back empty after a restart, although no input changed.
func TestRedisRestartRepublishes(t *testing.T) {
	r := redistest.Start(t)
	cfg := testConfig()
	cfg.Redis.Addrs = r.Addr()
	e := newEnvWith(t, cfg)
	outputs := snapstore.NewRedis(r.Client(t), cfg.Install, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })

	ingest := e.client(t, ingestID, nil)
	in := input("east", "reviews")
	if _, err := ingest.Notify(t.Context(), connect.NewRequest(&translationv1.NotifyRequest{Cluster: "east", Version: in.GetVersion(), Snapshot: in})); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	want := waitOutput(t, ingest, "east", 1).GetVersion()
	published := func() bool {
		v, _ := outputs.Version(t.Context(), "east")
		return v == want
	}
	eventually(t, "the output to reach Redis", published)

	r.Kill()
	if err := r.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the output to be published again after the restart", published)
	e2, err := outputs.Get(t.Context(), "east")
	if err != nil {
		t.Fatal(err)
	}
	if len(e2.Value.GetObjects()) != 1 || e2.Value.GetCluster() != "east" {
		t.Fatalf("republished output %v", e2.Value)
	}
}

// After a restart with outputs already published, GetStatus shows safe
// mode and the clusters it waits for until they report.
func TestGetStatusSafeMode(t *testing.T) {
	inputs := snapstore.NewMemory(func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} })
	outputs := snapstore.NewMemory(func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	old := &snapshotv1.OutputSnapshot{Cluster: "west"}
	snapshots.SealOutput(old)
	if err := outputs.Put(t.Context(), "west", old.GetVersion(), old); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	if cfg.SafeStartWindow != time.Minute {
		t.Fatalf("default safe-start window %v, want 1m", cfg.SafeStartWindow)
	}
	e := newEnvWith(t, cfg, service.WithStores(inputs, outputs))
	ingest := e.client(t, ingestID, nil)

	status := func() *translationv1.GetStatusResponse {
		t.Helper()
		res, err := ingest.GetStatus(t.Context(), connect.NewRequest(&translationv1.GetStatusRequest{}))
		if err != nil {
			t.Fatalf("GetStatus: %v", err)
		}
		return res.Msg
	}
	eventually(t, "safe mode waiting for west", func() bool {
		s := status()
		return s.GetSafeMode() && len(s.GetClustersWaiting()) == 1 && s.GetClustersWaiting()[0] == "west"
	})
	in := input("west", "reviews")
	if _, err := ingest.Notify(t.Context(), connect.NewRequest(&translationv1.NotifyRequest{Cluster: "west", Version: in.GetVersion(), Snapshot: in})); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	out := waitOutput(t, ingest, "west", 1)
	eventually(t, "the output to be published", func() bool {
		v, _ := outputs.Version(t.Context(), "west")
		return v == out.GetVersion()
	})
	if s := status(); s.GetSafeMode() || len(s.GetClustersWaiting()) > 0 {
		t.Fatalf("GetStatus = %v after every cluster reported", s)
	}
}

func TestSafeStartWindowFlag(t *testing.T) {
	cfg := service.DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.AddFlags(fs)
	if err := fs.Parse([]string{"--safe-start-window=0"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil || cfg.SafeStartWindow != 0 {
		t.Fatalf("--safe-start-window=0 gives %v, %v", cfg.SafeStartWindow, err)
	}
	if err := fs.Parse([]string{"--safe-start-window=-1s"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil {
		t.Fatal("a negative window was accepted")
	}
}

// --expect-management-cluster adds the management cluster's input to the
// expected clusters, so it needs them (--clusters-namespace).
func TestExpectManagementClusterFlag(t *testing.T) {
	cfg := service.DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfg.AddFlags(fs)
	if err := fs.Parse([]string{"--expect-management-cluster"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--expect-management-cluster needs --clusters-namespace") {
		t.Fatalf("Validate without --clusters-namespace: %v", err)
	}
	if err := fs.Parse([]string{"--expect-management-cluster", "--clusters-namespace=meshplane"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil || !cfg.ExpectManagementCluster {
		t.Fatalf("--expect-management-cluster --clusters-namespace=meshplane: %v, %v", cfg.ExpectManagementCluster, err)
	}
}

// With the management cluster expected, GetStatus shows safe mode waiting
// for its input (named the install name) after the registered clusters
// reported, and nothing is published until it has.
func TestSafeModeWaitsForManagementInput(t *testing.T) {
	inputs := snapstore.NewMemory(func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} })
	outputs := snapstore.NewMemory(func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	cfg := testConfig()
	cfg.ClustersNamespace, cfg.ExpectManagementCluster = "meshplane", true
	e := newEnvWith(t, cfg, service.WithStores(inputs, outputs), service.WithExpectedClusters(registered{"east"}))
	ingest := e.client(t, ingestID, nil)
	notify := func(in *snapshotv1.InputSnapshot) {
		t.Helper()
		if _, err := ingest.Notify(t.Context(), connect.NewRequest(&translationv1.NotifyRequest{Cluster: in.GetCluster(), Version: in.GetVersion(), Snapshot: in})); err != nil {
			t.Fatalf("Notify: %v", err)
		}
	}
	notify(input("east", "reviews"))
	eventually(t, "safe mode waiting for the management cluster", func() bool {
		res, err := ingest.GetStatus(t.Context(), connect.NewRequest(&translationv1.GetStatusRequest{}))
		if err != nil {
			t.Fatalf("GetStatus: %v", err)
		}
		s := res.Msg
		return s.GetSafeMode() && slices.Equal(s.GetClustersWaiting(), []string{cfg.Install})
	})
	if _, err := outputs.Get(t.Context(), "east"); !errors.Is(err, snapshots.ErrNotFound) {
		t.Fatalf("east's output in the store before the management cluster reported: %v", err)
	}
	notify(input(cfg.Install))
	eventually(t, "east's output published", func() bool {
		_, err := outputs.Get(t.Context(), "east")
		return err == nil
	})
}

// registered is a fixed list of registered clusters.
type registered []string

func (r registered) ExpectedClusters(context.Context) ([]string, error) { return slices.Clone(r), nil }
