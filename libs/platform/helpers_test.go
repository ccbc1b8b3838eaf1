package platform_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
)

const (
	trustDomain   = "test.local"
	eastID        = "spiffe://test.local/cluster/east"
	ingestID      = "spiffe://test.local/service/ingest"
	procWhoAmI    = "/test.v1.WhoAmI/Get"      // clusters and services
	procClusters  = "/test.v1.Clusters/Only"   // clusters only
	procPublic    = "/test.v1.Public/Ping"     // anyone
	procDefault   = "/test.v1.Default/Get"     // not in the policy
	procPanic     = "/test.v1.Panic/Boom"      // anyone; panics
	healthService = "grpc.health.v1.Health"    //
	testService   = "test.v1.WhoAmI"           //
	secretValue   = "s3cr3t-bootstrap-token-1" // must never reach a log
)

var testPolicy = platform.AccessPolicy{
	procWhoAmI:   platform.AllowAuthenticated,
	procClusters: platform.AllowCluster,
	procPublic:   platform.AllowPublic,
	procPanic:    platform.AllowPublic,
}

// protocols are the three wire protocols every handler must answer.
var protocols = []struct {
	name string
	opts []connect.ClientOption
}{
	{"connect", nil},
	{"grpc", []connect.ClientOption{connect.WithGRPC()}},
	{"grpcweb", []connect.ClientOption{connect.WithGRPCWeb()}},
}

// syncBuffer collects log output written from handler goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testServer struct {
	*platform.Server
	ca        *platformtest.CA
	addr      string
	adminAddr string
	logs      *syncBuffer
	plaintext bool
}

// newServer builds a server with the test procedures mounted; mode is a
// client auth mode, or "" for plaintext. edit may change the options.
func newServer(t *testing.T, mode platform.ClientAuthMode, edit func(*platform.ServerOptions)) *testServer {
	t.Helper()
	ca := platformtest.NewCA(t, "test CA")
	opts := platform.NewServerOptions()
	opts.Addr, opts.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	if mode == "" {
		opts.TLS = platform.TLSOptions{Plaintext: true}
	} else {
		opts.TLS = ca.ServerTLS(t, mode)
	}
	if edit != nil {
		edit(&opts)
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(io.MultiWriter(logs, t.Output()), &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := platform.NewServer(opts, logger, platform.NewRegistry())
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	for _, p := range []string{procWhoAmI, procClusters, procPublic, procDefault} {
		s.Handle(p, withHTTPProto(connect.NewUnaryHandler(p, whoAmI, s.HandlerOptions()...)))
	}
	s.Handle(procPanic, connect.NewUnaryHandler(procPanic,
		func(context.Context, *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
			panic("boom: " + secretValue)
		}, s.HandlerOptions()...))
	s.RegisterServices(testService)
	s.AddAccessPolicy(testPolicy)
	return &testServer{Server: s, ca: ca, logs: logs, plaintext: mode == ""}
}

// start serves on loopback until the test ends.
func (ts *testServer) start(t *testing.T) *testServer {
	t.Helper()
	ts.addr, ts.adminAddr = platformtest.Serve(t, ts.Server)
	return ts
}

// client returns an HTTP client and base URL that present cert (none if nil).
func (ts *testServer) client(t *testing.T, cert *tls.Certificate) (*http.Client, string) {
	t.Helper()
	var o platform.ClientOptions
	if ts.plaintext {
		o = platform.NewClientOptions()
		o.Addr, o.Plaintext = ts.addr, true
	} else {
		o = ts.ca.ClientOptions(t, ts.addr, cert)
	}
	c, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatalf("NewHTTPClient: %v", err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c, platform.BaseURL(o)
}

// whoAmI answers with the caller's identity, so tests see what the
// middleware put on the context.
func whoAmI(ctx context.Context, _ *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
	fields := map[string]any{"authenticated": false}
	if id, ok := platform.IdentityFromContext(ctx); ok {
		fields = map[string]any{
			"authenticated": true,
			"kind":          string(id.Kind),
			"name":          id.Name,
			"trust_domain":  id.TrustDomain,
			"serial":        id.Serial,
		}
	}
	msg, err := structpb.NewStruct(fields)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(msg), nil
}

// withHTTPProto reports the HTTP version in a response header, so tests can
// tell HTTP/2 from HTTP/1.1.
func withHTTPProto(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Http-Proto", r.Proto)
		h.ServeHTTP(w, r)
	})
}

func call(t *testing.T, hc *http.Client, baseURL, procedure string, opts ...connect.ClientOption) (*connect.Response[structpb.Struct], error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := structpb.NewStruct(map[string]any{"token": secretValue})
	if err != nil {
		t.Fatal(err)
	}
	return connect.NewClient[structpb.Struct, structpb.Struct](hc, baseURL+procedure, opts...).
		CallUnary(ctx, connect.NewRequest(req))
}

func wantCode(t *testing.T, err error, want connect.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("call succeeded, want code %s", want)
	}
	if got := connect.CodeOf(err); got != want {
		t.Fatalf("got error %v (code %s), want code %s", err, got, want)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true // no idle connection left behind for goleak to find
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return res.StatusCode, string(body)
}

func field(res *connect.Response[structpb.Struct], name string) any {
	v, ok := res.Msg.GetFields()[name]
	if !ok {
		return nil
	}
	return v.AsInterface()
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }
