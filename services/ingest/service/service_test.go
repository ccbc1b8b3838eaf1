package service_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/redistest"
	revredis "github.com/meshplane/meshplane/libs/revocation/redis"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/ingest/service"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
)

const (
	td          = "test.local"
	eastID      = "spiffe://" + td + "/cluster/east"
	westID      = "spiffe://" + td + "/cluster/west"
	translation = "spiffe://" + td + "/service/translation"
)

var protocols = []struct {
	name string
	opts []connect.ClientOption
}{
	{"connect", nil},
	{"grpc", []connect.ClientOption{connect.WithGRPC()}},
	// Push reads its requests as EncodedPushRequest; a JSON client's
	// snapshot is an object all the same.
	{"connect+json", []connect.ClientOption{connect.WithProtoJSON()}},
}

func sealed(cluster string, services ...string) *snapshotv1.InputSnapshot {
	s := &snapshotv1.InputSnapshot{Cluster: cluster, Agent: &snapshotv1.AgentInfo{Version: "v1.2.3", Replica: "agent-0"}}
	for _, svc := range services {
		s.Destinations = append(s.Destinations, &discoveryv1.Destination{
			Metadata: &commonv1.ObjectMeta{Name: svc + "-default-" + cluster, Namespace: "default", Cluster: cluster},
			Spec: &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
				Ref: &commonv1.ClusterObjectRef{Name: svc, Namespace: "default", Cluster: cluster},
			}}},
		})
	}
	snapshots.SealInput(s)
	return s
}

// recordingNotifier stands in for translation.
type recordingNotifier struct {
	mu       sync.Mutex
	versions map[string][]string
}

func (n *recordingNotifier) Notify(_ context.Context, cluster, version string, _ []byte) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.versions == nil {
		n.versions = map[string][]string{}
	}
	n.versions[cluster] = append(n.versions[cluster], version)
	return nil
}

func (n *recordingNotifier) notices(cluster string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.versions[cluster]...)
}

type env struct {
	ca       *platformtest.CA
	addr     string
	notifier *recordingNotifier
}

// newEnv builds the service from cfg, runs it, and serves it over mTLS on
// loopback until the test ends.
func newEnv(t testing.TB, cfg service.Config, opts ...service.Option) *env {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	notifier := &recordingNotifier{}
	svc, err := service.New(cfg, append([]service.Option{service.WithLogger(log), service.WithNotifier(notifier)}, opts...)...)
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
	// As platform.RunMain does: the service's revocation set guards it.
	so.Revocation = svc.RevocationChecker()
	srv, err := platform.NewServer(so, log, platform.NewRegistry())
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	svc.Mount(srv)
	srv.SetReady(true)
	addr, _ := platformtest.Serve(t, srv)
	return &env{ca: ca, addr: addr, notifier: notifier}
}

func memoryConfig() service.Config {
	cfg := service.DefaultConfig()
	cfg.Replica = "ingest-0"
	return cfg
}

func (e *env) client(t testing.TB, id string, protoOpts []connect.ClientOption) ingestv1connect.IngestServiceClient {
	t.Helper()
	cert := e.ca.ClientCert(t, id)
	o := e.ca.ClientOptions(t, e.addr, &cert)
	o.Timeout = 10 * time.Second
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return ingestv1connect.NewIngestServiceClient(hc, platform.BaseURL(o), append(platform.DefaultClientOptions(o), protoOpts...)...)
}

// encodedClient is a Push client that sends EncodedPushRequest, as the
// agent does.
func (e *env) encodedClient(t testing.TB, id string) *connect.Client[ingestv1.EncodedPushRequest, ingestv1.PushResponse] {
	t.Helper()
	cert := e.ca.ClientCert(t, id)
	o := e.ca.ClientOptions(t, e.addr, &cert)
	o.Timeout = 10 * time.Second
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return connect.NewClient[ingestv1.EncodedPushRequest, ingestv1.PushResponse](hc, platform.BaseURL(o)+ingestv1connect.IngestServicePushProcedure, platform.DefaultClientOptions(o)...)
}

