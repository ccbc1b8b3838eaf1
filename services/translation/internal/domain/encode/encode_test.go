package encode

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
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
		want, err := Reflect(m)
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
		got, err := Spec(tc.m)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(got) != tc.want {
			t.Errorf("%s: Spec %s, want %s", tc.name, got, tc.want)
		}
		ref, err := Reflect(tc.m)
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

// TestSimpleDestinationRuleJSON checks the hand encoding of simple
// DestinationRules against protojson, and that it leaves every other
// DestinationRule to protojson.
func TestSimpleDestinationRuleJSON(t *testing.T) {
	hosts := []string{"reviews.default.svc.cluster.local", "svc-0001.default.svc.cluster-042.global", "*.example.com", "a_b-C.9", "x"}
	var modes []istiov1alpha3.ClientTLSSettings_TLSmode
	for n := range istiov1alpha3.ClientTLSSettings_TLSmode_name {
		modes = append(modes, istiov1alpha3.ClientTLSSettings_TLSmode(n))
	}
	for _, host := range hosts {
		for _, mode := range modes {
			dr := &istiov1alpha3.DestinationRule{Host: host, TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{Mode: mode}}}
			got, ok := simpleDestinationRuleJSON(dr)
			if !ok {
				t.Fatalf("%s %s: not taken by the hand encoding", host, mode)
			}
			want, err := Reflect(dr)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("%s %s: hand encoding %s, protojson %s", host, mode, got, want)
			}
		}
	}
	notSimple := map[string]*istiov1alpha3.DestinationRule{
		"no host":          {TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{Mode: istiov1alpha3.ClientTLSSettings_ISTIO_MUTUAL}}},
		"host to escape":   {Host: `a"b<c>`, TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{Mode: istiov1alpha3.ClientTLSSettings_ISTIO_MUTUAL}}},
		"no policy":        {Host: "a"},
		"no tls":           {Host: "a", TrafficPolicy: &istiov1alpha3.TrafficPolicy{}},
		"subset policy":    {Host: "a", TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{}}, Subsets: []*istiov1alpha3.Subset{{Name: "v1", TrafficPolicy: &istiov1alpha3.TrafficPolicy{}}}},
		"subset to escape": {Host: "a", TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{}}, Subsets: []*istiov1alpha3.Subset{{Name: "v1", Labels: map[string]string{"a": "<"}}}},
		"subsets, no tls":  {Host: "a", Subsets: []*istiov1alpha3.Subset{{Name: "v1"}}},
		"export to":        {Host: "a", TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{}}, ExportTo: []string{"."}},
		"outlier":          {Host: "a", TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{}, OutlierDetection: &istiov1alpha3.OutlierDetection{}}},
		"tls sni":          {Host: "a", TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{Mode: istiov1alpha3.ClientTLSSettings_SIMPLE, Sni: "x"}}},
		"tls skip":         {Host: "a", TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{InsecureSkipVerify: wrapperspb.Bool(true)}}},
		"unknown mode":     {Host: "a", TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{Mode: 99}}},
	}
	for name, dr := range notSimple {
		if b, ok := simpleDestinationRuleJSON(dr); ok {
			t.Errorf("%s: taken by the hand encoding as %s", name, b)
		}
		got, err := Spec(dr)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := Reflect(dr); string(got) != string(want) {
			t.Errorf("%s: Spec %s, protojson %s", name, got, want)
		}
	}
	// Subsets with names and labels, as traffic shifts add them.
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		dr := &istiov1alpha3.DestinationRule{Host: hosts[r.IntN(len(hosts))], TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{Mode: modes[r.IntN(len(modes))]}}}
		for range r.IntN(4) {
			ss := &istiov1alpha3.Subset{Name: []string{"", "version-v1", "app-reviews_version-v2", "x"}[r.IntN(4)]}
			for range r.IntN(4) {
				if ss.Labels == nil {
					ss.Labels = map[string]string{}
				}
				ss.Labels[[]string{"", "version", "app", "tier", "a.b/c"}[r.IntN(5)]] = []string{"", "v1", "v2", "reviews", "*"}[r.IntN(5)]
			}
			dr.Subsets = append(dr.Subsets, ss)
		}
		want, err := Reflect(dr)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := simpleDestinationRuleJSON(dr)
		if !ok {
			// Only a label key with a slash is left to protojson here.
			if !strings.Contains(string(want), "a.b/c") {
				t.Fatalf("not taken by the hand encoding: %s", want)
			}
			continue
		}
		if string(got) != string(want) {
			t.Fatalf("hand encoding %s, protojson %s", got, want)
		}
	}
	unknown := &istiov1alpha3.DestinationRule{Host: "a", TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{}}}
	unknown.ProtoReflect().SetUnknown([]byte{0xf8, 0x01, 0x01}) // field 31, varint 1
	if _, ok := simpleDestinationRuleJSON(unknown); ok {
		t.Error("a DestinationRule with unknown fields was taken by the hand encoding")
	}
}

