package istiovalidate_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshplane/meshplane/tools/istiovalidate"
)

// knownFinding is an analyzer message on a golden case that is not a
// translation bug, with the reason. docs/development.md ("Istio's
// validation and analyzers") lists the same, and must be kept in step.
type knownFinding struct {
	golden, cluster, object, rule string
	reason                        string
}

// knownFindings are every analyzer message the golden cases give. A
// message not listed fails TestGoldenAnalysis, and so does an entry that
// no longer appears.
var knownFindings = []knownFinding{
	{
		"access-policy-global", "east", "AuthorizationPolicy default/reviews", "analyzer IST0101",
		"the AccessPolicy admits the source namespace monitoring in any cluster; the analyzer looks for the Namespace in the local cluster only, while a source may run in any cluster of the VirtualMesh",
	},
	{
		"conflict-user-report", "east", "VirtualService default/productpage", "analyzer IST0101",
		"the DestinationRule for reviews is the user's (a wildcard DestinationRule blocks Meshplane's in REPORT mode, and the policy is FAILED saying so); whether it defines the subset is in the user's object, which the input names but does not hold",
	},
	{
		"federation-identity-ports", "east", "ServiceEntry default/reviews.default.svc.east.global", "analyzer IST0134",
		"a TCP port of the server-side federated ServiceEntry, without addresses: istiod allocates one (PILOT_ENABLE_IP_AUTOALLOCATE, on by default) and writes it into the ServiceEntry's status, which the analyzer reads; offline there is no status (istiod's webhook, which knows the setting, does not warn)",
	},
	{
		"federation-traffic-shift", "east", "VirtualService default/reviews", "analyzer IST0101",
		"the subset is in the DestinationRule for the federated host in the root namespace (istio-system), which istiod applies mesh-wide; the analyzer looks for it in the VirtualService's namespace only for hosts that are not <name>.<namespace>.svc.cluster.local (istioloop TestFederatedTrafficShiftOnEnvoy shows istiod's cluster for the subset)",
	},
	{
		"route-features-extra", "east", "DestinationRule default/ratings", "analyzer IST0128",
		"the TrafficPolicy asks for tlsMode SIMPLE, and Meshplane's mtls.istio has no CA certificates to give: Envoy then originates TLS without checking the server's certificate, which is what SIMPLE without a CA means (istioloop TestTrafficPolicyMoreFieldsOnEnvoy checks the transport socket)",
	},
	{
		"traffic-shift-virtual-destination", "west", "VirtualService default/reviews", "analyzer IST0112",
		"the catch-all route to the VirtualService's own host names no port: on each port's route, istiod then sends to the same port (the listener's), which is what the catch-all means; naming one port would send every port's traffic to it",
	},
}

func (k knownFinding) matches(golden, cluster string, f istiovalidate.Finding) bool {
	ref := f.Object
	ref.Cluster = ""
	return k.golden == golden && k.cluster == cluster && k.object == ref.String() && k.rule == f.Rule
}

// TestGoldenAnalysis runs Istio's analyzers on each golden cluster's
// output with the Kubernetes objects its input stands for (readClusters),
// and fails on any message that knownFindings does not explain.
func TestGoldenAnalysis(t *testing.T) {
	seen := make([]bool, len(knownFindings))
	analyzed := 0
	for _, name := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(goldenDir, name)
			outputs := readOutputs(t, filepath.Join(dir, "output.yaml"))
			clusters := readClusters(t, filepath.Join(dir, "input.yaml"))
			for _, c := range sortedKeys(outputs) {
				fs, err := istiovalidate.Analyze(outputs[c], clusters[c].Objects, istiovalidate.AnalyzeOptions{MeshConfig: clusters[c].MeshConfig})
				if err != nil {
					t.Fatal(err)
				}
				analyzed++
			findings:
				for _, f := range fs {
					for i, k := range knownFindings {
						if k.matches(name, c, f) {
							seen[i] = true
							t.Logf("%s: known: %s", c, f)
							continue findings
						}
					}
					t.Errorf("cluster %s: %s\n  objects:\n%s\n  cluster:\n%s", c, f, describe(outputs[c]), describe(clusters[c].Objects))
				}
			}
		})
	}
	if analyzed == 0 {
		t.Fatal("no golden cluster was analyzed")
	}
	for i, k := range knownFindings {
		if !seen[i] {
			t.Errorf("known finding %s %s in %s, cluster %s, no longer appears: remove it here and in docs/development.md", k.rule, k.object, k.golden, k.cluster)
		}
	}
}

// TestAnalyzeReports checks that the analyzers run and name the object:
// a VirtualService that routes to a subset no DestinationRule defines, on
// a host no Service has.
func TestAnalyzeReports(t *testing.T) {
	vs, err := istiovalidate.NewObject("networking.istio.io/v1", "VirtualService", "default", "reviews", map[string]string{istiovalidate.ClusterLabel: "east"}, nil,
		[]byte(`{"hosts":["reviews"],"http":[{"route":[{"destination":{"host":"reviews","subset":"v9"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := istiovalidate.Analyze([]istiovalidate.Object{vs}, nil, istiovalidate.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fs {
		got = append(got, f.String())
	}
	for _, want := range []string{
		`Error: VirtualService default/reviews in cluster east: analyzer IST0101: Referenced host not found: "reviews"`,
		`Error: VirtualService default/reviews in cluster east: analyzer IST0101: Referenced host+subset in destinationrule not found: "reviews+v9"`,
	} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("no finding %q in:\n%s", want, strings.Join(got, "\n"))
		}
	}
}