// push sends s on stream and returns the acknowledged version.
func push(t *testing.T, stream *connect.BidiStreamForClient[ingestv1.PushRequest, ingestv1.PushResponse], s *snapshotv1.InputSnapshot) (string, error) {
	t.Helper()
	if err := stream.Send(&ingestv1.PushRequest{Snapshot: s}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("Send: %v", err)
	}
	res, err := stream.Receive()
	if err != nil {
		return "", err
	}
	return res.GetStoredVersion(), nil
}

func streamCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
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

func clusterState(t *testing.T, c ingestv1connect.IngestServiceClient, cluster string) *ingestv1.ClusterConnectivity {
	t.Helper()
	res, err := c.ListClusters(t.Context(), connect.NewRequest(&ingestv1.ListClustersRequest{}))
	if err != nil {
		t.Fatalf("ListClusters: %v", err)
	}
	for _, cc := range res.Msg.GetClusters() {
		if cc.GetCluster() == cluster {
			return cc
		}
	}
	return nil
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	platformtest.Eventually(t, timeout, what, cond)
}

func TestPush(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t, memoryConfig())
			agent := e.client(t, eastID, p.opts)
			tools := e.client(t, translation, p.opts)

			stream := agent.Push(streamCtx(t))
			s1 := sealed("east", "a")
			got, err := push(t, stream, s1)
			if err != nil || got != s1.GetVersion() {
				t.Fatalf("push = %q, %v; want stored_version %q", got, err, s1.GetVersion())
			}
			// The same content again is acknowledged but not announced.
			got, err = push(t, stream, proto.Clone(s1).(*snapshotv1.InputSnapshot))
			if err != nil || got != s1.GetVersion() {
				t.Fatalf("second push = %q, %v; want stored_version %q", got, err, s1.GetVersion())
			}
			if n := e.notifier.notices("east"); len(n) != 1 || n[0] != s1.GetVersion() {
				t.Fatalf("translation notices %v, want exactly [%s]", n, s1.GetVersion())
			}

			st := clusterState(t, tools, "east")
			if st == nil || !st.GetConnected() || st.GetVersion() != s1.GetVersion() || st.GetReplica() != "ingest-0" || st.GetAgentVersion() != "v1.2.3" {
				t.Fatalf("ListClusters while streaming: %v, want east connected at %s", st, s1.GetVersion())
			}

			res, err := tools.GetInputSnapshot(t.Context(), connect.NewRequest(&ingestv1.GetInputSnapshotRequest{Cluster: "east"}))
			if err != nil {
				t.Fatalf("GetInputSnapshot: %v", err)
			}
			if !proto.Equal(res.Msg.GetSnapshot(), s1) {
				t.Fatalf("stored snapshot %v, want %v", res.Msg.GetSnapshot(), s1)
			}

			if err := stream.CloseRequest(); err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Receive(); !errors.Is(err, io.EOF) {
				t.Fatalf("Receive after CloseRequest: %v, want io.EOF", err)
			}
			_ = stream.CloseResponse()
			eventually(t, 10*time.Second, "east to be reported disconnected", func() bool {
				st := clusterState(t, tools, "east")
				return st != nil && !st.GetConnected() && st.GetVersion() == s1.GetVersion()
			})
		})
	}
}

func TestPushSnapshotOfAnotherCluster(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t, memoryConfig())
			agent := e.client(t, eastID, p.opts)
			tools := e.client(t, translation, p.opts)

			stream := agent.Push(streamCtx(t))
			good := sealed("east", "a")
			if _, err := push(t, stream, good); err != nil {
				t.Fatalf("push: %v", err)
			}
			_, err := push(t, stream, sealed("west", "evil"))
			wantCode(t, err, connect.CodeInvalidArgument)
			_ = stream.CloseResponse()

			for _, cluster := range []string{"east", "west"} {
				res, err := tools.GetInputSnapshot(t.Context(), connect.NewRequest(&ingestv1.GetInputSnapshotRequest{Cluster: cluster}))
				if cluster == "west" {
					wantCode(t, err, connect.CodeNotFound)
					continue
				}
				if err != nil {
					t.Fatalf("GetInputSnapshot(east): %v", err)
				}
				if !proto.Equal(res.Msg.GetSnapshot(), good) {
					t.Fatalf("east's snapshot is %s, want the last good one %s", res.Msg.GetSnapshot().GetVersion(), good.GetVersion())
				}
			}
			if n := e.notifier.notices("west"); len(n) != 0 {
				t.Fatalf("translation was told about west: %v", n)
			}
		})
	}
}

