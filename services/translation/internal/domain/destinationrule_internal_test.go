package domain

import (
	"math/rand/v2"
	"testing"

	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

// TestDestinationRuleJSON checks that the DestinationRule written straight
// from a destination's state is what encode.Spec gives for it.
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
		want, err := encode.Spec(st.destinationRule(d, defaultTLS))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := st.destinationRuleJSON(d, defaultTLS)
		if !ok {
			continue
		}
		taken++
		if string(got) != string(want) {
			t.Fatalf("written %s, encode.Spec %s", got, want)
		}
	}
	if taken < 200 {
		t.Errorf("only %d of 2000 DestinationRules were written straight", taken)
	}
}
