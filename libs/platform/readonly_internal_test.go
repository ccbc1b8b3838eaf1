package platform

import (
	"net/http"
	"testing"
	"time"

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
	reached := 0
	g := testGuard(AccessPolicy{"/test.readonly.v1.Svc/": AllowService}, time.Now, func(http.ResponseWriter, *http.Request) { reached++ })
	call := func(caller, procedure string) int {
		cert := testCert(t, "spiffe://test.local/service/"+caller, time.Now().Add(time.Hour))
		return serveGuard(g, procedure, cert, true).Code
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
