package domain_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	multiclusterv1 "github.com/meshplane/meshplane/libs/gen/meshplane/multicluster/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	extensionsv1alpha1 "istio.io/api/extensions/v1alpha1"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
	securityv1beta1 "istio.io/api/security/v1beta1"
)

// bytesSource hands out values drawn from fuzz input; once the input runs
// out every value is zero, so any input builds some policy.
type bytesSource struct{ b []byte }

func (s *bytesSource) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	v := s.b[0]
	s.b = s.b[1:]
	return v
}

func (s *bytesSource) bool() bool  { return s.byte()&1 == 1 }
func (s *bytesSource) n(n int) int { return int(s.byte()) % n }
func (s *bytesSource) pick(xs ...string) string {
	return xs[s.n(len(xs))]
}

func (s *bytesSource) labels() map[string]string {
	m := map[string]string{}
	for range s.n(3) {
		m[s.pick("app", "version", "tier", "")] = s.pick("reviews", "ratings", "v1", "v2", "v9", "backend", "")
	}
	return m
}

func (s *bytesSource) strings(xs ...string) []string {
	var out []string
	for range s.n(3) {
		out = append(out, s.pick(xs...))
	}
	return out
}

func (s *bytesSource) duration() *durationpb.Duration {
	switch s.n(4) {
	case 0:
		return nil
	case 1:
		return &durationpb.Duration{Seconds: int64(int8(s.byte()))}
	case 2:
		return &durationpb.Duration{Nanos: int32(s.byte()) * 1e6}
	default:
		return &durationpb.Duration{Seconds: 1, Nanos: -1} // invalid
	}
}

func (s *bytesSource) percentage() float64 {
	return float64(int8(s.byte())) * 1.5
}

var fuzzPaths = []string{"/", "/a", "/a/b", "/api/v1", "(", "/a/[0-9]+", "", ".*", "/x\\"}

func (s *bytesSource) trafficPolicySpec() *networkingv1.TrafficPolicySpec {
	spec := &networkingv1.TrafficPolicySpec{}
	for range s.n(3) {
		spec.SourceSelector = append(spec.SourceSelector, &networkingv1.WorkloadSelector{Type: &networkingv1.WorkloadSelector_KubeWorkloadMatcher_{
			KubeWorkloadMatcher: &networkingv1.WorkloadSelector_KubeWorkloadMatcher{
				Labels: s.labels(), Namespaces: s.strings("default", "shop", ""), Clusters: s.strings("east", "west", "north"),
			},
		}})
	}
	for range s.n(3) {
		if s.bool() {
			var refs []*commonv1.ClusterObjectRef
			for range s.n(3) {
				refs = append(refs, &commonv1.ClusterObjectRef{Name: s.pick("reviews", "ratings", "nosuch", ""), Namespace: s.pick("", "default", "shop"), Cluster: s.pick("", "east", "west")})
			}
			spec.DestinationSelector = append(spec.DestinationSelector, &networkingv1.DestinationSelector{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
				KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: refs},
			}})
		} else {
			spec.DestinationSelector = append(spec.DestinationSelector, &networkingv1.DestinationSelector{Type: &networkingv1.DestinationSelector_KubeServiceMatcher_{
				KubeServiceMatcher: &networkingv1.DestinationSelector_KubeServiceMatcher{
					Labels: s.labels(), Namespaces: s.strings("default", "shop"), Clusters: s.strings("east", "west"),
				},
			}})
		}
	}
	for range s.n(4) {
		m := &networkingv1.TrafficPolicySpec_HttpMatcher{Method: s.pick("", "GET", "POST", "get")}
		switch s.n(4) {
		case 1:
			m.PathSpecifier = &networkingv1.TrafficPolicySpec_HttpMatcher_Prefix{Prefix: s.pick(fuzzPaths...)}
		case 2:
			m.PathSpecifier = &networkingv1.TrafficPolicySpec_HttpMatcher_Exact{Exact: s.pick(fuzzPaths...)}
		case 3:
			m.PathSpecifier = &networkingv1.TrafficPolicySpec_HttpMatcher_Regex{Regex: s.pick(fuzzPaths...)}
		}
		for range s.n(3) {
			m.Headers = append(m.Headers, &networkingv1.TrafficPolicySpec_HeaderMatcher{
				Name: s.pick("x-a", "x-b", ""), Value: s.pick("", "1", "(", "[a-z]+"), Regex: s.bool(), InvertMatch: s.bool(),
			})
		}
		for range s.n(2) {
			m.QueryParameters = append(m.QueryParameters, &networkingv1.TrafficPolicySpec_QueryParameterMatcher{
				Name: s.pick("q", "v", ""), Value: s.pick("1", "(", ""), Regex: s.bool(),
			})
		}
		spec.HttpRequestMatchers = append(spec.HttpRequestMatchers, m)
	}
	p := &networkingv1.TrafficPolicySpec_Policy{}
	spec.Policy = p
	p.RequestTimeout = s.duration()
	if s.bool() {
		p.Retries = &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: int32(int8(s.byte())), PerTryTimeout: s.duration(), RetryOn: s.pick("", "5xx")}
	}
	if s.bool() {
		f := &networkingv1.TrafficPolicySpec_Policy_FaultInjection{Percentage: s.percentage()}
		switch s.n(3) {
		case 1:
			f.FaultInjectionType = &networkingv1.TrafficPolicySpec_Policy_FaultInjection_FixedDelay{FixedDelay: s.duration()}
		case 2:
			f.FaultInjectionType = &networkingv1.TrafficPolicySpec_Policy_FaultInjection_Abort_{Abort: &networkingv1.TrafficPolicySpec_Policy_FaultInjection_Abort{HttpStatus: int32(s.byte()) * 3}}
		}
		p.FaultInjection = f
	}
	if s.bool() {
		p.CorsPolicy = &networkingv1.TrafficPolicySpec_Policy_CorsPolicy{
			AllowOrigins: []*networkingv1.TrafficPolicySpec_Policy_CorsPolicy_StringMatch{{MatchType: &networkingv1.TrafficPolicySpec_Policy_CorsPolicy_StringMatch_Regex{Regex: s.pick(fuzzPaths...)}}},
			AllowMethods: s.strings("GET", "POST"), MaxAge: s.duration(),
		}
	}
	if s.bool() {
		p.Mirror = &networkingv1.TrafficPolicySpec_Policy_Mirror{
			DestinationType: &networkingv1.TrafficPolicySpec_Policy_Mirror_KubeService{KubeService: &commonv1.ClusterObjectRef{Name: s.pick("ratings", "nosuch", ""), Cluster: s.pick("", "west")}},
			Percentage:      s.percentage(), Port: uint32(s.n(3)) * 9080,
		}
	}
	if s.bool() {
		p.HeaderManipulation = &networkingv1.TrafficPolicySpec_Policy_HeaderManipulation{
			RemoveRequestHeaders: s.strings("x-a", ""), AppendResponseHeaders: s.labels(),
		}
	}
	if s.bool() {
		ts := &networkingv1.TrafficPolicySpec_Policy_MultiDestination{}
		for range s.n(4) {
			ts.Destinations = append(ts.Destinations, &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination{
				Weight: uint32(s.byte()) % 4 * 25,
				DestinationType: &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_KubeService{
					KubeService: &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_KubeDestination{
						//lint:ignore SA1019 the deprecated clusterName is still accepted for one release
						Name: s.pick("reviews", "ratings", "nosuch"), ClusterName: s.pick("", "", "west"), Subset: s.labels(), Port: uint32(s.n(2)) * 9080,
					},
				},
			})
		}
		p.TrafficShift = ts
	}
	if s.bool() {
		p.OutlierDetection = &networkingv1.OutlierDetection{ConsecutiveErrors: uint32(s.n(8)), Interval: s.duration(), MaxEjectionPercent: uint32(s.byte())}
	}
	if s.bool() {
		p.Mtls = &networkingv1.TrafficPolicySpec_Policy_MTLS{Istio: &networkingv1.TrafficPolicySpec_Policy_MTLS_Istio{
			TlsMode: networkingv1.TrafficPolicySpec_Policy_MTLS_Istio_TLSmode(s.n(5)),
		}}
	}
	return spec
}

func fuzzWorkload(cluster, name string, labels map[string]string) *discoveryv1.Workload {
	return &discoveryv1.Workload{
		Metadata: &commonv1.ObjectMeta{Name: name, Namespace: "default", Cluster: cluster},
		Spec: &discoveryv1.WorkloadSpec{Type: &discoveryv1.WorkloadSpec_Kubernetes_{Kubernetes: &discoveryv1.WorkloadSpec_Kubernetes{
			PodLabels: labels, ServiceAccountName: labels["app"],
		}}},
	}
}

func fuzzDestination(cluster, name string) *discoveryv1.Destination {
	return &discoveryv1.Destination{
		Metadata: &commonv1.ObjectMeta{Name: name + "-default-" + cluster, Namespace: "default", Cluster: cluster},
		Spec: &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
			Ref:                    &commonv1.ClusterObjectRef{Name: name, Namespace: "default", Cluster: cluster},
			WorkloadSelectorLabels: map[string]string{"app": name},
			Labels:                 map[string]string{"app": name},
			Ports:                  []*discoveryv1.DestinationSpec_KubeService_KubeServicePort{{Port: 9080, Name: "http"}},
		}}},
	}
}

// fuzzEstate is a fixed estate of two clusters plus the policies built from
// data, all applied in east.
func fuzzEstate(data []byte) map[string]*snapshotv1.InputSnapshot {
	s := &bytesSource{b: data}
	inputs := map[string]*snapshotv1.InputSnapshot{}
	for _, c := range []string{"east", "west"} {
		in := &snapshotv1.InputSnapshot{Cluster: c}
		for _, name := range []string{"reviews", "ratings"} {
			in.Destinations = append(in.Destinations, fuzzDestination(c, name))
			for _, v := range []string{"v1", "v2"} {
				in.Workloads = append(in.Workloads, fuzzWorkload(c, name+"-"+v, map[string]string{"app": name, "version": v}))
			}
		}
		inputs[c] = in
	}
	for _, c := range []string{"east", "west"} {
		inputs[c].Meshes = append(inputs[c].Meshes, fuzzMesh(c, s.pick("cluster.local", c+".local")))
	}
	if s.bool() {
		inputs["east"].VirtualMeshes = append(inputs["east"].VirtualMeshes, s.virtualMesh("vm-a", 0))
	}
	if s.bool() {
		inputs["east"].VirtualMeshes = append(inputs["east"].VirtualMeshes, s.virtualMesh("vm-b", 1))
	}
	for i := range s.n(4) {
		in := inputs[s.pick("east", "west")]
		in.AccessPolicies = append(in.AccessPolicies, &networkingv1.AccessPolicy{
			Metadata: &commonv1.ObjectMeta{
				Name: fmt.Sprintf("a%d", i), Namespace: "default", Generation: int64(s.byte()),
				CreationTimestamp: &timestamppb.Timestamp{Seconds: int64(s.n(3))},
			},
			Spec: s.accessPolicySpec(),
		})
	}
	for i := range 1 + s.n(4) {
		inputs["east"].TrafficPolicies = append(inputs["east"].TrafficPolicies, &networkingv1.TrafficPolicy{
			Metadata: &commonv1.ObjectMeta{
				Name: fmt.Sprintf("p%d", i), Namespace: "default", Cluster: "east", Generation: int64(s.byte()),
				CreationTimestamp: &timestamppb.Timestamp{Seconds: int64(s.n(3))},
			},
			Spec: s.trafficPolicySpec(),
		})
	}
	// VirtualDestinations, a traffic shift to one, Settings and users' own
	// Istio objects are drawn from the input read backwards: the policies
	// above use up most inputs, and older seeds keep their meaning.
	back := slices.Clone(data)
	slices.Reverse(back)
	s = &bytesSource{b: back}
	for i := range s.n(3) {
		inputs["east"].VirtualDestinations = append(inputs["east"].VirtualDestinations, s.virtualDestination(fmt.Sprintf("vd%d", i)))
	}
	if s.bool() {
		inputs["east"].TrafficPolicies = append(inputs["east"].TrafficPolicies, &networkingv1.TrafficPolicy{
			Metadata: &commonv1.ObjectMeta{Name: "pvd", Namespace: "default", Generation: 1, CreationTimestamp: &timestamppb.Timestamp{Seconds: int64(s.n(3))}},
			Spec: &networkingv1.TrafficPolicySpec{Policy: &networkingv1.TrafficPolicySpec_Policy{TrafficShift: &networkingv1.TrafficPolicySpec_Policy_MultiDestination{
				Destinations: []*networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination{{
					Weight: uint32(s.n(3)),
					DestinationType: &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_VirtualDestination{
						VirtualDestination: &networkingv1.TrafficPolicySpec_Policy_MultiDestination_WeightedDestination_VirtualDestinationRef{Name: s.pick("vd0", "vd1", "nosuch"), Namespace: "meshplane"},
					},
				}},
			}}},
		})
	}
	if s.bool() {
		inputs[s.pick("east", "west")].Settings = append(inputs["east"].Settings, &settingsv1.Settings{
			Metadata: &commonv1.ObjectMeta{Name: s.pick("settings", "other"), Namespace: "meshplane", Generation: 2},
			Spec: &settingsv1.SettingsSpec{
				Mtls:                   &networkingv1.TrafficPolicySpec_Policy_MTLS{Istio: &networkingv1.TrafficPolicySpec_Policy_MTLS_Istio{TlsMode: networkingv1.TrafficPolicySpec_Policy_MTLS_Istio_TLSmode(s.n(5))}},
				UserConfigConflictMode: settingsv1.SettingsSpec_UserConfigConflictMode(s.n(3)),
			},
		})
	}
	for i := range s.n(4) {
		in := inputs[s.pick("east", "west")]
		o := &snapshotv1.UserIstioObject{Kind: s.pick("VirtualService", "DestinationRule", "Gateway"), Namespace: s.pick("default", "other"), Name: fmt.Sprintf("user%d", i)}
		o.Hosts = []string{s.pick("reviews", "ratings.default.svc.cluster.local", "*", "*.default.svc.cluster.local", "")}
		switch s.n(3) {
		case 1:
			o.ExportTo = []string{"~"}
		case 2:
			o.ExportTo = []string{"."}
		}
		in.UserIstioObjects = append(in.UserIstioObjects, o)
	}
	// WasmDeploymentPolicies and AccessLogPolicies come last, for the same
	// reason.
	for i := range s.n(3) {
		inputs[s.pick("east", "west")].WasmDeploymentPolicies = append(inputs["east"].WasmDeploymentPolicies, s.wasmPolicy(fmt.Sprintf("w%d", i)))
	}
	for i := range s.n(3) {
		inputs[s.pick("east", "west")].AccessLogPolicies = append(inputs["west"].AccessLogPolicies, s.accessLogPolicy(fmt.Sprintf("l%d", i)))
	}
	// Last, some resources did not decode: they come with their metadata,
	// an empty spec and the decode error, as the agent sends them.
	for _, c := range []string{"east", "west"} {
		in := inputs[c].ProtoReflect()
		for _, f := range userResourceFields {
			list := in.Get(in.Descriptor().Fields().ByName(f)).List()
			for i := range list.Len() {
				if s.n(8) != 7 {
					continue
				}
				res := list.Get(i).Message()
				res.Set(res.Descriptor().Fields().ByName("spec"), protoreflect.ValueOfMessage(res.Get(res.Descriptor().Fields().ByName("spec")).Message().New()))
				md := res.Interface().(userResource).GetMetadata()
				if md == nil {
					md = &commonv1.ObjectMeta{}
					res.Set(res.Descriptor().Fields().ByName("metadata"), protoreflect.ValueOfMessage(md.ProtoReflect()))
				}
				md.DecodeError = "spec.policy.requestTimeout: does not decode (fuzz)"
			}
		}
	}
	// Most estates grant the workload clusters every cluster, so that
	// VirtualMeshes and policies across clusters are translated; the rest
	// check the default scope.
	if s.n(4) != 3 {
		inputs["meshplane"] = &snapshotv1.InputSnapshot{Cluster: "meshplane", ScopeGrants: []*multiclusterv1.ScopeGrant{{
			Metadata: &commonv1.ObjectMeta{Name: "fuzz", Namespace: "meshplane", Generation: 1},
			Spec:     &multiclusterv1.ScopeGrantSpec{Clusters: []string{"east", "west"}, Targets: []*multiclusterv1.ScopeGrantSpec_Target{{}}},
		}}}
	}
	for _, in := range inputs {
		snapshots.SealInput(in)
	}
	return inputs
}