// TestPushMalformed: an agent's encoding that does not decode is refused
// with InvalidArgument naming the fault, and the last good snapshot stays.
func TestPushMalformed(t *testing.T) {
	e := newEnv(t, memoryConfig())
	tools := e.client(t, translation, nil)
	good := sealed("east", "a", "b")
	enc, err := snapshots.EncodeInput(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, data, want string
	}{
		{"truncated", string(enc.Data[:len(enc.Data)-7]), "malformed snapshot encoding"},
		{"garbage", "\x00\x01 not a snapshot \xff", "malformed snapshot encoding"},
		{"invalid UTF-8", string(append(bytes.Clone(enc.Data), 0x0a, 0x02, 0xc3, 0x28)), "invalid UTF-8"},
		{"empty", "", "no snapshot in the request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := e.encodedClient(t, eastID).CallBidiStream(streamCtx(t))
			if got, err := sendAndReceive(stream, &ingestv1.EncodedPushRequest{Snapshot: enc.Data}); err != nil || got != good.GetVersion() {
				t.Fatalf("good push = %q, %v", got, err)
			}
			_, err := sendAndReceive(stream, &ingestv1.EncodedPushRequest{Snapshot: []byte(tc.data)})
			wantCode(t, err, connect.CodeInvalidArgument)
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			res, err := tools.GetInputSnapshot(t.Context(), connect.NewRequest(&ingestv1.GetInputSnapshotRequest{Cluster: "east"}))
			if err != nil || !proto.Equal(res.Msg.GetSnapshot(), good) {
				t.Fatalf("east's snapshot after a refused push: %v (%v), want the last good one", res.Msg.GetSnapshot().GetVersion(), err)
			}
		})
	}
}

func TestAccess(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			e := newEnv(t, memoryConfig())
			t.Run("service pushing", func(t *testing.T) {
				stream := e.client(t, translation, p.opts).Push(streamCtx(t))
				_, err := push(t, stream, sealed("east", "a"))
				wantCode(t, err, connect.CodePermissionDenied)
				_ = stream.CloseResponse()
			})
			t.Run("cluster listing clusters", func(t *testing.T) {
				_, err := e.client(t, westID, p.opts).ListClusters(t.Context(), connect.NewRequest(&ingestv1.ListClustersRequest{}))
				wantCode(t, err, connect.CodePermissionDenied)
			})
			t.Run("cluster reading a snapshot", func(t *testing.T) {
				_, err := e.client(t, westID, p.opts).GetInputSnapshot(t.Context(), connect.NewRequest(&ingestv1.GetInputSnapshotRequest{Cluster: "east"}))
				wantCode(t, err, connect.CodePermissionDenied)
			})
			t.Run("certificate of a foreign trust domain", func(t *testing.T) {
				stream := e.client(t, "spiffe://other.local/cluster/east", p.opts).Push(streamCtx(t))
				_, err := push(t, stream, sealed("east", "a"))
				wantCode(t, err, connect.CodeUnauthenticated)
				_ = stream.CloseResponse()
			})
		})
	}
}

