package domain_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

type detector = settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector

func discoverySettings(t *testing.T, js string) *settingsv1.SettingsSpec_DiscoverySettings {
	t.Helper()
	d := &settingsv1.SettingsSpec_DiscoverySettings{}
	if err := protojson.Unmarshal([]byte(js), d); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return d
}

// Each field of a cluster's detector comes from the most specific place
// that sets it: the cluster's own entry, then "*", then the global fields.
func TestGatewayDetectorResolution(t *testing.T) {
	const all = `{
		"ingressGatewayLabels": {"istio": "ingressgateway"},
		"eastWestGatewayLabels": {"istio": "eastwestgateway"},
		"eastWestGatewayTlsPortName": "tls",
		"gatewayDetectors": {
			"*": {"eastWestGatewayLabels": {"gw": "default-ew"}, "eastWestGatewayTlsPortName": "tls-star"},
			"east": {"eastWestGatewayLabels": {"gw": "east-ew"}},
			"west": {"ingressGatewayLabels": {"gw": "west-in"}, "eastWestGatewayTlsPortName": "mtls"}
		}
	}`
	for _, tc := range []struct {
		name, settings, cluster string
		want                    *detector
	}{
		{"no settings", `{}`, "east", nil},
		{"only unrelated settings", `{"includeNamespaces": ["bookinfo"]}`, "east", nil},
		{"global fields", `{"eastWestGatewayLabels": {"a": "b"}}`, "east", &detector{EastWestGatewayLabels: map[string]string{"a": "b"}}},
		{"own entry over star over global", all, "east", &detector{
			IngressGatewayLabels:       map[string]string{"istio": "ingressgateway"},
			EastWestGatewayLabels:      map[string]string{"gw": "east-ew"},
			EastWestGatewayTlsPortName: "tls-star",
		}},
		{"own entry's other fields", all, "west", &detector{
			IngressGatewayLabels:       map[string]string{"gw": "west-in"},
			EastWestGatewayLabels:      map[string]string{"gw": "default-ew"},
			EastWestGatewayTlsPortName: "mtls",
		}},
		{"star for a cluster without an entry", all, "north", &detector{
			IngressGatewayLabels:       map[string]string{"istio": "ingressgateway"},
			EastWestGatewayLabels:      map[string]string{"gw": "default-ew"},
			EastWestGatewayTlsPortName: "tls-star",
		}},
		{"an entry for another cluster only", `{"gatewayDetectors": {"east": {"eastWestGatewayTlsPortName": "mtls"}}}`, "west", nil},
		{"nil settings", ``, "east", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d *settingsv1.SettingsSpec_DiscoverySettings
			if tc.settings != "" {
				d = discoverySettings(t, tc.settings)
			}
			got := domain.GatewayDetector(d, tc.cluster)
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Fatalf("GatewayDetector(%s) (-want +got):\n%s", tc.cluster, diff)
			}
			if got != nil {
				// The result shares no map with the Settings.
				before := proto.Clone(d)
				for k := range got.GetEastWestGatewayLabels() {
					got.EastWestGatewayLabels[k] = "changed"
				}
				for k := range got.GetIngressGatewayLabels() {
					got.IngressGatewayLabels[k] = "changed"
				}
				if !proto.Equal(before, d) {
					t.Fatal("changing the result changed the Settings")
				}
			}
		})
	}
}

func TestValidateSettingsGatewayDetectors(t *testing.T) {
	for _, tc := range []struct {
		name, discovery string
		want            []string
	}{
		{"valid", `{"ingressGatewayLabels": {"istio": "ingressgateway", "example.com/gw": ""}, "eastWestGatewayTlsPortName": "tls",
			"gatewayDetectors": {"*": {"eastWestGatewayLabels": {"app.kubernetes.io/name": "ew-1.0"}}, "east": {"eastWestGatewayTlsPortName": "tls-15443"}, "west": {}}}`, nil},
		{"empty cluster name", `{"gatewayDetectors": {"": {"eastWestGatewayTlsPortName": "tls"}}}`,
			[]string{`spec.discovery.gatewayDetectors[""]: the cluster name must not be empty ("*" is the default for every cluster)`}},
		{"bad label key in an entry", `{"gatewayDetectors": {"east": {"eastWestGatewayLabels": {"bad key": "x"}}}}`,
			[]string{`spec.discovery.gatewayDetectors["east"].eastWestGatewayLabels["bad key"]: invalid label key: the name of "bad key" must be at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit`}},
		{"bad label prefix", `{"ingressGatewayLabels": {"Example.com/gw": "x"}}`,
			[]string{`spec.discovery.ingressGatewayLabels["Example.com/gw"]: invalid label key: the prefix of "Example.com/gw" must be a DNS subdomain`}},
		{"bad label value", `{"gatewayDetectors": {"*": {"ingressGatewayLabels": {"istio": "-gw"}}}}`,
			[]string{`spec.discovery.gatewayDetectors["*"].ingressGatewayLabels["istio"]: invalid label value "-gw": at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit`}},
		{"bad port name in an entry", `{"gatewayDetectors": {"west": {"eastWestGatewayTlsPortName": "TLS_port"}}}`,
			[]string{`spec.discovery.gatewayDetectors["west"].eastWestGatewayTlsPortName: "TLS_port" is not a valid Service port name: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`}},
		{"bad global port name", `{"eastWestGatewayTlsPortName": "tls-"}`,
			[]string{`spec.discovery.eastWestGatewayTlsPortName: "tls-" is not a valid Service port name: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`}},
		{"errors in a fixed order", `{"gatewayDetectors": {"b": {"eastWestGatewayTlsPortName": "-"}, "a": {"eastWestGatewayTlsPortName": "-"}}}`,
			[]string{
				`spec.discovery.gatewayDetectors["a"].eastWestGatewayTlsPortName: "-" is not a valid Service port name: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`,
				`spec.discovery.gatewayDetectors["b"].eastWestGatewayTlsPortName: "-" is not a valid Service port name: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := domain.ValidateSettings(&settingsv1.SettingsSpec{Discovery: discoverySettings(t, tc.discovery)})
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ValidateSettings:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