func (s *bytesSource) workloadSelectors() []*networkingv1.WorkloadSelector {
	var out []*networkingv1.WorkloadSelector
	for range s.n(3) {
		out = append(out, &networkingv1.WorkloadSelector{Type: &networkingv1.WorkloadSelector_KubeWorkloadMatcher_{KubeWorkloadMatcher: &networkingv1.WorkloadSelector_KubeWorkloadMatcher{
			Labels: s.labels(), Namespaces: s.strings("default", "other"), Clusters: s.strings("east", "west", "nowhere"),
		}}})
	}
	return out
}

func (s *bytesSource) wasmPolicy(name string) *networkingv1.WasmDeploymentPolicy {
	spec := &networkingv1.WasmDeploymentPolicySpec{WorkloadSelectors: s.workloadSelectors()}
	for range s.n(4) {
		f := &networkingv1.WasmDeploymentPolicySpec_WasmFilter{
			Name:     s.pick("auth", "stats", "Bad_Name", ""),
			RootId:   s.pick("", "root", "has space"),
			Phase:    networkingv1.WasmDeploymentPolicySpec_WasmFilter_Phase(s.n(5)),
			Priority: int32(s.n(3)) - 1,
		}
		switch s.n(3) {
		case 0:
			f.Source = &networkingv1.WasmDeploymentPolicySpec_WasmFilter_Http{Http: &networkingv1.WasmDeploymentPolicySpec_WasmFilter_HttpSource{
				Url:    s.pick("https://example.com/f.wasm", "ftp://example.com/f.wasm", "http://", ""),
				Sha256: s.pick("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "abc", ""),
			}}
		case 1:
			f.Source = &networkingv1.WasmDeploymentPolicySpec_WasmFilter_OciImage{OciImage: s.pick("ghcr.io/example/f:1.0", "oci://ghcr.io/x/y", "no spaces please", "")}
		}
		spec.Filters = append(spec.Filters, f)
	}
	return &networkingv1.WasmDeploymentPolicy{
		Metadata: &commonv1.ObjectMeta{Name: name, Namespace: s.pick("default", "other"), Generation: int64(s.byte())},
		Spec:     spec,
	}
}

func (s *bytesSource) accessLogPolicy(name string) *observabilityv1.AccessLogPolicy {
	spec := &observabilityv1.AccessLogPolicySpec{
		WorkloadSelectors:      s.workloadSelectors(),
		IncludedRequestHeaders: s.strings("x-request-id", "bad header", ""),
	}
	for range s.n(3) {
		f := &observabilityv1.AccessLogPolicySpec_Filter{}
		switch s.n(4) {
		case 0:
			f.Type = &observabilityv1.AccessLogPolicySpec_Filter_StatusCodeMatcher{StatusCodeMatcher: &observabilityv1.AccessLogPolicySpec_StatusCodeMatcher{
				Value: uint32(s.pick("500", "0", "404")[0]-'0') * 100, Comparator: observabilityv1.AccessLogPolicySpec_StatusCodeMatcher_Comparator(s.n(4)),
			}}
		case 1:
			f.Type = &observabilityv1.AccessLogPolicySpec_Filter_HeaderMatcher{HeaderMatcher: &networkingv1.TrafficPolicySpec_HeaderMatcher{
				Name: s.pick("x-debug", ""), Value: s.pick("1", "(", ".*"), Regex: s.bool(),
			}}
		case 2:
			f.Type = &observabilityv1.AccessLogPolicySpec_Filter_PathPrefix{PathPrefix: s.pick("/api", "api", "")}
		}
		spec.Filters = append(spec.Filters, f)
	}
	return &observabilityv1.AccessLogPolicy{
		Metadata: &commonv1.ObjectMeta{Name: name, Namespace: s.pick("default", "ops"), Generation: int64(s.byte())},
		Spec:     spec,
	}
}

func (s *bytesSource) virtualDestination(name string) *networkingv1.VirtualDestination {
	spec := &networkingv1.VirtualDestinationSpec{
		Hostname: s.pick("reviews.global", "ratings.global", "Bad_Host", ""),
		Port:     &networkingv1.VirtualDestinationSpec_Port{Number: uint32(s.n(3)) * 9080, Protocol: s.pick("http", "tcp", "")},
	}
	if s.bool() {
		spec.Port.TargetPort = &networkingv1.VirtualDestinationSpec_Port_TargetNumber{TargetNumber: 9080}
	}
	switch s.n(3) {
	case 0:
		spec.ExportTo = &networkingv1.VirtualDestinationSpec_VirtualMesh{VirtualMesh: &commonv1.ObjectRef{Name: s.pick("vm-a", "vm-b"), Namespace: "meshplane"}}
	case 1:
		list := &networkingv1.VirtualDestinationSpec_MeshList{}
		for range 1 + s.n(2) {
			list.Meshes = append(list.Meshes, &commonv1.ObjectRef{Name: "istiod-istio-system-" + s.pick("east", "west", "nosuch"), Namespace: "istio-system"})
		}
		spec.ExportTo = &networkingv1.VirtualDestinationSpec_MeshList_{MeshList: list}
	}
	if s.bool() {
		static := &networkingv1.VirtualDestinationSpec_BackingDestinationList{}
		for range s.n(4) {
			static.Destinations = append(static.Destinations, &networkingv1.VirtualDestinationSpec_BackingDestination{Type: &networkingv1.VirtualDestinationSpec_BackingDestination_KubeService{
				KubeService: &commonv1.ClusterObjectRef{Name: s.pick("reviews", "ratings", "nosuch"), Namespace: "default", Cluster: s.pick("east", "west")},
			}})
		}
		spec.FailoverConfig = &networkingv1.VirtualDestinationSpec_Static{Static: static}
	} else {
		loc := &networkingv1.VirtualDestinationSpec_LocalityConfig{
			DestinationSelectors: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceMatcher_{
				KubeServiceMatcher: &networkingv1.DestinationSelector_KubeServiceMatcher{Labels: s.labels()},
			}}},
		}
		for range s.n(3) {
			loc.FailoverDirectives = append(loc.FailoverDirectives, &networkingv1.VirtualDestinationSpec_LocalityConfig_LocalityFailoverDirective{
				From: &networkingv1.VirtualDestinationSpec_LocalityConfig_Locality{Region: s.pick("us-east", "us-west", "")},
				To:   []*networkingv1.VirtualDestinationSpec_LocalityConfig_Locality{{Region: s.pick("us-east", "us-west"), Zone: s.pick("", "", "a")}},
			})
		}
		if s.bool() {
			loc.OutlierDetection = &networkingv1.OutlierDetection{ConsecutiveErrors: uint32(s.n(4)), Interval: s.duration(), MaxEjectionPercent: uint32(s.byte())}
		}
		spec.FailoverConfig = &networkingv1.VirtualDestinationSpec_Localized{Localized: loc}
	}
	return &networkingv1.VirtualDestination{
		Metadata: &commonv1.ObjectMeta{Name: name, Namespace: "meshplane", Generation: 1, CreationTimestamp: &timestamppb.Timestamp{Seconds: int64(s.n(3))}},
		Spec:     spec,
	}
}

