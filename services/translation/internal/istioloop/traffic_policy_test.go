package istioloop

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/meshplane/meshplane/libs/kube/istiotest"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// bookinfo is the test estate of the single-cluster golden cases: the
// pods of productpage, reviews v1 and v2 and ratings in namespace ns,
// on IPs 10.1.0.11-14, each with its service (port 9080 to 8080).
type bookinfo struct {
	ns                                string
	productpage, reviewsV1, reviewsV2 pod
	ratingsV1                         pod
}

func newBookinfo(ns string) bookinfo {
	mk := func(name, ip, app, version string) pod {
		return pod{namespace: ns, name: name, ip: ip, serviceAccount: app,
			labels: map[string]string{"app": app, "version": version}, containerPort: 8080}
	}
	return bookinfo{ns: ns,
		reviewsV1:   mk("reviews-v1-1", "10.1.0.11", "reviews", "v1"),
		reviewsV2:   mk("reviews-v2-1", "10.1.0.12", "reviews", "v2"),
		ratingsV1:   mk("ratings-v1-1", "10.1.0.13", "ratings", "v1"),
		productpage: mk("productpage-v1-1", "10.1.0.14", "productpage", "v1"),
	}
}

func (b bookinfo) pods() []pod { return []pod{b.productpage, b.reviewsV1, b.reviewsV2, b.ratingsV1} }

// start starts istiod on cluster's output of golden case c, with the
// bookinfo pods and services, and the extra pods, each with a service
// named by its app label.
func (b bookinfo) start(t *testing.T, c, cluster, td string, extra ...pod) *mesh {
	t.Helper()
	pods := append(b.pods(), extra...)
	return startMeshWith(t, c, cluster, td, pods, func(kube *kubetest.Cluster) { b.services(t, kube, extra) })
}

// services creates the services of the bookinfo pods and the extra
// pods, one per app label, with their endpoint slices.
func (b bookinfo) services(t *testing.T, kube *kubetest.Cluster, extra []pod) {
	t.Helper()
	pods := append(b.pods(), extra...)
	done := map[string]bool{}
	for _, p := range pods {
		if k := p.namespace + "/" + p.labels["app"]; !done[k] {
			done[k] = true
			createService(t, kube, p.namespace, p.labels["app"], 9080, 8080)
			createEndpointSlice(t, kube, p.namespace, p.labels["app"], 8080, pods)
		}
	}
}

// proxy is the sidecar of pod p.
func (p pod) proxy() istiotest.Proxy {
	return istiotest.Proxy{IP: p.ip, Name: p.name, Namespace: p.namespace, ServiceAccount: p.serviceAccount, Labels: p.labels}
}

// host is the cluster-local hostname of service name in namespace ns.
func host(name, ns string) string { return name + "." + ns + ".svc.cluster.local" }

// vsRoutes waits until the proxy's route for host:9080 holds routes
// built from a VirtualService, and its clusters include the host's and
// the clusters named, and returns the virtual host.
func vsRoutes(t *testing.T, m *mesh, p pod, hostname string, clusters ...string) (*xds, *routev3.VirtualHost) {
	t.Helper()
	var vh *routev3.VirtualHost
	x := m.fetch(t, p.proxy(), []string{"9080"}, func(x *xds) string {
		for _, c := range append(clusters, istiotest.ClusterName(9080, "", hostname)) {
			if _, ok := x.clusters[c]; !ok {
				return "no cluster " + c + " yet"
			}
		}
		var why string
		if vh, why = x.vhost(hostname, 9080); vh == nil {
			return why
		}
		if !slices.ContainsFunc(vh.GetRoutes(), fromVirtualService) {
			return "no route of " + hostname + " comes from a VirtualService yet"
		}
		return ""
	})
	return x, vh
}

func percent(p float64) *typev3.FractionalPercent {
	return &typev3.FractionalPercent{Numerator: uint32(p * 10000), Denominator: typev3.FractionalPercent_MILLION}
}

// perFilter decodes the per-route config of filter name into m; false
// when the route has none.
func perFilter(t *testing.T, r *routev3.Route, name string, m proto.Message) bool {
	t.Helper()
	a, ok := r.GetTypedPerFilterConfig()[name]
	if !ok {
		return false
	}
	if err := a.UnmarshalTo(m); err != nil {
		t.Fatalf("decode %s of route %s: %v", name, r.GetName(), err)
	}
	return true
}

// The route fields of TrafficPolicy reviews-everything (golden case
// route-features) on the route that productpage's sidecar gets for
// reviews:9080, and its destination fields on the clusters of reviews.
func TestTrafficPolicyRouteFieldsOnEnvoy(t *testing.T) {
	b := newBookinfo("default")
	m := b.start(t, "route-features", "east", "cluster.local")
	tp := meshplaneObject(t, "route-features", "trafficPolicies", "reviews-everything")
	reviews, ratings := host("reviews", "default"), host("ratings", "default")
	x, vh := vsRoutes(t, m, b.productpage, reviews, istiotest.ClusterName(9080, "version-v1", reviews), istiotest.ClusterName(9080, "version-v2", reviews),
		istiotest.ClusterName(9080, "", ratings))

	if n := len(vh.GetRoutes()); n != 2 {
		tp.on(t, "virtual host "+vh.GetName(), vh).fail("spec.httpRequestMatchers", "virtual_hosts.routes", fmt.Sprintf("%d routes, want 2: the policy's and the catch-all", n))
		return
	}
	r := vh.GetRoutes()[0]
	c := tp.on(t, "route 9080, virtual host "+vh.GetName()+", route 0", r)
	c.equal("spec.httpRequestMatchers[0].prefix", "route.match.prefix", r.GetMatch().GetPrefix(), "/reviews")
	c.equal("(no matcher: the rest of the traffic)", "virtual_hosts.routes[1].match.prefix", vh.GetRoutes()[1].GetMatch().GetPrefix(), "/")

	fault := &faultv3.HTTPFault{}
	if !perFilter(t, r, "envoy.filters.http.fault", fault) {
		c.fail("spec.policy.faultInjection", "typed_per_filter_config[envoy.filters.http.fault]", "none")
	} else {
		c.equal("spec.policy.faultInjection.fixedDelay", "HTTPFault.delay.fixed_delay", fault.GetDelay().GetFixedDelay(), durationpb.New(1500*time.Millisecond))
		c.equal("spec.policy.faultInjection.percentage", "HTTPFault.delay.percentage", fault.GetDelay().GetPercentage(), percent(10))
		c.equal("(a delay, no abort)", "HTTPFault.abort", fault.GetAbort(), (*faultv3.FaultAbort)(nil))
	}

	cors := &corsv3.CorsPolicy{}
	if !perFilter(t, r, "envoy.filters.http.cors", cors) {
		c.fail("spec.policy.corsPolicy", "typed_per_filter_config[envoy.filters.http.cors]", "none")
	} else {
		c.equal("spec.policy.corsPolicy.allowOrigins", "CorsPolicy.allow_origin_string_match", cors.GetAllowOriginStringMatch(), []*matcherv3.StringMatcher{
			{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "https://shop.example"}},
			{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: `https://.*\.example`}}},
		})
		c.equal("spec.policy.corsPolicy.allowMethods", "CorsPolicy.allow_methods", cors.GetAllowMethods(), "GET,POST")
		c.equal("spec.policy.corsPolicy.allowHeaders", "CorsPolicy.allow_headers", cors.GetAllowHeaders(), "x-user")
		c.equal("spec.policy.corsPolicy.exposeHeaders", "CorsPolicy.expose_headers", cors.GetExposeHeaders(), "x-trace")
		c.equal("spec.policy.corsPolicy.maxAge", "CorsPolicy.max_age", cors.GetMaxAge(), "60")
		c.equal("spec.policy.corsPolicy.allowCredentials", "CorsPolicy.allow_credentials", cors.GetAllowCredentials(), wrapperspb.Bool(true))
	}

	mirrors := r.GetRoute().GetRequestMirrorPolicies()
	if len(mirrors) != 1 {
		c.fail("spec.policy.mirror", "route.request_mirror_policies", fmt.Sprintf("%d mirror policies, want 1", len(mirrors)))
	} else {
		c.equal("spec.policy.mirror.kubeService, .port", "route.request_mirror_policies[0].cluster", mirrors[0].GetCluster(), istiotest.ClusterName(9080, "", ratings))
		c.equal("spec.policy.mirror.percentage", "route.request_mirror_policies[0].runtime_fraction.default_value", mirrors[0].GetRuntimeFraction().GetDefaultValue(), percent(25))
	}

	c.equal("spec.policy.headerManipulation.appendRequestHeaders", "route.request_headers_to_add (append_action APPEND_IF_EXISTS_OR_ADD)", r.GetRequestHeadersToAdd(), []*corev3.HeaderValueOption{
		{Header: &corev3.HeaderValue{Key: "x-from", Value: "meshplane"}, AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD},
	})
	c.equal("spec.policy.headerManipulation.removeRequestHeaders", "route.request_headers_to_remove", r.GetRequestHeadersToRemove(), []string{"x-internal"})
	c.equal("spec.policy.headerManipulation.appendResponseHeaders", "route.response_headers_to_add (append_action APPEND_IF_EXISTS_OR_ADD)", r.GetResponseHeadersToAdd(), []*corev3.HeaderValueOption{
		{Header: &corev3.HeaderValue{Key: "x-served-by", Value: "reviews"}, AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD},
	})
	c.equal("spec.policy.headerManipulation.removeResponseHeaders", "route.response_headers_to_remove", r.GetResponseHeadersToRemove(), []string{"server"})

	// Weights 1:1:1 over two subsets and another service.
	v1, v2 := istiotest.ClusterName(9080, "version-v1", reviews), istiotest.ClusterName(9080, "version-v2", reviews)
	c.equal("spec.policy.trafficShift.destinations[*].weight, .kubeService (.subset, .port)", "route.weighted_clusters.clusters", weights(r), map[string]uint32{
		v1: 34, v2: 33, istiotest.ClusterName(9080, "", ratings): 33,
	})

	// The subsets: a cluster each, whose endpoints are the pods with the
	// subset's labels.
	for sub, p := range map[string]pod{"version-v1": b.reviewsV1, "version-v2": b.reviewsV2} {
		cl, err := istiotest.SubsetCluster(x.clusters, reviews, 9080, sub)
		if err != nil {
			c.fail("spec.policy.trafficShift.destinations[].kubeService.subset", "cluster "+istiotest.ClusterName(9080, sub, reviews), err.Error())
			continue
		}
		eps, err := x.ads.ClusterEndpoints(cl.GetName())
		if err != nil {
			t.Fatal(err)
		}
		sc := tp.on(t, "cluster "+cl.GetName(), cl)
		sc.equal("spec.policy.trafficShift.destinations[].kubeService.subset", "ClusterLoadAssignment.endpoints of "+cl.GetName(), addresses(eps), []string{p.ip + ":8080"})

		// Destination fields: every cluster of reviews has them.
		od := cl.GetOutlierDetection()
		sc.equal("spec.policy.outlierDetection.consecutiveErrors", "cluster.outlier_detection.consecutive_5xx", od.GetConsecutive_5Xx(), wrapperspb.UInt32(3))
		sc.equal("spec.policy.outlierDetection.interval", "cluster.outlier_detection.interval", od.GetInterval(), durationpb.New(5*time.Second))
		sc.equal("spec.policy.outlierDetection.baseEjectionTime (unset: 30s)", "cluster.outlier_detection.base_ejection_time", od.GetBaseEjectionTime(), durationpb.New(30*time.Second))
		sc.equal("spec.policy.outlierDetection.maxEjectionPercent (unset: 100)", "cluster.outlier_detection.max_ejection_percent", od.GetMaxEjectionPercent(), wrapperspb.UInt32(100))
		tls, err := istiotest.UpstreamTLS(cl)
		if err != nil {
			t.Fatal(err)
		}
		sc.that("spec.policy.mtls.istio.tlsMode DISABLE", "cluster.transport_socket (none: plaintext)", tls == nil, tls, "no TLS context")
	}

	// A destination without the policy keeps the default ISTIO_MUTUAL:
	// Istio's certificate and root over SDS.
	rc := cluster(t, x.clusters, istiotest.ClusterName(9080, "", ratings))
	tls, err := istiotest.UpstreamTLS(rc)
	if err != nil {
		t.Fatal(err)
	}
	ratingsCheck := tp.on(t, "cluster "+rc.GetName(), rc)
	ratingsCheck.that("(no mtls: the default DestinationRule, ISTIO_MUTUAL)", "cluster.transport_socket (for every endpoint, not auto mTLS's transport_socket_matches) tls_certificate_sds_secret_configs",
		rc.GetTransportSocket() != nil && tls != nil && len(tls.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()) == 1 && tls.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()[0].GetName() == "default",
		tls, "Istio's SDS certificate \"default\"")
	ratingsCheck.that("(no outlierDetection)", "cluster.outlier_detection", rc.GetOutlierDetection() == nil, rc.GetOutlierDetection(), "none")

	// No VirtualMesh: no PeerAuthentication, so the server takes mTLS and
	// plain text (Istio's PERMISSIVE default).
	sx := m.fetch(t, b.reviewsV1.proxy(), nil, func(x *xds) string {
		_, err := istiotest.InboundChains(x.listeners, 8080)
		if err != nil {
			return err.Error()
		}
		return ""
	})
	chains, _ := istiotest.InboundChains(sx.listeners, 8080)
	vm := object{desc: "no VirtualMesh (golden case route-features)", yaml: "(none)\n"}
	vm.on(t, "listener virtualInbound of reviews-v1", sx.listeners[istiotest.VirtualInbound]).equal(
		"VirtualMesh spec.mtlsConfig (none)", "virtualInbound filter_chain_match.transport_protocol of port 8080",
		istiotest.TransportProtocols(chains), []string{"raw_buffer", "tls"})
}

