package platform_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
)

func TestHealthOverEveryProtocolAndTransport(t *testing.T) {
	for _, tr := range []struct {
		name string
		mode platform.ClientAuthMode // "" is plaintext
	}{
		{"mtls", platform.ClientAuthRequire},
		{"plaintext", ""},
	} {
		t.Run(tr.name, func(t *testing.T) {
			ts := newServer(t, tr.mode, nil).start(t)
			ts.SetReady(true)
			east := ts.ca.ClientCert(t, eastID)
			hc, base := ts.client(t, &east)
			for _, p := range protocols {
				t.Run(p.name, func(t *testing.T) {
					health := grpchealth.NewClient(hc, base, p.opts...)
					for _, svc := range []string{"", healthService, testService} {
						res, err := health.Check(t.Context(), &grpchealth.CheckRequest{Service: svc})
						if err != nil {
							t.Fatalf("Check(%q): %v", svc, err)
						}
						if res.Status != grpchealth.StatusServing {
							t.Fatalf("Check(%q) = %s, want serving", svc, res.Status)
						}
					}
					// Public, so it answers over plaintext too; and tells
					// which HTTP version carried it.
					res, err := call(t, hc, base, procPublic, p.opts...)
					if err != nil {
						t.Fatalf("call %s: %v", procPublic, err)
					}
					if got := res.Header().Get("X-Http-Proto"); got != "HTTP/2.0" {
						t.Fatalf("served over %q, want HTTP/2.0", got)
					}
				})
			}
		})
	}
}

func TestPlaintextHasNoIdentity(t *testing.T) {
	ts := newServer(t, "", nil).start(t)
	hc, base := ts.client(t, nil)
	_, err := call(t, hc, base, procWhoAmI)
	wantCode(t, err, connect.CodeUnauthenticated)
}

func TestReadiness(t *testing.T) {
	ts := newServer(t, platform.ClientAuthRequire, nil).start(t)
	east := ts.ca.ClientCert(t, eastID)
	hc, base := ts.client(t, &east)
	health := grpchealth.NewClient(hc, base, connect.WithGRPC())
	check := func() grpchealth.Status {
		t.Helper()
		res, err := health.Check(t.Context(), &grpchealth.CheckRequest{Service: testService})
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		return res.Status
	}
	admin := "http://" + ts.adminAddr

	if code, body := httpGet(t, admin+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d %q, want 200 while not ready", code, body)
	}
	if code, body := httpGet(t, admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
		t.Fatalf("/readyz = %d %q, want 503 saying starting", code, body)
	}
	if got := check(); got != grpchealth.StatusNotServing {
		t.Fatalf("health before SetReady = %s, want not serving", got)
	}

	ts.SetReady(true)
	if code, body := httpGet(t, admin+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after SetReady(true) = %d %q, want 200", code, body)
	}
	if got := check(); got != grpchealth.StatusServing {
		t.Fatalf("health after SetReady(true) = %s, want serving", got)
	}

	ts.SetNotReady("redis unreachable")
	if code, body := httpGet(t, admin+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "redis unreachable") {
		t.Fatalf("/readyz after SetNotReady = %d %q, want 503 with the reason", code, body)
	}
	if got := check(); got != grpchealth.StatusNotServing {
		t.Fatalf("health after SetNotReady = %s, want not serving", got)
	}
}

