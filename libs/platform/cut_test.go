package platform_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"github.com/meshplane/meshplane/libs/platform"
	"google.golang.org/protobuf/types/known/structpb"
)

const procUpload = "/test.v1.Upload/Send" // client stream, clusters only

// TestRevocationEndsOpenStreams: a stream opened with a good certificate is
// cut with CodeUnauthenticated soon after the certificate is revoked — a
// server stream (health Watch) and a client stream whose handler is blocked
// reading the next message — while another cluster's stream goes on.
func TestRevocationEndsOpenStreams(t *testing.T) {
	var checker fakeRevocation
	checker.set(nil, nil)
	ts := newServer(t, platform.ClientAuthRequire, func(o *platform.ServerOptions) {
		o.Revocation = &checker
		o.CertRecheckInterval = 50 * time.Millisecond
	})
	handlerDone, received := make(chan error, 1), make(chan struct{}, 1)
	ts.Handle(procUpload, connect.NewClientStreamHandler(procUpload,
		func(ctx context.Context, stream *connect.ClientStream[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
			for stream.Receive() {
				select {
				case received <- struct{}{}:
				default:
				}
			}
			handlerDone <- stream.Err()
			return nil, stream.Err()
		}, ts.HandlerOptions()...))
	ts.AddAccessPolicy(platform.AccessPolicy{procUpload: platform.AllowCluster})
	ts.start(t)
	ts.SetReady(true)

	east := ts.ca.ClientCert(t, eastID)
	west := ts.ca.ClientCert(t, "spiffe://test.local/cluster/west")
	eastHC, base := ts.client(t, &east)
	westHC, _ := ts.client(t, &west)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	eastWatch := grpchealth.NewClient(eastHC, base, connect.WithGRPC()).Watch(ctx, &grpchealth.CheckRequest{})
	westWatch := grpchealth.NewClient(westHC, base, connect.WithGRPC()).Watch(ctx, &grpchealth.CheckRequest{})
	for _, w := range []<-chan grpchealth.WatchEvent{eastWatch, westWatch} {
		if ev := next(t, w); ev.Err != nil || ev.Response.Status != grpchealth.StatusServing {
			t.Fatalf("first watch event = %+v, want serving", ev)
		}
	}
	upload := connect.NewClient[structpb.Struct, structpb.Struct](eastHC, base+procUpload, connect.WithGRPC()).CallClientStream(ctx)
	if err := upload.Send(&structpb.Struct{}); err != nil {
		t.Fatalf("first upload message: %v", err)
	}
	select {
	case <-received:
	case <-time.After(10 * time.Second):
		t.Fatal("the upload handler did not get the first message")
	}

	checker.set(map[string]bool{east.Leaf.SerialNumber.String(): true}, nil)

	ev := next(t, eastWatch)
	wantCode(t, ev.Err, connect.CodeUnauthenticated)
	if !strings.Contains(ev.Err.Error(), "revoked") {
		t.Errorf("watch ended with %q; it should say the certificate was revoked", ev.Err)
	}
	select {
	case <-handlerDone:
	case <-time.After(10 * time.Second):
		t.Fatal("client-stream handler still blocked reading 10s after the revocation")
	}
	_, err := upload.CloseAndReceive()
	wantCode(t, err, connect.CodeUnauthenticated)

	// west is not revoked: its stream is still open (nothing arrives).
	select {
	case ev := <-westWatch:
		t.Fatalf("west's watch got %+v after east was revoked", ev)
	case <-time.After(200 * time.Millisecond):
	}
	if got := metricByLabel(t, ts, "meshplane_rpc_server_calls_ended_total", "reason", "revoked"); got != 2 {
		t.Errorf("calls ended for revocation = %v, want 2", got)
	}
	if !strings.Contains(ts.logs.String(), "open call ended") {
		t.Error("the cut is not logged")
	}
}

// TestExpiryEndsOpenStreams: a stream outliving its client certificate is
// cut, and the client is told to reconnect with a renewed one.
func TestExpiryEndsOpenStreams(t *testing.T) {
	ts := newServer(t, platform.ClientAuthRequire, func(o *platform.ServerOptions) {
		o.CertRecheckInterval = 50 * time.Millisecond
	}).start(t)
	ts.SetReady(true)
	u, _ := url.Parse(eastID)
	short := ts.ca.Issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "client"},
		URIs:        []*url.URL{u},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotAfter:    time.Now().Add(2 * time.Second),
	})
	hc, base := ts.client(t, &short)
	events := grpchealth.NewClient(hc, base, connect.WithGRPC()).Watch(t.Context(), &grpchealth.CheckRequest{})
	if ev := next(t, events); ev.Err != nil {
		t.Fatalf("first watch event: %v", ev.Err)
	}
	ev := next(t, events)
	wantCode(t, ev.Err, connect.CodeUnauthenticated)
	if !strings.Contains(ev.Err.Error(), "expired") {
		t.Errorf("watch ended with %q; it should say the certificate expired", ev.Err)
	}
	if got := metricByLabel(t, ts, "meshplane_rpc_server_calls_ended_total", "reason", "expired"); got != 1 {
		t.Errorf("calls ended for expiry = %v, want 1", got)
	}
}

// metricByLabel reads a counter or gauge with one given label value.
func metricByLabel(t *testing.T, ts *testServer, name, label, value string) float64 {
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
				if l.GetName() == label && l.GetValue() == value {
					if g := m.GetGauge(); g != nil {
						return g.GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// Authenticated callers get the server's build version in a response
// header; callers without a certificate do not. /metrics exports it too.
func TestVersionHeaderAndBuildInfo(t *testing.T) {
	ts := newServer(t, platform.ClientAuthOptional, nil).start(t)
	east := ts.ca.ClientCert(t, eastID)
	hc, base := ts.client(t, &east)
	res, err := call(t, hc, base, procWhoAmI)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Header().Get(platform.VersionHeader); got != platform.Version {
		t.Errorf("%s = %q, want %q", platform.VersionHeader, got, platform.Version)
	}
	anon, base := ts.client(t, nil)
	res, err = call(t, anon, base, procPublic)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Header().Get(platform.VersionHeader); got != "" {
		t.Errorf("a caller without a certificate got %s = %q", platform.VersionHeader, got)
	}
	if got := metricByLabel(t, ts, "meshplane_build_info", "version", platform.Version); got != 1 {
		t.Errorf("meshplane_build_info{version=%q} = %v, want 1", platform.Version, got)
	}
}
