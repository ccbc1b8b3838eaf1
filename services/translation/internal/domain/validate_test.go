package domain_test

import (
	"slices"
	"strings"
	"testing"

	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestValidateTrafficPolicy(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       []string
	}{
		{"empty policy is valid", `{}`, nil},
		{"a full valid policy", `{"httpRequestMatchers":[{"regex":"/a/[0-9]+","headers":[{"name":"x","value":"^v[12]$","regex":true}],"method":"GET"}],
			"policy":{"requestTimeout":"1s","retries":{"attempts":2,"perTryTimeout":"0.1s","retryOn":"5xx,gateway-error,503"},"faultInjection":{"abort":{"httpStatus":503},"percentage":100},
			"trafficShift":{"destinations":[{"weight":0,"kubeService":{"name":"a"}},{"weight":1,"kubeService":{"name":"b"}}]},
			"mirror":{"kubeService":{"name":"m"},"percentage":0},"outlierDetection":{},"mtls":{"istio":{"tlsMode":"ISTIO_MUTUAL"}}}}`, nil},
		{"durations must be positive", `{"policy":{"requestTimeout":"0s","retries":{"attempts":1,"perTryTimeout":"-1s"},"corsPolicy":{"maxAge":"0s"},"outlierDetection":{"interval":"-2s","baseEjectionTime":"0s"}}}`, []string{
			"spec.policy.requestTimeout: must be positive",
			"spec.policy.retries.perTryTimeout: must be positive",
			"spec.policy.corsPolicy.maxAge: must be positive",
			"spec.policy.outlierDetection.interval: must be positive",
			"spec.policy.outlierDetection.baseEjectionTime: must be positive",
		}},
		{"percentages", `{"policy":{"faultInjection":{"fixedDelay":"1s","percentage":-1},"mirror":{"kubeService":{"name":"m"},"percentage":100.5},"outlierDetection":{"maxEjectionPercent":101}}}`, []string{
			"spec.policy.faultInjection.percentage: must be between 0 and 100",
			"spec.policy.mirror.percentage: must be between 0 and 100",
			"spec.policy.outlierDetection.maxEjectionPercent: must be between 0 and 100",
		}},
		{"retries", `{"policy":{"retries":{"attempts":-3}}}`, []string{"spec.policy.retries.attempts: must be >= 0"}},
		{"durations under Istio's 1ms minimum", `{"policy":{"requestTimeout":"0.000999s","faultInjection":{"fixedDelay":"0.001s"}}}`, []string{"spec.policy.requestTimeout: must be at least 1ms"}},
		{"regexes", `{"httpRequestMatchers":[{"prefix":"/"},{"regex":"(["}],"policy":{"corsPolicy":{"allowOrigins":[{"regex":"*"}]}}}`, []string{
			"spec.httpRequestMatchers[1].regex: invalid RE2 regex \"([\": error parsing regexp: missing closing ]: `[`",
			"spec.policy.corsPolicy.allowOrigins[0].regex: invalid RE2 regex \"*\": error parsing regexp: missing argument to repetition operator: `*`",
		}},
		{"matchers", `{"httpRequestMatchers":[{"exact":"","headers":[{"name":"x"},{"name":"x"},{"name":"x","invertMatch":true},{"value":"1"}],"queryParameters":[{"name":"q"},{"name":"q"}],"method":"get"}]}`, []string{
			"spec.httpRequestMatchers[0].exact: must not be empty",
			`spec.httpRequestMatchers[0].headers[1].name: header "x" is matched twice`,
			"spec.httpRequestMatchers[0].headers[3].name: is required",
			`spec.httpRequestMatchers[0].queryParameters[1].name: query parameter "q" is matched twice`,
			`spec.httpRequestMatchers[0].method: "get" is not an HTTP method`,
		}},
		{"traffic shift", `{"policy":{"trafficShift":{"destinations":[{"weight":0,"kubeService":{}},{"weight":0},{"weight":0,"virtualDestination":{"subset":{"v":"2"}}}]}}}`, []string{
			"spec.policy.trafficShift.destinations[0].kubeService.name: is required",
			"spec.policy.trafficShift.destinations[1]: one of kubeService or virtualDestination is required",
			"spec.policy.trafficShift.destinations[2].virtualDestination.name: is required",
			"spec.policy.trafficShift.destinations[2].virtualDestination.subset: subsets of VirtualDestinations are not supported: their endpoints are services and gateways, not pods",
			"spec.policy.trafficShift.destinations: weights must not all be zero: with several destinations, the weights say how the traffic is split",
		}},
		{"a lone destination needs no weight", `{"policy":{"trafficShift":{"destinations":[{"kubeService":{"name":"reviews"}}]}}}`, nil},
		{"empty shift, fault without type, mirror without target", `{"policy":{"trafficShift":{},"faultInjection":{},"mirror":{}}}`, []string{
			"spec.policy.faultInjection: one of fixedDelay or abort is required",
			"spec.policy.mirror.kubeService: is required",
			"spec.policy.trafficShift.destinations: must not be empty",
		}},
		{"refs need names", `{"destinationSelector":[{"kubeServiceRefs":{"services":[{"namespace":"a"}]}}]}`, []string{
			"spec.destinationSelector[0].kubeServiceRefs.services[0].name: is required",
		}},
		{"abort status", `{"policy":{"faultInjection":{"abort":{"httpStatus":99}}}}`, []string{
			"spec.policy.faultInjection.abort.httpStatus: must be between 200 and 599",
		}},
		// Envoy counts requests per million (found by internal/istioloop).
		{"shares under Envoy's precision", `{"policy":{"faultInjection":{"fixedDelay":"1s","percentage":0.00001},"mirror":{"kubeService":{"name":"m"},"percentage":0.0001}}}`, []string{
			"spec.policy.faultInjection.percentage: must be 0 or at least 0.0001: Envoy counts requests per million, and a smaller share is none",
		}},
		// What Istio's validation refuses in the VirtualService and
		// DestinationRule these fields go into (tools/istiovalidate).
		{"durations in Istio's precision", `{"policy":{"requestTimeout":"1.0005s","retries":{"attempts":2,"perTryTimeout":"0.0015s"},"faultInjection":{"fixedDelay":"1.0001s","percentage":1},
			"corsPolicy":{"maxAge":"1.5s"},"outlierDetection":{"interval":"2.0000001s","baseEjectionTime":"30.001s"}}}`, []string{
			"spec.policy.requestTimeout: 1.0005s is not a whole number of milliseconds, Istio's precision",
			"spec.policy.retries.perTryTimeout: 1.5ms is not a whole number of milliseconds, Istio's precision",
			"spec.policy.faultInjection.fixedDelay: 1.0001s is not a whole number of milliseconds, Istio's precision",
			"spec.policy.corsPolicy.maxAge: 1.5s is not a whole number of seconds, the precision of CORS max-age",
			"spec.policy.outlierDetection.interval: 2.0000001s is not a whole number of milliseconds, Istio's precision",
		}},
		{"retry conditions", `{"policy":{"retries":{"attempts":0,"retryOn":"5XX,reset, connect-failure,599,429"}}}`, []string{
			"spec.policy.retries.attempts: is 0, which turns retries off, but perTryTimeout or retryOn is set: set attempts, or leave them out",
			`spec.policy.retries.retryOn: "5XX" is not a retry condition: use Envoy's (5xx, gateway-error, reset, connect-failure, retriable-4xx, refused-stream, retriable-status-codes, ...) or HTTP status codes, separated by commas without spaces`,
			`spec.policy.retries.retryOn: " connect-failure" is not a retry condition: use Envoy's (5xx, gateway-error, reset, connect-failure, retriable-4xx, refused-stream, retriable-status-codes, ...) or HTTP status codes, separated by commas without spaces`,
			`spec.policy.retries.retryOn: "599" is not a retry condition: use Envoy's (5xx, gateway-error, reset, connect-failure, retriable-4xx, refused-stream, retriable-status-codes, ...) or HTTP status codes, separated by commas without spaces`,
		}},
		{"CORS", `{"policy":{"corsPolicy":{"allowOrigins":[{"exact":""},{"prefix":""},{"regex":""},{"exact":"https://a.example"}],"allowMethods":["GET","*","get"],
			"allowHeaders":["x-a","*","x y"],"exposeHeaders":["a:b"]}}}`, []string{
			"spec.policy.corsPolicy.allowOrigins[0].exact: must not be empty",
			"spec.policy.corsPolicy.allowOrigins[1].prefix: must not be empty",
			"spec.policy.corsPolicy.allowOrigins[2].regex: an empty regex is not allowed (Istio refuses it)",
			`spec.policy.corsPolicy.allowMethods[2]: "get" is not an HTTP method (upper case) or *`,
			`spec.policy.corsPolicy.allowHeaders[2]: "x y" is not an HTTP header name or *`,
			`spec.policy.corsPolicy.exposeHeaders[0]: "a:b" is not an HTTP header name or *`,
		}},
		{"header names and values", `{"policy":{"headerManipulation":{
			"appendRequestHeaders":{":authority":"a.example","host":"b.example",":path":"/x","x y":"1","x-ok":"100%% %HOSTNAME% %REQ(x-request-id)% %START_TIME(%s)%","x-pct":"100%","x-ctl":"a\u0001b","x-var":"%REQ()%"},
			"removeRequestHeaders":["Host",":method","x-gone"],"appendResponseHeaders":{"host":"x"},"removeResponseHeaders":[":status"]}}}`, []string{
			`spec.policy.headerManipulation.removeResponseHeaders[0]: ":status" cannot be changed here: Istio refuses pseudo-headers and Host`,
			`spec.policy.headerManipulation.removeRequestHeaders[0]: "Host" cannot be changed here: Istio refuses pseudo-headers and Host`,
			`spec.policy.headerManipulation.removeRequestHeaders[1]: ":method" cannot be changed here: Istio refuses pseudo-headers and Host`,
			`spec.policy.headerManipulation.appendResponseHeaders: "host" cannot be changed here: Istio refuses pseudo-headers and Host`,
			`spec.policy.headerManipulation.appendRequestHeaders: ":path" cannot be changed here: Istio refuses pseudo-headers and Host`,
			`spec.policy.headerManipulation.appendRequestHeaders: "x y" is not an HTTP header name`,
			`spec.policy.headerManipulation.appendRequestHeaders["x-ctl"]: "a\x01b" has a control character`,
			`spec.policy.headerManipulation.appendRequestHeaders["x-pct"]: "100%" has a % that is neither escaped as %% nor part of an Envoy variable such as %HOSTNAME%`,
			`spec.policy.headerManipulation.appendRequestHeaders["x-var"]: "%REQ()%" has a % that is neither escaped as %% nor part of an Envoy variable such as %HOSTNAME%`,
		}},
		{"matched headers and regexes", `{"httpRequestMatchers":[{"regex":"/` + strings.Repeat("a", 1024) + `","headers":[{"name":":authority","value":"a"},{"name":"x y","value":"1"},{"name":"x-r","regex":true}],
			"queryParameters":[{"name":"q","regex":true}]}]}`, []string{
			"spec.httpRequestMatchers[0].regex: the regex is 1025 characters long; Istio takes at most 1024",
			`spec.httpRequestMatchers[0].headers[1].name: "x y" is not an HTTP header name`,
			"spec.httpRequestMatchers[0].headers[2].value: an empty regex is not allowed (Istio refuses it)",
			"spec.httpRequestMatchers[0].queryParameters[0].value: an empty regex is not allowed (Istio refuses it)",
		}},
		{"sources", `{"sourceSelector":[{"kubeWorkloadMatcher":{"labels":{"app":"a","example.com/tier":"web","bad key":"x","":"y","v":"v 2"},"namespaces":["shop","","Bad_NS"]}}]}`, []string{
			`spec.sourceSelector[0].kubeWorkloadMatcher.labels: "" is not a Kubernetes label key`,
			`spec.sourceSelector[0].kubeWorkloadMatcher.labels: "bad key" is not a Kubernetes label key`,
			`spec.sourceSelector[0].kubeWorkloadMatcher.labels: the value "v 2" of "v" is not a Kubernetes label value`,
			`spec.sourceSelector[0].kubeWorkloadMatcher.namespaces[1]: "" is not a namespace name`,
			`spec.sourceSelector[0].kubeWorkloadMatcher.namespaces[2]: "Bad_NS" is not a namespace name`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &networkingv1.TrafficPolicySpec{}
			if err := protojson.Unmarshal([]byte(tc.spec), spec); err != nil {
				t.Fatal(err)
			}
			if got := domain.ValidateTrafficPolicy(spec); !slices.Equal(got, tc.want) {
				t.Errorf("errors:\n%q\nwant:\n%q", got, tc.want)
			}
		})
	}
}