func TestAccessAndIdentity(t *testing.T) {
	ts := newServer(t, platform.ClientAuthOptional, nil).start(t)
	east := ts.ca.ClientCert(t, eastID)
	ingest := ts.ca.ClientCert(t, ingestID)
	twoURIs := ts.ca.ClientCert(t, eastID, ingestID)
	noURI := ts.ca.ClientCert(t)
	badPath := ts.ca.ClientCert(t, "spiffe://test.local/cluster/east/extra")

	type want struct {
		code connect.Code // 0: success
		kind string       // "" means no identity
		name string
	}
	tests := []struct {
		name      string
		cert      *tls.Certificate
		procedure string
		want      want
	}{
		{"no cert, public", nil, procPublic, want{}},
		{"no cert, default needs identity", nil, procDefault, want{code: connect.CodeUnauthenticated}},
		{"no cert, cluster-only", nil, procClusters, want{code: connect.CodeUnauthenticated}},
		{"cluster", &east, procWhoAmI, want{kind: "cluster", name: "east"}},
		{"cluster, default", &east, procDefault, want{kind: "cluster", name: "east"}},
		{"cluster, public still sees identity", &east, procPublic, want{kind: "cluster", name: "east"}},
		{"cluster, cluster-only", &east, procClusters, want{kind: "cluster", name: "east"}},
		{"service", &ingest, procWhoAmI, want{kind: "service", name: "ingest"}},
		{"service, cluster-only", &ingest, procClusters, want{code: connect.CodePermissionDenied}},
		{"two URI SANs are no identity", &twoURIs, procWhoAmI, want{code: connect.CodeUnauthenticated}},
		{"two URI SANs, public", &twoURIs, procPublic, want{}},
		{"no URI SAN", &noURI, procWhoAmI, want{code: connect.CodeUnauthenticated}},
		{"malformed SPIFFE ID", &badPath, procWhoAmI, want{code: connect.CodeUnauthenticated}},
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					hc, base := ts.client(t, tt.cert)
					res, err := call(t, hc, base, tt.procedure, p.opts...)
					if tt.want.code != 0 {
						wantCode(t, err, tt.want.code)
						return
					}
					if err != nil {
						t.Fatalf("call: %v", err)
					}
					if got := field(res, "authenticated"); got != (tt.want.kind != "") {
						t.Fatalf("authenticated = %v, want %v", got, tt.want.kind != "")
					}
					if tt.want.kind == "" {
						return
					}
					if got := field(res, "kind"); got != tt.want.kind {
						t.Errorf("kind = %v, want %s", got, tt.want.kind)
					}
					if got := field(res, "name"); got != tt.want.name {
						t.Errorf("name = %v, want %s", got, tt.want.name)
					}
					if got := field(res, "trust_domain"); got != trustDomain {
						t.Errorf("trust domain = %v, want %s", got, trustDomain)
					}
					if got := field(res, "serial"); got != tt.cert.Leaf.SerialNumber.String() {
						t.Errorf("serial = %v, want %s", got, tt.cert.Leaf.SerialNumber)
					}
				})
			}
		})
	}

	// Rejections never reach the handlers, so the guard must tell why.
	_, err := call(t, mustClient(t, ts, &ingest), "https://"+ts.addr, procClusters)
	if msg := err.Error(); !strings.Contains(msg, "admits only clusters") || !strings.Contains(msg, ingestID) {
		t.Errorf("permission denied message %q should name the rule and the caller", msg)
	}
	if strings.Contains(ts.logs.String(), secretValue) {
		t.Errorf("a request body reached the log:\n%s", ts.logs)
	}
}

func mustClient(t *testing.T, ts *testServer, cert *tls.Certificate) *http.Client {
	t.Helper()
	hc, _ := ts.client(t, cert)
	return hc
}

func TestTLSHandshakeRejections(t *testing.T) {
	other := platformtest.NewCA(t, "other CA")
	foreign := other.ClientCert(t, eastID)
	for _, mode := range []platform.ClientAuthMode{platform.ClientAuthRequire, platform.ClientAuthOptional} {
		t.Run(string(mode), func(t *testing.T) {
			ts := newServer(t, mode, nil).start(t)
			hc, base := ts.client(t, &foreign)
			_, err := call(t, hc, base, procPublic)
			if err == nil {
				t.Fatal("call with a certificate from another CA succeeded")
			}
			// The same, one layer down: the server refuses the handshake.
			conn, err := tls.Dial("tcp", ts.addr, &tls.Config{
				RootCAs: ts.ca.Pool,
				// Not Certificates: crypto/tls would hold back a certificate
				// that the server's CA list does not cover.
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreign, nil },
				NextProtos:           []string{"h2"},
			})
			if err == nil {
				// TLS 1.3 lets the client finish first; the server's verdict
				// arrives as an alert on the first read.
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				_, err = conn.Read(make([]byte, 1))
				_ = conn.Close()
			}
			if err == nil || !strings.Contains(err.Error(), "remote error: tls: unknown certificate authority") {
				t.Fatalf("foreign client certificate: got %v, want the server's unknown-CA alert", err)
			}
			if mode == platform.ClientAuthRequire {
				hc, base := ts.client(t, nil)
				if _, err := call(t, hc, base, procPublic); err == nil {
					t.Fatal("call without a certificate succeeded in require mode")
				}
			}
		})
	}
	t.Run("client distrusts a server from another CA", func(t *testing.T) {
		ts := newServer(t, platform.ClientAuthOptional, nil).start(t)
		o := other.ClientOptions(t, ts.addr, nil)
		hc, err := platform.NewHTTPClient(o, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer hc.CloseIdleConnections()
		_, err = call(t, hc, platform.BaseURL(o), procPublic)
		if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok {
			t.Fatalf("got %v, want a certificate verification error", err)
		}
	})
}