// Redis down: pushes are still accepted and written through when Redis is
// back (DESIGN.md section 7).
func TestPushThroughRedisOutage(t *testing.T) {
	r := redistest.Start(t)
	rc := r.Client(t)
	cfg := memoryConfig()
	cfg.Redis.Addrs = r.Addr()
	cfg.FlushInterval = 20 * time.Millisecond
	e := newEnv(t, cfg)
	key := "meshplane:{" + cfg.Install + "}:" + string(snapshots.Inputs) + ":east"
	redisVersion := func() string {
		v, _ := rc.HGet(t.Context(), key, "version").Result()
		return v
	}

	stream := e.client(t, eastID, nil).Push(streamCtx(t))
	s1 := sealed("east", "a")
	if got, err := push(t, stream, s1); err != nil || got != s1.GetVersion() {
		t.Fatalf("push = %q, %v", got, err)
	}
	if got := redisVersion(); got != s1.GetVersion() {
		t.Fatalf("version in Redis = %q, want %q", got, s1.GetVersion())
	}

	r.Kill()
	s2 := sealed("east", "a", "b")
	if got, err := push(t, stream, s2); err != nil || got != s2.GetVersion() {
		t.Fatalf("push while Redis is down = %q, %v; want it accepted", got, err)
	}
	res, err := e.client(t, translation, nil).GetInputSnapshot(t.Context(), connect.NewRequest(&ingestv1.GetInputSnapshotRequest{Cluster: "east"}))
	if err != nil {
		t.Fatalf("GetInputSnapshot while Redis is down: %v", err)
	}
	if res.Msg.GetSnapshot().GetVersion() != s2.GetVersion() {
		t.Fatalf("GetInputSnapshot while Redis is down = %s, want %s", res.Msg.GetSnapshot().GetVersion(), s2.GetVersion())
	}

	if err := r.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the pending snapshot to reach Redis", func() bool {
		return redisVersion() == s2.GetVersion()
	})
	data, err := rc.HGet(t.Context(), key, "data").Bytes()
	if err != nil {
		t.Fatal(err)
	}
	got := &snapshotv1.InputSnapshot{}
	if err := proto.Unmarshal(data, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, s2) {
		t.Fatalf("snapshot in Redis differs from the one pushed")
	}
	_ = stream.CloseRequest()
	_ = stream.CloseResponse()
}

// Redis restarts empty between two pushes: the snapshot of a connected
// agent is written back, although the agent has nothing new to push.
func TestRedisRestartRestoresConnectedClusters(t *testing.T) {
	r := redistest.Start(t)
	rc := r.Client(t)
	cfg := memoryConfig()
	cfg.Redis.Addrs = r.Addr()
	cfg.FlushInterval = 20 * time.Millisecond
	e := newEnv(t, cfg)
	key := "meshplane:{" + cfg.Install + "}:" + string(snapshots.Inputs) + ":east"

	stream := e.client(t, eastID, nil).Push(streamCtx(t))
	s1 := sealed("east", "a")
	if got, err := push(t, stream, s1); err != nil || got != s1.GetVersion() {
		t.Fatalf("push = %q, %v", got, err)
	}
	r.Kill()
	if err := r.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the snapshot to be restored to Redis", func() bool {
		v, _ := rc.HGet(t.Context(), key, "version").Result()
		return v == s1.GetVersion()
	})
	// Pushing the same content again is still not a new store write.
	if got, err := push(t, stream, proto.Clone(s1).(*snapshotv1.InputSnapshot)); err != nil || got != s1.GetVersion() {
		t.Fatalf("push after restore = %q, %v", got, err)
	}
	if n := e.notifier.notices("east"); len(n) != 1 {
		t.Fatalf("translation notices %v, want one", n)
	}
	_ = stream.CloseRequest()
	_ = stream.CloseResponse()
}

// A certificate that registration revokes (in the shared Redis set) is
// refused by a standalone ingest on the caller's next call.
func TestRevokedCertificateIsRefused(t *testing.T) {
	r := redistest.Start(t)
	cfg := memoryConfig()
	cfg.Redis.Addrs = r.Addr()
	e := newEnv(t, cfg)
	cert := e.ca.ClientCert(t, eastID)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	o := e.ca.ClientOptions(t, e.addr, &cert)
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	c := ingestv1connect.NewIngestServiceClient(hc, platform.BaseURL(o), platform.DefaultClientOptions(o)...)
	if _, err := push(t, c.Push(streamCtx(t)), sealed("east", "a")); err != nil {
		t.Fatalf("push before revocation: %v", err)
	}
	if err := r.Client(t).ZAdd(t.Context(), revredis.Key(cfg.Install), goredis.Z{
		Member: leaf.SerialNumber.String(), Score: float64(leaf.NotAfter.UnixMilli()),
	}).Err(); err != nil {
		t.Fatal(err)
	}
	var last error
	eventually(t, 15*time.Second, "the revoked certificate to be refused", func() bool {
		_, last = push(t, c.Push(streamCtx(t)), sealed("east", "a", "b"))
		return last != nil
	})
	if code := connect.CodeOf(last); code != connect.CodeUnauthenticated && code != connect.CodePermissionDenied {
		t.Fatalf("revoked certificate refused with %v, want Unauthenticated or PermissionDenied", last)
	}
}