// weights returns the clusters of a weighted route with their weights.
func weights(r *routev3.Route) map[string]uint32 {
	out := map[string]uint32{}
	if c := r.GetRoute().GetCluster(); c != "" {
		out[c] = 100
	}
	for _, c := range r.GetRoute().GetWeightedClusters().GetClusters() {
		out[c.GetName()] = c.GetWeight().GetValue()
	}
	return out
}

func addresses(eps []istiotest.Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, fmt.Sprintf("%s:%d", e.Address, e.Port))
	}
	slices.Sort(out)
	return out
}

// Retries and the request timeout (golden case retries-timeout) on the
// route of reviews:9080.
func TestRetriesAndTimeoutOnEnvoy(t *testing.T) {
	b := newBookinfo("default")
	m := b.start(t, "retries-timeout", "east", "cluster.local")
	tp := meshplaneObject(t, "retries-timeout", "trafficPolicies", "reviews-retries")
	_, vh := vsRoutes(t, m, b.productpage, host("reviews", "default"))
	r := vh.GetRoutes()[0]
	c := tp.on(t, "route 9080, virtual host "+vh.GetName()+", route 0", r)
	rp := r.GetRoute().GetRetryPolicy()
	c.equal("spec.policy.retries.attempts", "route.retry_policy.num_retries", rp.GetNumRetries(), wrapperspb.UInt32(3))
	c.equal("spec.policy.retries.perTryTimeout", "route.retry_policy.per_try_timeout", rp.GetPerTryTimeout(), durationpb.New(2*time.Second))
	c.equal("spec.policy.retries.retryOn", "route.retry_policy.retry_on", rp.GetRetryOn(), "5xx,connect-failure")
	c.equal("spec.policy.requestTimeout", "route.timeout", r.GetRoute().GetTimeout(), durationpb.New(10*time.Second))
}

