package envoy_test

import (
	"context"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/adapters/connectrpc"
	"github.com/meshplane/meshplane/services/agent/internal/adapters/envoy"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// serve starts the 9977 server on a loopback port and returns a client
// connection to it.
func serve(t testing.TB, o envoy.ServerOptions) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- envoy.NewServer(o).Serve(ctx, ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	return conn
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	platformtest.Eventually(t, 15*time.Second, what, cond)
}

// ingestServer is a real Connect server (HTTP/2 over TLS on 127.0.0.1)
// that records PushAccessLogs batches.
type ingestServer struct {
	ingestv1connect.UnimplementedIngestServiceHandler
	mu      sync.Mutex
	batches []*ingestv1.PushAccessLogsRequest
}

func (s *ingestServer) PushAccessLogs(ctx context.Context, stream *connect.ClientStream[ingestv1.PushAccessLogsRequest]) (*connect.Response[ingestv1.PushAccessLogsResponse], error) {
	var n uint64
	for stream.Receive() {
		s.mu.Lock()
		s.batches = append(s.batches, stream.Msg())
		s.mu.Unlock()
		n += uint64(len(stream.Msg().GetEntries()))
	}
	return connect.NewResponse(&ingestv1.PushAccessLogsResponse{Accepted: n}), stream.Err()
}

func (s *ingestServer) entries() []*observabilityv1.AccessLogEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*observabilityv1.AccessLogEntry
	for _, b := range s.batches {
		out = append(out, b.GetEntries()...)
	}
	return out
}

func startIngest(t *testing.T) (*ingestServer, ingestv1connect.IngestServiceClient) {
	s := &ingestServer{}
	mux := http.NewServeMux()
	mux.Handle(ingestv1connect.NewIngestServiceHandler(s))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return s, ingestv1connect.NewIngestServiceClient(srv.Client(), srv.URL, connect.WithGRPC())
}

func node(pod, ns string, labels map[string]any) *corev3.Node {
	md, err := structpb.NewStruct(map[string]any{"NAME": pod, "NAMESPACE": ns, "LABELS": labels})
	if err != nil {
		panic(err)
	}
	return &corev3.Node{Id: "sidecar~10.0.0.1~" + pod + "." + ns + "~" + ns + ".svc.cluster.local", Metadata: md}
}

func httpEntry(code uint32, path, cluster string, headers map[string]string) *accesslogdatav3.HTTPAccessLogEntry {
	return &accesslogdatav3.HTTPAccessLogEntry{
		CommonProperties: &accesslogdatav3.AccessLogCommon{
			UpstreamCluster:         cluster,
			DownstreamRemoteAddress: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: "10.0.0.9", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}}}},
		},
		ProtocolVersion: accesslogdatav3.HTTPAccessLogEntry_HTTP11,
		Request:         &accesslogdatav3.HTTPRequestProperties{RequestMethod: corev3.RequestMethod_GET, Path: path, Authority: "reviews:9080", RequestId: "rid-" + path, RequestHeaders: headers},
		Response:        &accesslogdatav3.HTTPResponseProperties{ResponseCode: wrapperspb.UInt32(code), ResponseHeaders: map[string]string{"server": "envoy"}},
	}
}

func alsPolicies() app.EnvoyConfig {
	sel := []*snapshotv1.AccessLogPolicyConfig_WorkloadMatch{{Namespace: "bookinfo", Labels: map[string]string{"app": "reviews"}}}
	return app.EnvoyConfig{Version: "v1", AccessLogPolicies: []*snapshotv1.AccessLogPolicyConfig{
		{
			Policy: &commonv1.ObjectRef{Namespace: "ops", Name: "errors"}, WorkloadMatches: sel,
			Filters: []*observabilityv1.AccessLogPolicySpec_Filter{{Type: &observabilityv1.AccessLogPolicySpec_Filter_StatusCodeMatcher{StatusCodeMatcher: &observabilityv1.AccessLogPolicySpec_StatusCodeMatcher{Value: 500, Comparator: observabilityv1.AccessLogPolicySpec_StatusCodeMatcher_GE}}}},
		},
		{
			Policy: &commonv1.ObjectRef{Namespace: "ops", Name: "debug"}, WorkloadMatches: sel,
			Filters: []*observabilityv1.AccessLogPolicySpec_Filter{
				{Type: &observabilityv1.AccessLogPolicySpec_Filter_HeaderMatcher{HeaderMatcher: &networkingv1.TrafficPolicySpec_HeaderMatcher{Name: "x-debug", Value: "on|yes", Regex: true}}},
				{Type: &observabilityv1.AccessLogPolicySpec_Filter_PathPrefix{PathPrefix: "/admin"}},
			},
			IncludedRequestHeaders: []string{"X-Debug"}, IncludedResponseHeaders: []string{"server"},
		},
	}}
}

