package domain

import (
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

// TestFastJSON checks the encoding without protojson against protojson on
// strings that need escaping, durations, 64-bit integers, wrappers, maps
// and unknown enum values, and that it leaves what it does not cover to
// protojson.
func TestFastJSON(t *testing.T) {
	strs := []string{"", "plain", `quote " and \ backslash`, "tab\tnew\nline\r\b\f", "\x00\x01\x1f\x7f", "<html>&amp;", "é✓\u2028\u2029", "\ufffd", "😀"}
	var covered []proto.Message
	for _, s := range strs {
		covered = append(covered,
			&istiov1alpha3.VirtualService{Hosts: []string{s, "h"}, Http: []*istiov1alpha3.HTTPRoute{{
				Name: s,
				Route: []*istiov1alpha3.HTTPRouteDestination{{
					Destination: &istiov1alpha3.Destination{Host: s, Subset: "v1", Port: &istiov1alpha3.PortSelector{Number: 9080}},
					Weight:      50,
				}},
				Retries: &istiov1alpha3.HTTPRetry{Attempts: 3, PerTryTimeout: durationpb.New(1500e6), RetryOn: s},
				Timeout: &durationpb.Duration{Seconds: 2, Nanos: 1000},
				Headers: &istiov1alpha3.Headers{Request: &istiov1alpha3.Headers_HeaderOperations{Set: map[string]string{s: s, "b": "c", "a": ""}}},
			}}},
			&commonv1.ResourceStatus{ObservedGeneration: -1 << 40, State: commonv1.ApprovalState_ACCEPTED, Errors: []string{s}},
			&commonv1.ResourceStatus{ObservedGeneration: 7, LastKnownGood: true, Destinations: map[string]*commonv1.ApprovalStatus{s + "x": {AcceptanceOrder: 3, Warnings: []string{s}}, "a": {}}, Workloads: []*commonv1.ClusterObjectRef{{Name: s}}},
		)
	}
	for _, d := range []*durationpb.Duration{{}, {Seconds: 1}, {Nanos: 1}, {Seconds: -3, Nanos: -500000000}, {Nanos: 100000000}, {Seconds: 315576000000}} {
		covered = append(covered, &istiov1alpha3.HTTPRoute{Timeout: d})
	}
	covered = append(covered,
		&istiov1alpha3.ServiceEntry{Hosts: []string{"h"}, Location: istiov1alpha3.ServiceEntry_Location(42), Resolution: istiov1alpha3.ServiceEntry_DNS},
		&istiov1alpha3.OutlierDetection{Consecutive_5XxErrors: wrapperspb.UInt32(0), ConsecutiveGatewayErrors: wrapperspb.UInt32(5)},
		&istiov1alpha3.ClientTLSSettings{InsecureSkipVerify: wrapperspb.Bool(false)},
	)
	for _, m := range covered {
		got, ok := fastJSON(m)
		if !ok {
			t.Errorf("%T %v: left to protojson", m, m)
			continue
		}
		want, err := marshalSpecReflect(m)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%T: %s, protojson %s", m, got, want)
		}
	}
	v, _ := structpb.NewValue(map[string]any{"a": 1.5})
	notCovered := []proto.Message{
		nil,
		&istiov1alpha3.HTTPRoute{Name: "\xff"},
		&istiov1alpha3.HTTPRoute{Timeout: &durationpb.Duration{Seconds: 1, Nanos: -1}},
		&istiov1alpha3.HTTPFaultInjection{Abort: &istiov1alpha3.HTTPFaultInjection_Abort{Percentage: &istiov1alpha3.Percent{Value: 12.5}}},
		v,
	}
	for _, m := range notCovered {
		if b, ok := fastJSON(m); ok {
			t.Errorf("%T %v: encoded as %s", m, m, b)
		}
	}
}