// The TrafficPolicy fields route-features lacks (golden case
// route-features-extra): an abort, matchers by regex, by presence and
// inverted with a value, CORS with a prefix origin and credentials
// refused, a one-in-a-thousand canary, outlier detection with every
// field, and the SIMPLE and ISTIO_MUTUAL TLS modes.
func TestTrafficPolicyMoreFieldsOnEnvoy(t *testing.T) {
	const c = "route-features-extra"
	b := newBookinfo("default")
	ratingsV2 := pod{namespace: "default", name: "ratings-v2-1", ip: "10.1.0.15", serviceAccount: "ratings",
		labels: map[string]string{"app": "ratings", "version": "v2"}, containerPort: 8080}
	m := b.start(t, c, "east", "cluster.local", ratingsV2)
	reviews, ratings, productpage := host("reviews", "default"), host("ratings", "default"), host("productpage", "default")

	v1, v2 := istiotest.ClusterName(9080, "version-v1", ratings), istiotest.ClusterName(9080, "version-v2", ratings)
	abort := meshplaneObject(t, c, "trafficPolicies", "reviews-abort")
	x, vh := vsRoutes(t, m, b.productpage, reviews, istiotest.ClusterName(9080, "", ratings), istiotest.ClusterName(9080, "", productpage), v1, v2)
	r := vh.GetRoutes()[0]
	ac := abort.on(t, "route 9080, virtual host "+vh.GetName()+", route 0", r)
	ac.equal("spec.httpRequestMatchers[0] (prefix, method, headers by regex and by presence, query parameters by regex and by presence)", "route.match",
		matchText(r.GetMatch()), "prefix /api; header !x-env exact prod; header :method exact POST; header x-canary present; header x-user regex ^a.*; query debug present; query id regex [0-9]+")
	cors := &corsv3.CorsPolicy{}
	if !perFilter(t, r, "envoy.filters.http.cors", cors) {
		ac.fail("spec.policy.corsPolicy", "typed_per_filter_config[envoy.filters.http.cors]", "none")
	} else {
		ac.equal("spec.policy.corsPolicy.allowOrigins[0].prefix", "CorsPolicy.allow_origin_string_match", cors.GetAllowOriginStringMatch(),
			[]*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "https://app."}}})
		ac.equal("spec.policy.corsPolicy.allowCredentials false", "CorsPolicy.allow_credentials", cors.GetAllowCredentials(), wrapperspb.Bool(false))
	}
	fault := &faultv3.HTTPFault{}
	if !perFilter(t, r, "envoy.filters.http.fault", fault) {
		ac.fail("spec.policy.faultInjection", "typed_per_filter_config[envoy.filters.http.fault]", "none")
	} else {
		ac.equal("spec.policy.faultInjection.abort.httpStatus", "HTTPFault.abort.http_status", fault.GetAbort().GetHttpStatus(), uint32(503))
		ac.equal("spec.policy.faultInjection.percentage", "HTTPFault.abort.percentage", fault.GetAbort().GetPercentage(), percent(50))
		ac.equal("(an abort, no delay)", "HTTPFault.delay", fault.GetDelay(), (*faultcommonv3.FaultDelay)(nil))
	}

	canary := meshplaneObject(t, c, "trafficPolicies", "ratings-canary")
	_, rvh := vsRoutes(t, m, b.productpage, ratings)
	rr := rvh.GetRoutes()[0]
	canary.on(t, "route 9080, virtual host "+rvh.GetName()+", route 0", rr).equal(
		"spec.policy.trafficShift.destinations[*].weight (999:1)", "route.weighted_clusters.clusters", weights(rr), map[string]uint32{v1: 999, v2: 1})
	for _, name := range []string{istiotest.ClusterName(9080, "", ratings), v1, v2} {
		cl := cluster(t, x.clusters, name)
		cc := canary.on(t, "cluster "+name, cl)
		od := cl.GetOutlierDetection()
		cc.equal("spec.policy.outlierDetection.consecutiveErrors", "cluster.outlier_detection.consecutive_5xx", od.GetConsecutive_5Xx(), wrapperspb.UInt32(7))
		cc.equal("spec.policy.outlierDetection.interval", "cluster.outlier_detection.interval", od.GetInterval(), durationpb.New(2*time.Second))
		cc.equal("spec.policy.outlierDetection.baseEjectionTime", "cluster.outlier_detection.base_ejection_time", od.GetBaseEjectionTime(), durationpb.New(time.Minute))
		cc.equal("spec.policy.outlierDetection.maxEjectionPercent", "cluster.outlier_detection.max_ejection_percent", od.GetMaxEjectionPercent(), wrapperspb.UInt32(50))
		tls, err := istiotest.UpstreamTLS(cl)
		if err != nil {
			t.Fatal(err)
		}
		cc.that("spec.policy.mtls.istio.tlsMode SIMPLE", "cluster.transport_socket UpstreamTlsContext without a client certificate",
			cl.GetTransportSocket() != nil && tls != nil && len(tls.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()) == 0 && len(tls.GetCommonTlsContext().GetTlsCertificates()) == 0,
			tls, "TLS, without Istio's certificate")
	}
	eps, err := x.ads.ClusterEndpoints(v2)
	if err != nil {
		t.Fatal(err)
	}
	canary.on(t, "cluster "+v2, cluster(t, x.clusters, v2)).equal("spec.policy.trafficShift.destinations[1].kubeService.subset", "ClusterLoadAssignment.endpoints of "+v2,
		addresses(eps), []string{ratingsV2.ip + ":8080"})

	mtls := meshplaneObject(t, c, "trafficPolicies", "productpage-mtls")
	pc := cluster(t, x.clusters, istiotest.ClusterName(9080, "", productpage))
	tls, err := istiotest.UpstreamTLS(pc)
	if err != nil {
		t.Fatal(err)
	}
	mtls.on(t, "cluster "+pc.GetName(), pc).that("spec.policy.mtls.istio.tlsMode ISTIO_MUTUAL", "cluster.transport_socket (for every endpoint, not auto mTLS's transport_socket_matches) tls_certificate_sds_secret_configs",
		pc.GetTransportSocket() != nil && tls != nil && len(tls.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()) == 1 && tls.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()[0].GetName() == "default",
		tls, "Istio's SDS certificate \"default\"")
}