// An invalid duration (which protojson cannot even parse, but the wire
// format can carry) is reported in our own words, so that the status, part
// of the output's content hash, is the same whatever build of protobuf runs.
func TestValidateInvalidDuration(t *testing.T) {
	spec := &networkingv1.TrafficPolicySpec{Policy: &networkingv1.TrafficPolicySpec_Policy{
		RequestTimeout: &durationpb.Duration{Seconds: 1, Nanos: -1},
	}}
	want := []string{"spec.policy.requestTimeout: invalid duration (seconds 1, nanos -1): seconds must be within ±315576000000, nanos within ±999999999, with the same sign"}
	if got := domain.ValidateTrafficPolicy(spec); !slices.Equal(got, want) {
		t.Errorf("errors:\n%q\nwant:\n%q", got, want)
	}
}

func TestValidateAccessPolicy(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       []string
	}{
		{"empty policy is valid", `{}`, nil},
		{"a full valid policy", `{"sourceSelector":[{"kubeServiceAccountRefs":{"serviceAccounts":[{"name":"a"}]}},{"kubeIdentityMatcher":{"namespaces":["x"]}},{}],
			"allowedPaths":["/api/*","*/healthz","/exact","*"],"allowedMethods":["GET","PATCH"],"allowedPorts":[1,65535]}`, nil},
		{"operations", `{"allowedPaths":["","/a/*/b","**","/a/{b}/c"],"allowedMethods":["get","FETCH"],"allowedPorts":[0,65536]}`, []string{
			"spec.allowedPaths[0]: must not be empty",
			`spec.allowedPaths[1]: "/a/*/b": a wildcard (*) is only allowed at the start or the end of a path`,
			`spec.allowedPaths[2]: "**": a wildcard (*) is only allowed at the start or the end of a path`,
			`spec.allowedPaths[3]: "/a/{b}/c": braces are not allowed (Istio reads them as a path template)`,
			`spec.allowedMethods[0]: "get" is not an HTTP method`,
			`spec.allowedMethods[1]: "FETCH" is not an HTTP method`,
			"spec.allowedPorts[0]: must be between 1 and 65535, not 0",
			"spec.allowedPorts[1]: must be between 1 and 65535, not 65536",
		}},
		{"identities", `{"sourceSelector":[{"kubeServiceAccountRefs":{}},{"kubeServiceAccountRefs":{"serviceAccounts":[{"namespace":"a"}]}},{"kubeIdentityMatcher":{"namespaces":["ok",""]}}],
			"destinationSelector":[{"kubeServiceRefs":{"services":[{}]}}]}`, []string{
			"spec.sourceSelector[0].kubeServiceAccountRefs.serviceAccounts: must not be empty",
			"spec.sourceSelector[1].kubeServiceAccountRefs.serviceAccounts[0].name: is required",
			`spec.sourceSelector[2].kubeIdentityMatcher.namespaces[1]: "" is not a namespace name`,
			"spec.destinationSelector[0].kubeServiceRefs.services[0].name: is required",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &networkingv1.AccessPolicySpec{}
			if err := protojson.Unmarshal([]byte(tc.spec), spec); err != nil {
				t.Fatal(err)
			}
			if got := domain.ValidateAccessPolicy(spec); !slices.Equal(got, tc.want) {
				t.Errorf("errors:\n%q\nwant:\n%q", got, tc.want)
			}
		})
	}
}