func fuzzMesh(cluster, trustDomain string) *discoveryv1.Mesh {
	gw := func(app string) *discoveryv1.MeshSpec_Gateway {
		return &discoveryv1.MeshSpec_Gateway{
			WorkloadLabels: map[string]string{"istio": app}, ExternalAddress: cluster + ".example.com", ExternalTlsPort: 15443,
			Service: &commonv1.ClusterObjectRef{Name: "istio-" + app, Namespace: "istio-system", Cluster: cluster},
		}
	}
	return &discoveryv1.Mesh{
		Metadata: &commonv1.ObjectMeta{Name: "istiod-istio-system-" + cluster, Namespace: "istio-system", Cluster: cluster},
		Spec: &discoveryv1.MeshSpec{Type: &discoveryv1.MeshSpec_Istio_{Istio: &discoveryv1.MeshSpec_Istio{
			Installation:     &discoveryv1.MeshSpec_Installation{Namespace: "istio-system", Cluster: cluster},
			TrustDomain:      trustDomain,
			IngressGateways:  []*discoveryv1.MeshSpec_Gateway{gw("ingressgateway")},
			EastWestGateways: []*discoveryv1.MeshSpec_Gateway{gw("eastwestgateway")},
		}}},
	}
}

func (s *bytesSource) virtualMesh(name string, created int64) *networkingv1.VirtualMesh {
	spec := &networkingv1.VirtualMeshSpec{GlobalAccessPolicy: networkingv1.VirtualMeshSpec_GlobalAccessPolicy(s.n(3))}
	for range s.n(4) {
		spec.Meshes = append(spec.Meshes, &commonv1.ObjectRef{Name: "istiod-istio-system-" + s.pick("east", "west", "nosuch"), Namespace: s.pick("istio-system", "istio-system", "")})
	}
	switch s.n(3) {
	case 1:
		spec.Federation = &networkingv1.VirtualMeshSpec_Federation{Mode: &networkingv1.VirtualMeshSpec_Federation_Permissive_{Permissive: &networkingv1.VirtualMeshSpec_Federation_Permissive{}}}
	case 2:
		sel := &networkingv1.VirtualMeshSpec_Federation_Selective_Selector{}
		if s.bool() {
			sel.Meshes = []*commonv1.ObjectRef{{Name: "istiod-istio-system-" + s.pick("east", "west"), Namespace: "istio-system"}}
		}
		if s.bool() {
			sel.DestinationSelectors = []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceMatcher_{
				KubeServiceMatcher: &networkingv1.DestinationSelector_KubeServiceMatcher{Labels: s.labels()},
			}}}
		}
		spec.Federation = &networkingv1.VirtualMeshSpec_Federation{
			HostnameSuffix: s.pick("", "mesh.example", "Bad_Suffix"),
			Mode:           &networkingv1.VirtualMeshSpec_Federation_Selective_{Selective: &networkingv1.VirtualMeshSpec_Federation_Selective{Selectors: []*networkingv1.VirtualMeshSpec_Federation_Selective_Selector{sel}}},
		}
	}
	if s.bool() {
		spec.MtlsConfig = &networkingv1.VirtualMeshSpec_MTLSConfig{TrustModel: &networkingv1.VirtualMeshSpec_MTLSConfig_Shared{Shared: &networkingv1.VirtualMeshSpec_MTLSConfig_SharedTrust{}}}
	}
	return &networkingv1.VirtualMesh{
		Metadata: &commonv1.ObjectMeta{Name: name, Namespace: "meshplane", Generation: 1, CreationTimestamp: &timestamppb.Timestamp{Seconds: created}},
		Spec:     spec,
	}
}