// Policies that istiod would refuse or drop, or whose route Envoy would
// refuse (golden case invalid-route-fields), are INVALID and write
// nothing: the sidecar's routes for reviews are the valid policies' (an
// added host header, which Istio's validation takes and istiod turns into
// a rewrite of the request's authority; an Envoy variable and a literal
// %%) and the catch-all.
func TestInvalidRouteFieldsOnEnvoy(t *testing.T) {
	const c = "invalid-route-fields"
	b := newBookinfo("default")
	m := b.start(t, c, "east", "cluster.local")
	_, vh := vsRoutes(t, m, b.productpage, host("reviews", "default"))
	var prefixes []string
	for _, r := range vh.GetRoutes() {
		prefixes = append(prefixes, r.GetMatch().GetPrefix())
	}
	ok := meshplaneObject(t, c, "trafficPolicies", "header-variables")
	check := ok.on(t, "route 9080, virtual host "+vh.GetName(), vh)
	check.equal("(the INVALID policies of the case write nothing)", "virtual_hosts.routes[].match.prefix", prefixes, []string{"/host", "/ok", "/"})
	if len(vh.GetRoutes()) == 3 {
		meshplaneObject(t, c, "trafficPolicies", "header-host").on(t, "route 9080, virtual host "+vh.GetName(), vh).equal(
			"spec.policy.headerManipulation.appendRequestHeaders[host]", "route.host_rewrite_literal",
			vh.GetRoutes()[0].GetRoute().GetHostRewriteLiteral(), "other.example")
		got := map[string]string{}
		for _, h := range vh.GetRoutes()[1].GetRequestHeadersToAdd() {
			got[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
		}
		check.equal("spec.policy.headerManipulation.appendRequestHeaders (%HOSTNAME%, 100%%)", "route.request_headers_to_add",
			got, map[string]string{"x-served-by": "%HOSTNAME%", "x-share": "100%%"})
	}
}