func TestPanicRecovery(t *testing.T) {
	ts := newServer(t, platform.ClientAuthRequire, nil).start(t)
	east := ts.ca.ClientCert(t, eastID)
	hc, base := ts.client(t, &east)
	for _, p := range protocols {
		_, err := call(t, hc, base, procPanic, p.opts...)
		wantCode(t, err, connect.CodeInternal)
		if strings.Contains(err.Error(), "boom") {
			t.Errorf("%s: the panic value reached the client: %v", p.name, err)
		}
	}
	logs := ts.logs.String()
	if !strings.Contains(logs, "rpc handler panicked") || !strings.Contains(logs, "goroutine") {
		t.Errorf("panic not logged with a stack:\n%s", logs)
	}
	_, metrics := httpGet(t, "http://"+ts.adminAddr+"/metrics")
	for _, want := range []string{
		`meshplane_rpc_server_panics_total{procedure="/test.v1.Panic/Boom"} 3`,
		`meshplane_rpc_server_requests_total{code="internal",procedure="/test.v1.Panic/Boom"} 3`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestMetrics(t *testing.T) {
	ts := newServer(t, platform.ClientAuthOptional, nil).start(t)
	ts.SetReady(true)
	hc, base := ts.client(t, nil)
	health := grpchealth.NewClient(hc, base, connect.WithGRPC())
	for range 3 {
		if _, err := health.Check(t.Context(), &grpchealth.CheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := call(t, hc, base, procDefault)
	wantCode(t, err, connect.CodeUnauthenticated)

	code, body := httpGet(t, "http://"+ts.adminAddr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`meshplane_rpc_server_requests_total{code="ok",procedure="/grpc.health.v1.Health/Check"} 3`,
		`meshplane_rpc_server_handling_seconds_count{procedure="/grpc.health.v1.Health/Check"} 3`,
		`meshplane_rpc_server_rejected_total{code="unauthenticated"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestReflection(t *testing.T) {
	ts := newServer(t, platform.ClientAuthRequire, nil).start(t)
	ingest := ts.ca.ClientCert(t, ingestID)
	hc, base := ts.client(t, &ingest)
	for _, p := range protocols[:2] { // reflection is bidi: not over gRPC-Web
		t.Run(p.name, func(t *testing.T) {
			stream := grpcreflect.NewClient(hc, base, p.opts...).NewStream(t.Context())
			defer stream.Close()
			names, err := stream.ListServices()
			if err != nil {
				t.Fatalf("ListServices: %v", err)
			}
			for _, want := range []string{healthService, testService} {
				if !slices.Contains(names, protoreflect.FullName(want)) {
					t.Errorf("reflection lists %v, want %s among them", names, want)
				}
			}
		})
	}
}

func TestRevocationAndTrustDomain(t *testing.T) {
	var checker fakeRevocation
	ts := newServer(t, platform.ClientAuthRequire, func(o *platform.ServerOptions) {
		o.Revocation = &checker
	}).start(t)
	east := ts.ca.ClientCert(t, eastID)
	west := ts.ca.ClientCert(t, "spiffe://test.local/cluster/west")
	revoked := map[string]bool{east.Leaf.SerialNumber.String(): true}
	checker.set(revoked, nil)

	hc, base := ts.client(t, &east)
	_, err := call(t, hc, base, procWhoAmI)
	wantCode(t, err, connect.CodeUnauthenticated)
	if !strings.Contains(err.Error(), "revoked") {
		t.Errorf("message %q should say the certificate is revoked", err)
	}
	// Even public procedures refuse a revoked certificate.
	_, err = call(t, hc, base, procPublic)
	wantCode(t, err, connect.CodeUnauthenticated)

	hc, base = ts.client(t, &west)
	if _, err := call(t, hc, base, procWhoAmI); err != nil {
		t.Fatalf("unrevoked certificate: %v", err)
	}
	checker.set(revoked, errors.New("revocation list not loaded"))
	_, err = call(t, hc, base, procWhoAmI)
	wantCode(t, err, connect.CodeUnavailable)

	t.Run("foreign trust domain", func(t *testing.T) {
		ts := newServer(t, platform.ClientAuthRequire, func(o *platform.ServerOptions) {
			o.TrustDomain = "prod.example"
		}).start(t)
		east := ts.ca.ClientCert(t, eastID)
		hc, base := ts.client(t, &east)
		_, err := call(t, hc, base, procWhoAmI)
		wantCode(t, err, connect.CodeUnauthenticated)
	})
}

type fakeRevocation struct {
	mu      sync.Mutex
	revoked map[string]bool
	err     error
	checks  map[string]int // by serial: how often IsRevoked was asked
}

func (f *fakeRevocation) set(revoked map[string]bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked, f.err = revoked, err
}

func (f *fakeRevocation) IsRevoked(_ context.Context, serial string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.checks == nil {
		f.checks = map[string]int{}
	}
	f.checks[serial]++
	return f.revoked[serial], f.err
}

// checked is how often IsRevoked was asked about serial.
func (f *fakeRevocation) checked(serial string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.checks[serial]
}

func TestGracefulShutdownEndsStreams(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	ts := newServer(t, platform.ClientAuthRequire, nil)
	ts.SetReady(true)
	// Unary calls in flight are let finish.
	entered, release := make(chan struct{}), make(chan struct{})
	ts.Handle("/test.v1.Slow/Get", connect.NewUnaryHandler("/test.v1.Slow/Get",
		func(context.Context, *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
			close(entered)
			<-release
			return connect.NewResponse(&structpb.Struct{}), nil
		}, ts.HandlerOptions()...))

	ln := platformtest.Listen(t)
	ts.addr = ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- ts.Serve(ctx, ln) }()

	east := ts.ca.ClientCert(t, eastID)
	o := ts.ca.ClientOptions(t, ts.addr, &east)
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	base := platform.BaseURL(o)

	watchCtx, cancelWatch := context.WithCancel(context.Background())
	defer cancelWatch()
	events := grpchealth.NewClient(hc, base, connect.WithGRPC()).Watch(watchCtx, &grpchealth.CheckRequest{})
	if ev := next(t, events); ev.Err != nil || ev.Response.Status != grpchealth.StatusServing {
		t.Fatalf("first watch event = %+v, want serving", ev)
	}
	if got := metricValue(t, ts, "meshplane_rpc_server_streams_in_flight", "/grpc.health.v1.Health/Watch"); got != 1 {
		t.Errorf("streams in flight = %v, want 1", got)
	}

	slow := make(chan error, 1)
	go func() {
		_, err := call(t, hc, base, "/test.v1.Slow/Get")
		slow <- err
	}()
	<-entered

	stop()
	// The watcher hears the server go not-serving, then its stream is cut
	// with a code that says "reconnect".
	if ev := next(t, events); ev.Err != nil || ev.Response.Status != grpchealth.StatusNotServing {
		t.Fatalf("watch event after shutdown began = %+v, want not serving", ev)
	}
	ev := next(t, events)
	wantCode(t, ev.Err, connect.CodeUnavailable)
	if _, open := <-events; open {
		t.Fatal("watch channel still open after the stream ended")
	}

	close(release)
	if err := <-slow; err != nil {
		t.Fatalf("unary call in flight during shutdown: %v", err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if got := metricValue(t, ts, "meshplane_rpc_server_streams_in_flight", "/grpc.health.v1.Health/Watch"); got != 0 {
		t.Errorf("streams in flight after shutdown = %v, want 0", got)
	}
	ts.SetReady(true) // too late: a stopped server stays not ready
	res, err := ts.HealthChecker().Check(t.Context(), &grpchealth.CheckRequest{})
	if err != nil || res.Status != grpchealth.StatusNotServing {
		t.Errorf("health after shutdown = %v, %v; want not serving", res, err)
	}
}

// metricValue reads a gauge or counter with one procedure label from the
// server's registry.
func metricValue(t *testing.T, ts *testServer, name, procedure string) float64 {
	t.Helper()
	families, err := ts.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "procedure" && l.GetValue() == procedure {
					if g := m.GetGauge(); g != nil {
						return g.GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{procedure=%q}", name, procedure)
	return 0
}

func TestShutdownClosesHandlersThatIgnoreContext(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	ts := newServer(t, platform.ClientAuthRequire, func(o *platform.ServerOptions) {
		o.ShutdownTimeout = 200 * time.Millisecond
	})
	entered, release := make(chan struct{}), make(chan struct{})
	handlerDone := make(chan struct{})
	ts.Handle("/test.v1.Stuck/Get", connect.NewUnaryHandler("/test.v1.Stuck/Get",
		func(context.Context, *connect.Request[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
			defer close(handlerDone)
			close(entered)
			<-release // deliberately deaf to its context
			return connect.NewResponse(&structpb.Struct{}), nil
		}, ts.HandlerOptions()...))
	ln := platformtest.Listen(t)
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ts.Serve(ctx, ln) }()

	east := ts.ca.ClientCert(t, eastID)
	o := ts.ca.ClientOptions(t, ln.Addr().String(), &east)
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	stuck := make(chan error, 1)
	go func() {
		_, err := call(t, hc, platform.BaseURL(o), "/test.v1.Stuck/Get")
		stuck <- err
	}()
	<-entered
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after ShutdownTimeout")
	}
	if err := <-stuck; err == nil {
		t.Fatal("call on a closed connection succeeded")
	}
	close(release)
	<-handlerDone
	if !strings.Contains(ts.logs.String(), "graceful shutdown timed out") {
		t.Error("forced close not logged")
	}
}

func next(t *testing.T, events <-chan grpchealth.WatchEvent) grpchealth.WatchEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("watch channel closed early")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	panic("unreachable")
}

func TestWiringErrors(t *testing.T) {
	ts := newServer(t, platform.ClientAuthRequire, nil)
	ts.Handle(procWhoAmI, http.NotFoundHandler()) // mounted already
	err := ts.Serve(t.Context(), platformtest.Listen(t))
	if err == nil || !strings.Contains(err.Error(), procWhoAmI) {
		t.Fatalf("Serve with a path mounted twice = %v, want an error naming it", err)
	}

	busy := platformtest.Listen(t)
	defer busy.Close()
	opts := platform.NewServerOptions()
	opts.Addr, opts.AdminAddr = busy.Addr().String(), ""
	opts.TLS = platform.TLSOptions{Plaintext: true}
	s, err := platform.NewServer(opts, slogDiscard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "listen for RPCs") {
		t.Fatalf("Run on a busy port = %v, want a listen error", err)
	}

	bad := platform.NewServerOptions()
	if _, err := platform.NewServer(bad, slogDiscard(), nil); err == nil || !strings.Contains(err.Error(), "--tls-cert-file is required") {
		t.Fatalf("NewServer without TLS files = %v, want the validation error", err)
	}
	bad.TLS = platform.TLSOptions{CertFile: "/nonexistent/cert.pem", KeyFile: "/nonexistent/key.pem", ClientAuth: platform.ClientAuthNone, MinVersion: platform.TLS13}
	if _, err := platform.NewServer(bad, slogDiscard(), nil); err == nil || !strings.Contains(err.Error(), "/nonexistent/cert.pem") {
		t.Fatalf("NewServer with missing files = %v, want an error naming the file", err)
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	opts := platform.NewServerOptions()
	opts.Addr, opts.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	opts.TLS = platform.TLSOptions{Plaintext: true}
	started := make(chan struct{}, 2)
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		if bytes.Contains(p, []byte(`msg="serving`)) {
			started <- struct{}{}
		}
		return len(p), nil
	}), nil))
	s, err := platform.NewServer(opts, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	// Both servers log when they start serving: wait for that, not a guess.
	for range 2 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not start serving")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Go's profiles are served on the admin port only when asked for.
func TestPprofOnlyWhenAsked(t *testing.T) {
	off := newServer(t, "", nil).start(t)
	if code, _ := httpGet(t, "http://"+off.adminAddr+"/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ without --pprof = %d, want 404", code)
	}
	on := newServer(t, "", func(o *platform.ServerOptions) { o.Pprof = true }).start(t)
	if code, body := httpGet(t, "http://"+on.adminAddr+"/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/ with --pprof = %d %.100q, want 200 listing the profiles", code, body)
	}
	if code, _ := httpGet(t, "http://"+on.adminAddr+"/debug/pprof/heap"); code != http.StatusOK {
		t.Fatalf("/debug/pprof/heap with --pprof = %d, want 200", code)
	}
}