func (s *bytesSource) accessPolicySpec() *networkingv1.AccessPolicySpec {
	spec := &networkingv1.AccessPolicySpec{
		AllowedPaths:   s.strings("/a", "/b/*", "*", "", "/x/*/y"),
		AllowedMethods: s.strings("GET", "POST", "get"),
	}
	for range s.n(3) {
		spec.AllowedPorts = append(spec.AllowedPorts, uint32(s.n(3))*9080*uint32(1+s.n(10)))
	}
	for range s.n(3) {
		switch s.n(3) {
		case 0:
			spec.SourceSelector = append(spec.SourceSelector, &networkingv1.IdentitySelector{Type: &networkingv1.IdentitySelector_KubeIdentityMatcher_{
				KubeIdentityMatcher: &networkingv1.IdentitySelector_KubeIdentityMatcher{Namespaces: s.strings("default", "shop"), Clusters: s.strings("east", "west", "north")},
			}})
		case 1:
			var refs []*commonv1.ClusterObjectRef
			for range s.n(3) {
				refs = append(refs, &commonv1.ClusterObjectRef{Name: s.pick("reviews", "ratings", "nosuch", ""), Namespace: s.pick("", "default"), Cluster: s.pick("", "east", "west")})
			}
			spec.SourceSelector = append(spec.SourceSelector, &networkingv1.IdentitySelector{Type: &networkingv1.IdentitySelector_KubeServiceAccountRefs_{
				KubeServiceAccountRefs: &networkingv1.IdentitySelector_KubeServiceAccountRefs{ServiceAccounts: refs},
			}})
		default:
			spec.SourceSelector = append(spec.SourceSelector, &networkingv1.IdentitySelector{})
		}
	}
	for range s.n(2) {
		spec.DestinationSelector = append(spec.DestinationSelector, &networkingv1.DestinationSelector{Type: &networkingv1.DestinationSelector_KubeServiceMatcher_{
			KubeServiceMatcher: &networkingv1.DestinationSelector_KubeServiceMatcher{Labels: s.labels(), Clusters: s.strings("east", "west")},
		}})
	}
	return spec
}

