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
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"google.golang.org/protobuf/types/known/structpb"
)

const procUpload = "/test.v1.Upload/Send" // client stream, clusters only

// TestRevocationEndsOpenStreams: a stream opened with a good certificate is
// cut with CodeUnauthenticated soon after the certificate is revoked — a
// server stream (health Watch) and a client stream whose handler is blocked
// reading the next message — while another cluster's streams go on.
func TestRevocationEndsOpenStreams(t *testing.T) {
	var checker fakeRevocation
	checker.set(nil, nil)
	ts := newServer(t, platform.ClientAuthRequire, func(o *platform.ServerOptions) {
		o.Revocation = &checker
		o.CertRecheckInterval = 50 * time.Millisecond
	})
	// Each upload message says who sent it ("from"); the handler passes
	// on each one, whether the call's context had ended when it came, and
	// at the end the sender and the error the stream ended with.
	type message struct {
		from string
		cut  bool
	}
	type ended struct {
		from string
		err  error
	}
	received, handlerDone := make(chan message, 10), make(chan ended, 2)
	ts.Handle(procUpload, connect.NewClientStreamHandler(procUpload,
		func(ctx context.Context, stream *connect.ClientStream[structpb.Struct]) (*connect.Response[structpb.Struct], error) {
			from := ""
			for stream.Receive() {
				from = stream.Msg().GetFields()["from"].GetStringValue()
				received <- message{from, ctx.Err() != nil}
			}
			handlerDone <- ended{from, stream.Err()}
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
	send := func(upload *connect.ClientStreamForClient[structpb.Struct, structpb.Struct], from string) {
		t.Helper()
		if err := upload.Send(&structpb.Struct{Fields: map[string]*structpb.Value{"from": structpb.NewStringValue(from)}}); err != nil {
			t.Fatalf("upload message from %s: %v", from, err)
		}
	}
	upload := func(hc connect.HTTPClient, from string) *connect.ClientStreamForClient[structpb.Struct, structpb.Struct] {
		t.Helper()
		u := connect.NewClient[structpb.Struct, structpb.Struct](hc, base+procUpload, connect.WithGRPC()).CallClientStream(ctx)
		send(u, from)
		select {
		case m := <-received:
			if m != (message{from: from}) {
				t.Fatalf("the upload handler got %+v, want the first message from %s", m, from)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the upload handler did not get the first message from %s", from)
		}
		return u
	}
	eastUpload, westUpload := upload(eastHC, "east"), upload(westHC, "west")

	checker.set(map[string]bool{east.Leaf.SerialNumber.String(): true}, nil)

	ev := next(t, eastWatch)
	wantCode(t, ev.Err, connect.CodeUnauthenticated)
	if !strings.Contains(ev.Err.Error(), "revoked") {
		t.Errorf("watch ended with %q; it should say the certificate was revoked", ev.Err)
	}
	select {
	case e := <-handlerDone:
		if e.from != "east" {
			t.Fatalf("the upload from %s ended (%v), want east's", e.from, e.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("client-stream handler still blocked reading 10s after the revocation")
	}
	_, err := eastUpload.CloseAndReceive()
	wantCode(t, err, connect.CodeUnauthenticated)

	// west is not revoked: its streams are still open. Sweeps check the
	// open calls one after the other, in one goroutine: once west's
	// serial has been checked twice more, the sweep that cut east has
	// returned, and had it cut west too, it would have done so by now (a
	// west call that ended is checked no more: then the wait ends too).
	westSerial := west.Leaf.SerialNumber.String()
	seen := checker.checked(westSerial)
	platformtest.Eventually(t, 10*time.Second, "two more checks of west's certificate", func() bool {
		return checker.checked(westSerial) >= seen+2 || len(handlerDone) > 0
	})
	if got := metricByLabel(t, ts, "meshplane_rpc_server_calls_ended_total", "reason", "revoked"); got != 2 {
		t.Errorf("calls ended for revocation = %v, want 2", got)
	}
	// Then each of west's streams carries a marker, which must be the next
	// thing on it. Had west's upload been cut, its closed request body
	// would drop the marker, or the handler would see its context ended
	// when the marker came. The watch got nothing before its marker: a
	// stream delivers in order.
	send(westUpload, "west")
	select {
	case m := <-received:
		if m != (message{from: "west"}) {
			t.Errorf("the upload handler got %+v after east was revoked, want west's marker on an open call", m)
		}
	case e := <-handlerDone:
		t.Fatalf("west's upload ended after east was revoked: %v", e.err)
	case <-time.After(10 * time.Second):
		t.Fatal("west's upload marker did not arrive within 10s")
	}
	ts.SetReady(false)
	if ev := next(t, westWatch); ev.Err != nil || ev.Response.Status != grpchealth.StatusNotServing {
		t.Errorf("west's watch got %+v after east was revoked, want the marker (not serving)", ev)
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