func TestValidateVirtualMesh(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       []string
	}{
		{"a full valid VirtualMesh", `{"meshes":[{"name":"a","namespace":"istio-system"},{"name":"b","namespace":"istio-system"}],
			"mtlsConfig":{"shared":{"rootCertificateAuthority":{"generated":{"ttl":"31536000s"}},"intermediateTtl":"2592000s"}},
			"federation":{"hostnameSuffix":"mesh.example","selective":{"selectors":[{"meshes":[{"name":"b","namespace":"istio-system"}]}]}},
			"globalAccessPolicy":"ENABLED"}`, nil},
		{"no meshes", `{}`, []string{"spec.meshes: must not be empty"}},
		{"mesh refs", `{"meshes":[{"name":"a"},{"namespace":"n"},{"name":"a"}]}`, []string{
			"spec.meshes[0].namespace: is required",
			"spec.meshes[1].name: is required",
			"spec.meshes[2].namespace: is required",
			"spec.meshes[2]: mesh a. is already listed at spec.meshes[0]",
		}},
		{"federation and mTLS", `{"meshes":[{"name":"a","namespace":"n"}],
			"mtlsConfig":{"shared":{"rootCertificateAuthority":{"secret":{}},"intermediateTtl":"0s"}},
			"federation":{"hostnameSuffix":"-bad-","selective":{"selectors":[{"meshes":[{"name":"z","namespace":"n"}],"destinationSelectors":[{"kubeServiceRefs":{"services":[{}]}}]}]}}}`, []string{
			"spec.mtlsConfig.shared.intermediateTtl: must be positive",
			"spec.mtlsConfig.shared.rootCertificateAuthority.secret.name: is required",
			`spec.federation.hostnameSuffix: "-bad-" is not a DNS name`,
			"spec.federation.selective.selectors[0].destinationSelectors[0].kubeServiceRefs.services[0].name: is required",
			"spec.federation.selective.selectors[0].meshes[0]: mesh z.n is not a mesh of this VirtualMesh",
		}},
		{"federation without a mode", `{"meshes":[{"name":"a","namespace":"n"}],"federation":{"hostnameSuffix":"mesh"}}`, []string{
			"spec.federation.mode: one of permissive or selective is required; a federation without a mode would federate nothing (leave spec.federation out for no federation)",
		}},
		{"permissive federation", `{"meshes":[{"name":"a","namespace":"n"}],"federation":{"permissive":{}}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &networkingv1.VirtualMeshSpec{}
			if err := protojson.Unmarshal([]byte(tc.spec), spec); err != nil {
				t.Fatal(err)
			}
			if got := domain.ValidateVirtualMesh(spec); !slices.Equal(got, tc.want) {
				t.Errorf("errors:\n%q\nwant:\n%q", got, tc.want)
			}
		})
	}
}

func TestValidateVirtualDestination(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       []string
	}{
		{"static", `{"hostname":"reviews.global","port":{"number":9080,"protocol":"http"},"virtualMesh":{"name":"vm"},
			"static":{"destinations":[{"kubeService":{"name":"reviews","cluster":"east"}}]}}`, nil},
		{"localized", `{"hostname":"reviews.global","port":{"number":9080,"protocol":"grpc","targetNumber":8080},"meshList":{"meshes":[{"name":"m","namespace":"istio-system"}]},
			"localized":{"destinationSelectors":[{}],"failoverDirectives":[{"from":{"region":"us-east"},"to":[{"region":"us-west"}]}],"outlierDetection":{"consecutiveErrors":3}}}`, nil},
		{"empty", `{}`, []string{
			"spec.hostname: is required",
			"spec.port: is required",
			"spec: one of virtualMesh or meshList is required",
			"spec: one of static or localized is required",
		}},
		{"bad fields", `{"hostname":"*.global","port":{"number":70000,"protocol":"udp","targetName":""},"meshList":{},
			"static":{"destinations":[{},{"kubeService":{}}]}}`, []string{
			`spec.hostname: "*.global" is not a DNS name (lower case, no wildcard)`,
			"spec.port.number: must be between 1 and 65535",
			`spec.port.protocol: "udp" is not one of http, http2, grpc, tcp, tls`,
			"spec.port.targetName: must not be empty",
			"spec.meshList.meshes: must not be empty",
			"spec.static.destinations[0].kubeService: is required",
			"spec.static.destinations[1].kubeService.name: is required",
		}},
		{"failover directives", `{"hostname":"r.global","port":{"number":80,"protocol":"http"},"virtualMesh":{"name":"vm"},
			"localized":{"destinationSelectors":[{}],"failoverDirectives":[
				{"from":{"region":"a","zone":"a1"},"to":[{"region":"b"},{"region":"c"}]},
				{"from":{"region":"a"},"to":[{"region":"a"}]},
				{"from":{},"to":[]}],
				"outlierDetection":{"interval":"0s","baseEjectionTime":"1.0005s","maxEjectionPercent":101}}}`, []string{
			"spec.localized.failoverDirectives[0].from: zone and subZone cannot be named: Istio fails over between regions, and prefers the nearest zone by itself",
			"spec.localized.failoverDirectives[0].to: must name exactly one locality: Istio fails a region over to one region, then to all others alike",
			`spec.localized.failoverDirectives[1].from.region: region "a" already has a directive at spec.localized.failoverDirectives[0]`,
			"spec.localized.failoverDirectives[1].to[0].region: must differ from the from region",
			"spec.localized.failoverDirectives[2].from.region: is required",
			"spec.localized.failoverDirectives[2].to: must name exactly one locality: Istio fails a region over to one region, then to all others alike",
			"spec.localized.outlierDetection.interval: must be positive",
			"spec.localized.outlierDetection.baseEjectionTime: 1.0005s is not a whole number of milliseconds, Istio's precision",
			"spec.localized.outlierDetection.maxEjectionPercent: must be between 0 and 100",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &networkingv1.VirtualDestinationSpec{}
			if err := protojson.Unmarshal([]byte(tc.spec), spec); err != nil {
				t.Fatal(err)
			}
			if got := domain.ValidateVirtualDestination(spec); !slices.Equal(got, tc.want) {
				t.Errorf("errors:\n%q\nwant:\n%q", got, tc.want)
			}
		})
	}
}
