package domain

import (
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
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

// TestExplicitZeros checks that the enum fields whose zero value carries
// meaning (explicitZero) are written at zero, where protojson would write
// them, by both encodings, inside lists too and when protojson must encode
// the spec; and that no other zero value is added.
func TestExplicitZeros(t *testing.T) {
	warmup := &istiov1alpha3.LoadBalancerSettings{Warmup: &istiov1alpha3.WarmupConfiguration{Aggression: wrapperspb.Double(1.5)}}
	for _, tc := range []struct {
		name string
		m    proto.Message
		want string
		fast bool // fastJSON encodes it
	}{
		{"allow-nothing", &securityv1beta1.AuthorizationPolicy{}, `{"action":"ALLOW"}`, true},
		{"ALLOW after the rules", &securityv1beta1.AuthorizationPolicy{
			Selector: &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "a"}}, Rules: []*securityv1beta1.Rule{{}},
		}, `{"selector":{"matchLabels":{"app":"a"}},"rules":[{}],"action":"ALLOW"}`, true},
		{"DENY once", &securityv1beta1.AuthorizationPolicy{Action: securityv1beta1.AuthorizationPolicy_DENY, Rules: []*securityv1beta1.Rule{{}}}, `{"rules":[{}],"action":"DENY"}`, true},
		{"DISABLE", &istiov1alpha3.DestinationRule{Host: "h", TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{}}},
			`{"host":"h","trafficPolicy":{"tls":{"mode":"DISABLE"}}}`, true},
		{"DISABLE before the other fields, in lists", &istiov1alpha3.DestinationRule{Host: "h",
			TrafficPolicy: &istiov1alpha3.TrafficPolicy{
				Tls:               &istiov1alpha3.ClientTLSSettings{Sni: "s"},
				PortLevelSettings: []*istiov1alpha3.TrafficPolicy_PortTrafficPolicy{{Port: &istiov1alpha3.PortSelector{Number: 1}, Tls: &istiov1alpha3.ClientTLSSettings{}}},
			},
			Subsets: []*istiov1alpha3.Subset{{Name: "v1", TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{Mode: istiov1alpha3.ClientTLSSettings_ISTIO_MUTUAL}}}},
		}, `{"host":"h","trafficPolicy":{"tls":{"mode":"DISABLE","sni":"s"},"portLevelSettings":[{"port":{"number":1},"tls":{"mode":"DISABLE"}}]},"subsets":[{"name":"v1","trafficPolicy":{"tls":{"mode":"ISTIO_MUTUAL"}}}]}`, true},
		{"through protojson", &istiov1alpha3.DestinationRule{Host: "h", TrafficPolicy: &istiov1alpha3.TrafficPolicy{LoadBalancer: warmup, Tls: &istiov1alpha3.ClientTLSSettings{}}},
			`{"host":"h","trafficPolicy":{"loadBalancer":{"warmup":{"aggression":1.5}},"tls":{"mode":"DISABLE"}}}`, false},
		// No other zero value is written.
		{"no TLS settings", &istiov1alpha3.DestinationRule{Host: "h"}, `{"host":"h"}`, true},
		{"PeerAuthentication", &securityv1beta1.PeerAuthentication{Mtls: &securityv1beta1.PeerAuthentication_MutualTLS{}}, `{"mtls":{}}`, true},
		{"ServiceEntry", &istiov1alpha3.ServiceEntry{Hosts: []string{"h"}}, `{"hosts":["h"]}`, true},
		{"VirtualService", &istiov1alpha3.VirtualService{Http: []*istiov1alpha3.HTTPRoute{{}}}, `{"http":[{}]}`, true},
	} {
		got, err := MarshalSpec(tc.m)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(got) != tc.want {
			t.Errorf("%s: MarshalSpec %s, want %s", tc.name, got, tc.want)
		}
		ref, err := marshalSpecReflect(tc.m)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(ref) != tc.want {
			t.Errorf("%s: through protojson %s, want %s", tc.name, ref, tc.want)
		}
		if fast, ok := fastJSON(tc.m); ok != tc.fast || ok && string(fast) != tc.want {
			t.Errorf("%s: fastJSON %s (%v), want %s (%v)", tc.name, fast, ok, tc.want, tc.fast)
		}
	}
}
