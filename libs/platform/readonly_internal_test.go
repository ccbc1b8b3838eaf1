package platform

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// registerReadOnlyTestService registers test.readonly.v1.Svc: Get declared
// idempotency_level = NO_SIDE_EFFECTS, Set not, as generated code registers
// the real services.
func registerReadOnlyTestService(t *testing.T) {
	t.Helper()
	name := "platform/readonly_test.proto"
	if _, err := protoregistry.GlobalFiles.FindFileByPath(name); err == nil {
		return
	}
	msg := ".test.readonly.v1.M"
	fd := &descriptorpb.FileDescriptorProto{
		Name: proto.String(name), Package: proto.String("test.readonly.v1"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("M")}},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Svc"),
			Method: []*descriptorpb.MethodDescriptorProto{
				{Name: proto.String("Get"), InputType: proto.String(msg), OutputType: proto.String(msg),
					Options: &descriptorpb.MethodOptions{IdempotencyLevel: descriptorpb.MethodOptions_NO_SIDE_EFFECTS.Enum()}},
				{Name: proto.String("Set"), InputType: proto.String(msg), OutputType: proto.String(msg)},
			},
		}},
	}
	f, err := protodesc.NewFile(fd, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	if err := protoregistry.GlobalFiles.RegisterFile(f); err != nil {
		t.Fatal(err)
	}
}

// The console's certificate reads and nothing more, whatever the access
// policy admits for services: a procedure that changes state (or that the
// process cannot tell about) is refused to it, and still served to other
// services.
func TestGuardKeepsTheConsoleReadOnly(t *testing.T) {
	registerReadOnlyTestService(t)
	var policy atomic.Pointer[AccessPolicy]
	p := AccessPolicy{"/test.readonly.v1.Svc/": AllowService}
	policy.Store(&p)
	reached := 0
	g := &guard{
		next:      http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ }),
		logger:    slog.New(slog.DiscardHandler),
		policy:    &policy,
		errWriter: connect.NewErrorWriter(),
		rejected:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"code"}),
		now:       time.Now,
	}
	call := func(caller, procedure string) int {
		u, err := url.Parse("spiffe://test.local/service/" + caller)
		if err != nil {
			t.Fatal(err)
		}
		cert := &x509.Certificate{SerialNumber: big.NewInt(1), NotAfter: time.Now().Add(time.Hour), URIs: []*url.URL{u}}
		r := httptest.NewRequest(http.MethodPost, procedure, nil)
		r.Header.Set("Content-Type", "application/proto")
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		return w.Code
	}
	for _, tc := range []struct {
		caller, procedure string
		want              int
	}{
		{"console", "/test.readonly.v1.Svc/Get", http.StatusOK},
		{"console", "/test.readonly.v1.Svc/Set", http.StatusForbidden},
		{"console", "/test.readonly.v1.Svc/Nope", http.StatusForbidden},
		{"console", "/not-a-procedure", http.StatusForbidden},
		{"meshctl", "/test.readonly.v1.Svc/Set", http.StatusOK},
		{"meshctl", "/test.readonly.v1.Svc/Get", http.StatusOK},
	} {
		before := reached
		if got := call(tc.caller, tc.procedure); got != tc.want {
			t.Errorf("%s calling %s: status %d, want %d", tc.caller, tc.procedure, got, tc.want)
		}
		if served := reached > before; served != (tc.want == http.StatusOK) {
			t.Errorf("%s calling %s: handler reached %v", tc.caller, tc.procedure, served)
		}
	}
}
