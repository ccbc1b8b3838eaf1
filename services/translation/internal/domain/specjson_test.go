package domain

import (
	"math/rand/v2"
	"strings"
	"testing"

	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	"google.golang.org/protobuf/types/known/wrapperspb"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

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
			want, err := marshalSpecReflect(dr)
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
		got, err := MarshalSpec(dr)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := marshalSpecReflect(dr); string(got) != string(want) {
			t.Errorf("%s: MarshalSpec %s, protojson %s", name, got, want)
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
		want, err := marshalSpecReflect(dr)
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
		b, err := MarshalSpec(&istiov1alpha3.ServiceEntry{
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
		tmpl := newSpecTemplate(raw, order[0], order[1])
		if tmpl == nil {
			t.Fatalf("no template for %s", raw)
		}
		a, b := "reviews.default.svc.east.global", "240.1.2.3"
		if order[0] == addressPlaceholder {
			a, b = b, a
		}
		if got, want := string(tmpl.fill(a, b)), string(spec("reviews.default.svc.east.global", "240.1.2.3")); got != want {
			t.Errorf("filled template %s, want %s", got, want)
		}
	}
	if newSpecTemplate(spec(hostPlaceholder, hostPlaceholder), hostPlaceholder, addressPlaceholder) != nil {
		t.Error("a template was made with a placeholder found twice and the other missing")
	}
}

// TestDestinationRuleJSON checks that the DestinationRule written straight
// from a destination's state is what MarshalSpec gives for it.
func TestDestinationRuleJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	taken := 0
	for range 2000 {
		d := &destination{Key: ObjectKey{Cluster: "c", Namespace: "ns", Name: "d"}, Host: pick("reviews.default.svc.cluster.local", "a_b", `a"b`, "")}
		st := &destState{dst: d, tlsMode: networkingv1.TrafficPolicySpec_Policy_MTLS_Istio_TLSmode(r.IntN(5))}
		if r.IntN(5) == 0 {
			st.outlier = &networkingv1.OutlierDetection{ConsecutiveErrors: 3}
		}
		for range r.IntN(3) {
			labels := map[string]string{}
			for range r.IntN(3) {
				labels[pick("version", "app", "", "a/b")] = pick("v1", "v2", "", "<")
			}
			k := ObjectKey{Cluster: "c", Namespace: "ns", Name: pick("p", "q")}
			if st.contrib == nil {
				st.contrib = map[ObjectKey][]subsetRef{}
			}
			st.contrib[k] = append(st.contrib[k], subsetRef{name: SubsetName(labels), labels: labels})
		}
		defaultTLS := istiov1alpha3.ClientTLSSettings_TLSmode(r.IntN(5))
		want, err := MarshalSpec(st.destinationRule(d, defaultTLS))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := st.destinationRuleJSON(d, defaultTLS)
		if !ok {
			continue
		}
		taken++
		if string(got) != string(want) {
			t.Fatalf("written %s, MarshalSpec %s", got, want)
		}
	}
	if taken < 200 {
		t.Errorf("only %d of 2000 DestinationRules were written straight", taken)
	}
}