// checkAuthorizationPolicy checks what would make an AuthorizationPolicy
// wider than meant: a rule source or operation with no condition at all,
// which Istio reads as "anything".
func checkAuthorizationPolicy(obj *snapshotv1.Object, ap *securityv1beta1.AuthorizationPolicy) error {
	if obj.GetName() != domain.GlobalAccessPolicyName && len(ap.GetSelector().GetMatchLabels()) == 0 {
		return fmt.Errorf("no workload selector")
	}
	for _, r := range ap.GetRules() {
		for _, f := range r.GetFrom() {
			if len(f.GetSource().GetPrincipals()) == 0 && len(f.GetSource().GetNamespaces()) == 0 {
				return fmt.Errorf("an empty source")
			}
		}
		for _, t := range r.GetTo() {
			op := t.GetOperation()
			if len(op.GetPaths())+len(op.GetMethods())+len(op.GetPorts()) == 0 {
				return fmt.Errorf("an empty operation")
			}
		}
	}
	return nil
}

func fuzzSeeds() [][]byte {
	return [][]byte{
		nil,
		{0},
		{3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20},
		[]byte("retries and a 50/50 traffic shift to subsets v1 and v2, please"),
		{255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255},
		{2, 0, 1, 1, 1, 3, 0, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
		[]byte("\x01\x07\x13\x21\x02\x05\xf0\x33\x44\x01\x09\x88\x77\x66\x55\x44\x33\x22\x11\x00\x01\x02\x03\x05\x08\x0d"),
		// Long enough to reach VirtualDestinations, Settings and user
		// objects.
		// These two reach WasmDeploymentPolicies (with WasmPlugins and
		// ECDS filters written) and AccessLogPolicies.
		{2, 0, 1, 0, 1, 2, 2, 2, 2, 3, 3, 0, 3, 1, 1, 1, 3, 1, 3, 2, 1, 1, 3, 2, 0, 0, 3, 0, 2, 3, 1, 1, 0, 3, 0, 3, 1, 1, 2, 0, 2, 3, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 3, 0, 3, 1, 1, 2, 3, 0, 1, 0, 3},
		{3, 0, 0, 0, 1, 1, 0, 1, 0, 0, 3, 2, 1, 1, 0, 1, 0, 2, 2, 0, 0, 2, 3, 0, 0, 2, 2, 3, 1, 2, 0, 0, 0, 1, 2, 2, 1, 3, 0, 1, 0, 1, 1, 1, 2, 0, 2, 3, 1, 1, 2, 3, 3, 0, 1, 0, 3, 3, 3},
		[]byte("a VirtualMesh with federation, two VirtualDestinations with static and locality failover, a shift to one, Settings and the users' own VirtualServices"),
		{1, 1, 1, 0, 1, 2, 1, 3, 0, 1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 2, 0, 0, 1, 1, 0, 1, 2, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 2, 1, 1, 0, 1, 0, 2, 1, 0, 0, 1, 1, 2, 0, 1, 1, 2, 2, 1, 1, 0, 1, 0, 3, 1, 0, 2, 1},
		// These reach resources that did not decode: VirtualMeshes,
		// AccessPolicies and TrafficPolicies in the first;
		// VirtualDestinations, WasmDeploymentPolicies, AccessLogPolicies
		// and TrafficPolicies in the second.
		{0, 0, 7, 2, 7, 7, 2, 1, 3, 2, 7, 7, 7, 1, 7, 0, 1, 2, 2, 1, 0, 1, 0, 0, 0, 0, 3, 3, 1, 1, 7, 1, 3, 2, 0, 2, 7, 3, 2, 3, 1, 7, 2, 7, 7, 7, 7, 2, 3, 3, 7, 7, 7, 2, 1, 7, 1, 2, 3, 7, 7, 7, 0, 7, 0, 3, 0, 2, 0, 7, 7, 0, 3, 7, 1, 1, 0, 3, 0, 3, 0, 0, 7, 2, 3, 1},
		{2, 7, 7, 7, 2, 7, 1, 7, 7, 7, 3, 1, 1, 7, 0, 1, 7, 3, 7, 3, 0, 7, 0, 3, 7, 1, 7, 7, 3, 1, 7, 3, 7, 7, 2, 3, 2, 7, 2, 2, 3, 0, 7, 0, 1, 7, 2, 7, 2, 0, 2, 3, 0, 7, 1, 1, 3, 7, 0, 0, 0, 3, 1, 3, 2, 2, 7, 1, 7, 1, 3, 7, 1, 7, 7, 7, 2, 1, 1, 7},
	}
}

// checkTranslation translates the estate built from data twice, the second
// time with every list reversed, and checks that the versions agree, that
// every object and status decodes as what it claims to be, and that every
// spec encoded without protojson is protojson's (WithVerifiedEncoding
// panics).
func checkTranslation(t *testing.T, data []byte) {
	checkInputs(t, fuzzEstate(data))
}

// checkInputs is checkTranslation for given inputs.
func checkInputs(t *testing.T, inputs map[string]*snapshotv1.InputSnapshot) {
	t.Helper()
	opts := domain.WithVerifiedEncoding(domain.Options{})
	first, err := domain.Translate(inputs, opts)
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	second, err := domain.Translate(reversed(inputs), opts)
	if err != nil {
		t.Fatalf("Translate again: %v", err)
	}
	for c, o := range first {
		if second[c].GetVersion() != o.GetVersion() {
			t.Fatalf("%s: version %s, then %s for the same inputs", c, o.GetVersion(), second[c].GetVersion())
		}
		if got := snapshots.OutputVersion(o); got != o.GetVersion() {
			t.Fatalf("%s: version %s is not the content hash %s", c, o.GetVersion(), got)
		}
		if got := snapshots.ReflectOutputVersion(o); got != o.GetVersion() {
			t.Fatalf("%s: version %s differs from the one of protobuf's own encoding, %s", c, o.GetVersion(), got)
		}
		for _, obj := range o.GetObjects() {
			var err error
			switch obj.GetKind() {
			case "VirtualService":
				err = protojson.Unmarshal(obj.GetSpec(), &networkingv1alpha3.VirtualService{})
			case "DestinationRule":
				var dr networkingv1alpha3.DestinationRule
				if err = protojson.Unmarshal(obj.GetSpec(), &dr); err == nil {
					// The hand encoding of simple DestinationRules gives
					// protojson's bytes.
					var want []byte
					if want, err = encode.Reflect(&dr); err == nil && string(want) != string(obj.GetSpec()) {
						err = fmt.Errorf("spec differs from protojson's %s", want)
					}
				}
			case "AuthorizationPolicy":
				var ap securityv1beta1.AuthorizationPolicy
				if err = protojson.Unmarshal(obj.GetSpec(), &ap); err == nil {
					err = checkAuthorizationPolicy(obj, &ap)
				}
			case "PeerAuthentication":
				err = protojson.Unmarshal(obj.GetSpec(), &securityv1beta1.PeerAuthentication{})
			case "ServiceEntry":
				var se networkingv1alpha3.ServiceEntry
				if err = protojson.Unmarshal(obj.GetSpec(), &se); err == nil && len(se.GetPorts()) == 0 {
					err = fmt.Errorf("no ports")
				}
				if err == nil {
					// Federated ServiceEntries are encoded from templates;
					// the bytes are protojson's.
					var want []byte
					if want, err = encode.Reflect(&se); err == nil && string(want) != string(obj.GetSpec()) {
						err = fmt.Errorf("spec differs from protojson's %s", want)
					}
				}
			case "Gateway":
				err = protojson.Unmarshal(obj.GetSpec(), &networkingv1alpha3.Gateway{})
			case "WasmPlugin":
				var wp extensionsv1alpha1.WasmPlugin
				if err = protojson.Unmarshal(obj.GetSpec(), &wp); err == nil {
					err = checkWasmPlugin(&wp)
				}
			default:
				err = fmt.Errorf("unexpected kind")
			}
			if err != nil {
				t.Fatalf("%s %s/%s: %v: %s", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err, obj.GetSpec())
			}
			if obj.GetKind() == "VirtualService" {
				checkVirtualService(t, obj.GetSpec())
			}
		}
		if err := dnsFailoverPriority(o); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		for _, f := range o.GetWasmFilters() {
			if !strings.HasPrefix(f.GetName(), "meshplane."+f.GetPolicy().GetNamespace()+"."+f.GetPolicy().GetName()+".") || len(f.GetWorkloads()) == 0 {
				t.Fatalf("Wasm filter %s of %v for workloads %v", f.GetName(), f.GetPolicy(), f.GetWorkloads())
			}
		}
		for _, p := range o.GetAccessLogPolicies() {
			if len(p.GetWorkloads()) == 0 || len(p.GetWorkloadMatches()) == 0 {
				t.Fatalf("access-log policy %v selects no workload in %s: the agent would apply it to every workload", p.GetPolicy(), c)
			}
		}
		for _, st := range o.GetStatuses() {
			var rs interface {
				proto.Message
				GetState() commonv1.ApprovalState
			} = &commonv1.ResourceStatus{}
			switch st.GetKind() {
			case "VirtualMesh":
				rs = &networkingv1.VirtualMeshStatus{}
			case "VirtualDestination":
				rs = &networkingv1.VirtualDestinationStatus{}
			case "Settings":
				rs = &settingsv1.SettingsStatus{}
			}
			if err := protojson.Unmarshal(st.GetStatus(), rs); err != nil {
				t.Fatalf("status of %s %s: %v", st.GetKind(), st.GetName(), err)
			}
			if rs.GetState() == commonv1.ApprovalState_PENDING {
				t.Fatalf("status of %s is still PENDING", st.GetName())
			}
		}
	}
	// A resource that did not decode is INVALID, names the field, and its
	// status follows its generation.
	for c, in := range inputs {
		for _, md := range undecoded(in) {
			st := statusOf(t, first[c], md.kind, md.GetNamespace(), md.GetName())
			if st == nil || st.State != "INVALID" || !strings.Contains(strings.Join(st.Errors, "\n"), md.GetDecodeError()) ||
				st.ObservedGeneration != fmt.Sprint(md.GetGeneration()) {
				t.Fatalf("%s %s/%s did not decode; status %+v", md.kind, md.GetNamespace(), md.GetName(), st)
			}
		}
	}
}

type kindMeta struct {
	kind string
	*commonv1.ObjectMeta
}

// undecoded lists the user resources of in that did not decode.
func undecoded(in *snapshotv1.InputSnapshot) []kindMeta {
	var out []kindMeta
	r := in.ProtoReflect()
	for _, f := range userResourceFields {
		list := r.Get(r.Descriptor().Fields().ByName(f)).List()
		for i := range list.Len() {
			m := list.Get(i).Message()
			if md := m.Interface().(userResource).GetMetadata(); md.GetDecodeError() != "" && md.GetName() != "" {
				out = append(out, kindMeta{string(m.Descriptor().Name()), md})
			}
		}
	}
	return out
}

// Some seeds reach resources that did not decode, of every kind.
func TestFuzzSeedsReachUndecoded(t *testing.T) {
	kinds := map[string]bool{}
	for _, seed := range fuzzSeeds() {
		for _, in := range fuzzEstate(seed) {
			for _, md := range undecoded(in) {
				kinds[md.kind] = true
			}
		}
	}
	for _, k := range []string{"VirtualMesh", "TrafficPolicy", "AccessPolicy", "VirtualDestination", "WasmDeploymentPolicy", "AccessLogPolicy"} {
		if !kinds[k] {
			t.Errorf("no fuzz seed makes a %s that did not decode (got %v)", k, kinds)
		}
	}
}

// checkWasmPlugin checks what Istio's WasmPlugin CRD would reject.
func checkWasmPlugin(wp *extensionsv1alpha1.WasmPlugin) error {
	u := wp.GetUrl()
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "oci://") {
		return fmt.Errorf("url %q has no http, https or oci scheme", u)
	}
	if sha := wp.GetSha256(); sha != "" && len(sha) != 64 {
		return fmt.Errorf("sha256 %q is not 64 hex digits", sha)
	}
	for k, v := range wp.GetSelector().GetMatchLabels() {
		if k == "" || strings.Contains(k+v, "*") {
			return fmt.Errorf("selector label %q=%q", k, v)
		}
	}
	return nil
}