// TestSpecTemplate checks that a template gives the bytes of the spec
// encoded with the values in place, whichever placeholder comes first, and
// that a placeholder found twice or not at all gives no template.
func TestSpecTemplate(t *testing.T) {
	spec := func(host, address string) []byte {
		b, err := Spec(&istiov1alpha3.ServiceEntry{
			Hosts: []string{host}, Addresses: []string{address},
			Ports:      []*istiov1alpha3.ServicePort{{Number: 9080, Name: "http", Protocol: "HTTP"}},
			Resolution: istiov1alpha3.ServiceEntry_DNS,
			Endpoints:  []*istiov1alpha3.WorkloadEntry{{Address: "east.example.com", Ports: map[string]uint32{"http": 15443}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	raw := spec(hostPlaceholder, addressPlaceholder)
	for _, order := range [][2]string{{hostPlaceholder, addressPlaceholder}, {addressPlaceholder, hostPlaceholder}} {
		tmpl := NewTemplate(raw, order[0], order[1])
		if tmpl == nil {
			t.Fatalf("no template for %s", raw)
		}
		a, b := "reviews.default.svc.east.global", "240.1.2.3"
		if order[0] == addressPlaceholder {
			a, b = b, a
		}
		if got, want := string(tmpl.Fill(a, b)), string(spec("reviews.default.svc.east.global", "240.1.2.3")); got != want {
			t.Errorf("filled template %s, want %s", got, want)
		}
	}
	if NewTemplate(spec(hostPlaceholder, hostPlaceholder), hostPlaceholder, addressPlaceholder) != nil {
		t.Error("a template was made with a placeholder found twice and the other missing")
	}
}

// TestTemplateMatchesProtojson fills templates of varied ServiceEntries,
// made from Spec's bytes as translation makes them, and checks each
// filling against protojson's encoding of the ServiceEntry with the values
// in place.
func TestTemplateMatchesProtojson(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	for range 500 {
		var ports []*istiov1alpha3.ServicePort
		epPorts := map[string]uint32{}
		for i := range 1 + r.IntN(3) {
			name := pick("http", "grpc-web", "tcp", "port-8080") + fmt.Sprint(i)
			ports = append(ports, &istiov1alpha3.ServicePort{Number: uint32(1 + r.IntN(65535)), Name: name, Protocol: pick("HTTP", "TCP", "GRPC")})
			epPorts[name] = uint32(r.IntN(2)) * 15443
		}
		var sans []string
		for range r.IntN(3) {
			sans = append(sans, "spiffe://"+pick("cluster.local", "east.example")+"/ns/"+pick("default", "a-b")+"/sa/"+pick("reviews", `x"y`, "é"))
		}
		gw := pick("east.example.com", "10.0.0.1", "2001:db8::1", "")
		res := istiov1alpha3.ServiceEntry_Resolution(r.IntN(3))
		build := func(host, address string) *istiov1alpha3.ServiceEntry {
			return &istiov1alpha3.ServiceEntry{
				Hosts: []string{host}, Addresses: []string{address}, Ports: ports,
				Location:        istiov1alpha3.ServiceEntry_MESH_INTERNAL,
				Resolution:      res,
				Endpoints:       []*istiov1alpha3.WorkloadEntry{{Address: gw, Ports: epPorts}},
				SubjectAltNames: sans,
			}
		}
		raw, err := Spec(build(hostPlaceholder, addressPlaceholder))
		if err != nil {
			t.Fatal(err)
		}
		tmpl := NewTemplate(raw, hostPlaceholder, addressPlaceholder)
		if tmpl == nil {
			t.Fatalf("no template for %s", raw)
		}
		host := pick("reviews.default.svc.east.global", "svc-0001.ns.svc.cluster-042.global", "a_b-C.9", "*.example.com")
		address := pick("240.1.2.3", "255.255.255.254", "fd00::1")
		want, err := Reflect(build(host, address))
		if err != nil {
			t.Fatal(err)
		}
		if got := tmpl.Fill(host, address); string(got) != string(want) {
			t.Fatalf("filled template %s, protojson %s", got, want)
		}
	}
}

// Placeholders of the templates in TestSpecTemplate.
const (
	hostPlaceholder    = "host.placeholder.meshplane.dev"
	addressPlaceholder = "address.placeholder.meshplane.dev"
)

// TestTLSDestinationRule checks the DestinationRule written straight from
// a host, a TLS mode and subsets against Spec and protojson for the
// DestinationRule made of them, and that it leaves to them what needs
// escaping.
func TestTLSDestinationRule(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	taken := 0
	for range 2000 {
		host := pick("reviews.default.svc.cluster.local", "a_b", `a"b`, "", "*.example.com")
		mode := istiov1alpha3.ClientTLSSettings_TLSmode(r.IntN(6))
		var subsets map[string]map[string]string
		for range r.IntN(3) {
			labels := map[string]string{}
			for range r.IntN(3) {
				labels[pick("version", "app", "", "a/b")] = pick("v1", "v2", "", "<")
			}
			if subsets == nil {
				subsets = map[string]map[string]string{}
			}
			subsets[pick("", "version-v1", "x", "a/b")] = labels
		}
		dr := &istiov1alpha3.DestinationRule{Host: host, TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{Mode: mode}}}
		for _, name := range slices.Sorted(maps.Keys(subsets)) {
			dr.Subsets = append(dr.Subsets, &istiov1alpha3.Subset{Name: name, Labels: subsets[name]})
		}
		want, err := Reflect(dr)
		if err != nil {
			t.Fatal(err)
		}
		if spec, err := Spec(dr); err != nil || string(spec) != string(want) {
			t.Fatalf("Spec %s (%v), protojson %s", spec, err, want)
		}
		got, ok := TLSDestinationRule(host, mode, subsets)
		if !ok {
			if host != "" && !strings.ContainsAny(string(want), `\/<`) && mode <= istiov1alpha3.ClientTLSSettings_ISTIO_MUTUAL {
				t.Fatalf("not written straight: %s", want)
			}
			continue
		}
		taken++
		if string(got) != string(want) {
			t.Fatalf("written %s, protojson %s", got, want)
		}
	}
	if taken < 200 {
		t.Errorf("only %d of 2000 DestinationRules were written straight", taken)
	}
}

// TestIstioMutualDestinationRule checks the client-side DestinationRule
// of federated hosts against protojson, and that it leaves hosts to
// escape, and no host, to Spec.
func TestIstioMutualDestinationRule(t *testing.T) {
	for _, host := range []string{"reviews.default.svc.east.global", "svc-0001.default.svc.cluster-042.global", "*.example.com", "a_b-C.9", "x", "", `a"b`, "a/b", "é"} {
		dr := &istiov1alpha3.DestinationRule{Host: host, TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{Mode: istiov1alpha3.ClientTLSSettings_ISTIO_MUTUAL}}}
		want, err := Reflect(dr)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := IstioMutualDestinationRule(host)
		if !ok {
			if host != "" && Plain(host) {
				t.Errorf("%q: not written straight", host)
			}
			continue
		}
		if host == "" || !Plain(host) {
			t.Errorf("%q: written straight as %s", host, got)
		}
		if string(got) != string(want) {
			t.Errorf("%q: written %s, protojson %s", host, got, want)
		}
	}
}

// TestSpecIsCompactAndStable checks that Spec writes no whitespace.
func TestSpecIsCompactAndStable(t *testing.T) {
	spec := &istiov1alpha3.DestinationRule{Host: "a.b.svc.cluster.local"}
	first, err := Spec(spec)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"host":"a.b.svc.cluster.local"}`; string(first) != want {
		t.Fatalf("Spec = %s, want %s", first, want)
	}
}

// TestParentsMatchesEncodingJSON checks the hand-written encoding of the
// parents annotation against encoding/json.
func TestParentsMatchesEncodingJSON(t *testing.T) {
	refs := []ParentRef{
		{Kind: "b", Name: "x", Namespace: "n", Cluster: "c"},
		{Kind: "a", Name: "y"},
		{Kind: "b", Name: "x", Namespace: "n", Cluster: "c"},
		{Kind: "b", Name: "<&>\"\\\u00e9\x01\xff", Cluster: "c"},
		{Kind: "a", Name: "w", Namespace: "m"},
	}
	got := Parents(refs...)
	want := map[string][]ParentRef{
		"a": {{Name: "y"}, {Name: "w", Namespace: "m"}}, // by cluster, namespace, name
		"b": {{Name: "<&>\"\\\u00e9\x01\xff", Cluster: "c"}, {Name: "x", Namespace: "n", Cluster: "c"}},
	}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(b) {
		t.Errorf("Parents:\n%s\nwant\n%s", got, b)
	}
	if got, want := Parents(), "{}"; got != want {
		t.Errorf("Parents() = %s, want %s", got, want)
	}

	// More refs than fit the encoder's stack buffer, in three kinds, with
	// duplicates.
	var many []ParentRef
	grouped := map[string][]ParentRef{}
	for i := range 30 {
		r := ParentRef{Kind: string(rune('c' - i%3)), Name: fmt.Sprintf("n%02d", 29-i), Namespace: "ns", Cluster: fmt.Sprintf("c%d", i%2)}
		many = append(many, r, r)
		grouped[r.Kind] = append(grouped[r.Kind], ParentRef{Name: r.Name, Namespace: r.Namespace, Cluster: r.Cluster})
	}
	for _, rs := range grouped {
		slices.SortFunc(rs, func(a, b ParentRef) int {
			return cmp.Or(strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
	}
	if b, err = json.Marshal(grouped); err != nil {
		t.Fatal(err)
	}
	if got := Parents(many...); got != string(b) {
		t.Errorf("Parents of 60 refs:\n%s\nwant\n%s", got, b)
	}
}

// TestParentsRandom checks Parents against encoding/json on random refs,
// with names that encoding/json escapes.
func TestParentsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	for range 500 {
		var refs []ParentRef
		grouped := map[string][]ParentRef{}
		for range r.IntN(12) {
			ref := ParentRef{Kind: pick("a", "b, Kind=X", "<k>"), Name: pick("n", "reviews", "a&b", "é\u2028"), Namespace: pick("", "ns", `q"`), Cluster: pick("", "east", "\x7f")}
			refs = append(refs, ref)
			stripped := ParentRef{Name: ref.Name, Namespace: ref.Namespace, Cluster: ref.Cluster}
			if !slices.Contains(grouped[ref.Kind], stripped) {
				grouped[ref.Kind] = append(grouped[ref.Kind], stripped)
			}
		}
		for _, rs := range grouped {
			slices.SortFunc(rs, func(a, b ParentRef) int {
				return cmp.Or(strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
			})
		}
		want, err := json.Marshal(grouped)
		if err != nil {
			t.Fatal(err)
		}
		if got := Parents(refs...); got != string(want) {
			t.Fatalf("Parents(%v) = %s, encoding/json %s", refs, got, want)
		}
	}
}