func TestAccessLogServiceFiltersAndForwards(t *testing.T) {
	ingest, client := startIngest(t)
	sink := app.NewAccessLogs(app.AccessLogsOptions{Cluster: "east", BatchSize: 2, FlushInterval: 20 * time.Millisecond, Log: testLogger(t)})
	sink.SetEnvoyConfig(alsPolicies())
	ctx, cancel := context.WithCancel(t.Context())
	forwarded := make(chan error, 1)
	go func() { forwarded <- sink.Run(ctx, connectrpc.NewAccessLogSender(client)) }()
	defer func() { cancel(); <-forwarded }()

	conn := serve(t, envoy.ServerOptions{AccessLogs: sink, Log: testLogger(t)})
	health, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: "envoy.service.accesslog.v3.AccessLogService"})
	if err != nil || health.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v; want SERVING", health, err)
	}

	send := func(n *corev3.Node, entries ...*accesslogdatav3.HTTPAccessLogEntry) {
		stream, err := accesslogv3.NewAccessLogServiceClient(conn).StreamAccessLogs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// Envoy sends its identifier in the first message only.
		msgs := []*accesslogv3.StreamAccessLogsMessage{
			{Identifier: &accesslogv3.StreamAccessLogsMessage_Identifier{Node: n, LogName: "als"}, LogEntries: &accesslogv3.StreamAccessLogsMessage_HttpLogs{HttpLogs: &accesslogv3.StreamAccessLogsMessage_HTTPAccessLogEntries{LogEntry: entries[:1]}}},
			{LogEntries: &accesslogv3.StreamAccessLogsMessage_HttpLogs{HttpLogs: &accesslogv3.StreamAccessLogsMessage_HTTPAccessLogEntries{LogEntry: entries[1:]}}},
		}
		for _, m := range msgs {
			if err := stream.Send(m); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := stream.CloseAndRecv(); err != nil {
			t.Fatal(err)
		}
	}
	reviews := node("reviews-v1-abc", "bookinfo", map[string]any{"app": "reviews", "version": "v1"})
	send(reviews,
		httpEntry(503, "/reviews/1", "outbound|9080||ratings.bookinfo.svc.cluster.local", nil),        // errors
		httpEntry(200, "/reviews/2", "inbound|9080||", nil),                                           // dropped
		httpEntry(200, "/reviews/3", "inbound|9080||", map[string]string{"x-debug": "yes", "a": "b"}), // debug by header
		httpEntry(200, "/reviews/4", "inbound|9080||", map[string]string{"x-debug": "nope"}),          // dropped: regex is a full match
		httpEntry(404, "/admin/x", "inbound|9080||", nil),                                             // debug by path
		httpEntry(500, "/admin/y", "inbound|9080||", nil),                                             // both
	)
	// Another workload: nothing kept.
	send(node("ratings-v1-abc", "bookinfo", map[string]any{"app": "ratings"}), httpEntry(503, "/r", "inbound|9080||", nil), httpEntry(503, "/r", "inbound|9080||", nil))

	eventually(t, "four entries at ingest", func() bool { return len(ingest.entries()) >= 4 })
	got := map[string]*observabilityv1.AccessLogEntry{}
	for _, e := range ingest.entries() {
		got[e.GetPath()] = e
	}
	want := map[string][]string{"/reviews/1": {"errors"}, "/reviews/3": {"debug"}, "/admin/x": {"debug"}, "/admin/y": {"errors", "debug"}}
	if len(got) != len(want) {
		t.Errorf("forwarded %d entries (%v), want %d", len(got), slices.Collect(mapsKeys(got)), len(want))
	}
	for path, policies := range want {
		e, ok := got[path]
		if !ok {
			t.Errorf("%s not forwarded", path)
			continue
		}
		var names []string
		for _, p := range e.GetPolicies() {
			names = append(names, p.GetName())
		}
		if !slices.Equal(names, policies) {
			t.Errorf("%s policies = %v, want %v", path, names, policies)
		}
		if e.GetCluster() != "east" || e.GetWorkload().GetName() != "reviews-v1-abc" || e.GetWorkload().GetNamespace() != "bookinfo" {
			t.Errorf("%s from %v in %q, want east/bookinfo/reviews-v1-abc", path, e.GetWorkload(), e.GetCluster())
		}
	}
	if e := got["/reviews/1"]; e.GetDirection() != "outbound" || e.GetMethod() != "GET" || e.GetResponseCode() != 503 || e.GetDownstreamAddress() != "10.0.0.9:40000" || e.GetProtocol() != "HTTP/1.1" || len(e.GetRequestHeaders()) != 0 || len(e.GetResponseHeaders()) != 0 {
		t.Errorf("/reviews/1 = %v, want an outbound GET 503 from 10.0.0.9:40000 without headers", e)
	}
	if e := got["/reviews/3"]; e.GetDirection() != "inbound" || e.GetRequestHeaders()["x-debug"] != "yes" || len(e.GetRequestHeaders()) != 1 || e.GetResponseHeaders()["server"] != "envoy" {
		t.Errorf("/reviews/3 = %v, want inbound with only the included headers", e)
	}
	if n := len(sink.Recent(100)); n != 4 {
		t.Errorf("ring holds %d entries, want 4", n)
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