// checkVirtualService checks the shape translation promises: weights that
// add up to 100 (or to a power of ten up to a million, when a small weight
// would round to 0 at 100), and a catch-all route last.
func checkVirtualService(t *testing.T, spec []byte) {
	var vs networkingv1alpha3.VirtualService
	if err := protojson.Unmarshal(spec, &vs); err != nil {
		t.Fatal(err)
	}
	for i, r := range vs.GetHttp() {
		if len(r.GetMatch()) == 0 && i != len(vs.GetHttp())-1 {
			t.Fatalf("catch-all route %d is not last: %s", i, spec)
		}
		if len(r.GetRoute()) > 1 {
			var sum int32
			for _, d := range r.GetRoute() {
				sum += d.GetWeight()
			}
			if !slices.Contains([]int32{100, 1_000, 10_000, 100_000, 1_000_000}, sum) {
				t.Fatalf("route %d weights add up to %d: %s", i, sum, spec)
			}
		}
	}
	if n := len(vs.GetHttp()); n == 0 || len(vs.GetHttp()[n-1].GetMatch()) != 0 {
		t.Fatalf("the last route is not a catch-all: %s", spec)
	}
}

func TestTranslateFuzzSeeds(t *testing.T) {
	for i, seed := range fuzzSeeds() {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkTranslation(t, seed) })
	}
}

func FuzzTranslate(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(checkTranslation)
}
