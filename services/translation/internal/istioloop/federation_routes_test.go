package istioloop

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	// Istio's routes name this retry predicate; logProto resolves it.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	"github.com/meshplane/meshplane/libs/kube/istiotest"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// createService creates the Kubernetes Service name in namespace with one
// HTTP port, selecting pods labelled app=name, as the golden case's
// discovered destination has it.
func createService(t *testing.T, kube *kubetest.Cluster, namespace, name string, port, targetPort int32) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromInt32(targetPort)}},
		},
	}
	if _, err := kube.Clientset().CoreV1().Services(namespace).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// createEndpointSlice writes the EndpointSlice of Service name, with the
// pods labelled app=name among pods, ready, on port, as Kubernetes's
// endpoint-slice controller (which kubetest does not run) would: istiod
// reads a Service's endpoints from it.
func createEndpointSlice(t *testing.T, kube *kubetest.Cluster, namespace, name string, port int32, pods []pod) {
	t.Helper()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: &port, Protocol: ptr(corev1.ProtocolTCP)}},
	}
	for _, p := range pods {
		if p.namespace != namespace || p.labels["app"] != name {
			continue
		}
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{p.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: p.name},
			NodeName:   ptr("node-1"),
		})
	}
	if _, err := kube.Clientset().DiscoveryV1().EndpointSlices(namespace).Create(t.Context(), es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// weightedRoute finds the first route of the virtual host with domain in
// rc and returns its clusters with their weights, "cluster=weight" in
// order; "" when there is no such host.
func weightedRoute(rc *routev3.RouteConfiguration, domain string) string {
	for _, vh := range rc.GetVirtualHosts() {
		if !slices.Contains(vh.GetDomains(), domain) || len(vh.GetRoutes()) == 0 {
			continue
		}
		ra := vh.GetRoutes()[0].GetRoute()
		if wc := ra.GetWeightedClusters(); wc != nil {
			var parts []string
			for _, c := range wc.GetClusters() {
				parts = append(parts, fmt.Sprintf("%s=%d", c.GetName(), c.GetWeight().GetValue()))
			}
			return strings.Join(parts, " ")
		}
		return ra.GetCluster() + "=100"
	}
	return ""
}

// sidecarRoute waits until the sidecar p of m has, in its route
// configuration for port 9080, a route for domain to the weighted clusters
// want, and that each cluster of want exists with the SNI Istio gives it.
func sidecarRoute(t *testing.T, m *mesh, p istiotest.Proxy, domain, want string, sni map[string]string) {
	t.Helper()
	eventually(t, p.Name+"'s route for "+domain, func() string {
		ads, cs := m.clusters(t, p)
		defer ads.Close()
		for name, wantSNI := range sni {
			c, ok := cs[name]
			if !ok {
				return "no cluster " + name
			}
			tls, err := istiotest.UpstreamTLS(c)
			if err != nil || tls == nil {
				return fmt.Sprintf("cluster %s has no upstream TLS (%v)", name, err)
			}
			if tls.GetSni() != wantSNI {
				return fmt.Sprintf("cluster %s sends SNI %q, want %q", name, tls.GetSni(), wantSNI)
			}
		}
		rcs, err := ads.Routes("9080")
		if err != nil {
			return err.Error()
		}
		rc, ok := rcs["9080"]
		if !ok {
			return "no route configuration 9080"
		}
		if got := weightedRoute(rc, domain); got != want {
			return fmt.Sprintf("route for %s goes to %q, want %q", domain, got, want)
		}
		logProto(t, p.Name+"'s virtual hosts of route 9080", rc)
		return ""
	})
}

// The worked example of docs/concepts.md on Envoy's config (golden case
// federation-traffic-shift): east's sidecars send 10% of their traffic for
// reviews to the v2 subset of reviews.default.svc.west.global, with the
// SNI that names the subset; west's east-west gateway has a cluster for
// that SNI whose endpoints are the v2 pods only; and west's sidecars,
// clients of east's reviews through its federated host, get the same
// shift, to their own reviews v2.
func TestFederatedTrafficShiftOnEnvoy(t *testing.T) {
	t.Run("east", func(t *testing.T) {
		m := startMesh(t, "federation-traffic-shift", "east", "cluster.local",
			pod{namespace: "default", name: "reviews-v1-1", ip: "10.1.0.11", serviceAccount: "reviews",
				labels: map[string]string{"app": "reviews", "version": "v1"}, containerPort: 8080})
		createService(t, m.kube, "default", "reviews", 9080, 8080)
		remote := "outbound|9080|version-v2|reviews.default.svc.west.global"
		sidecarRoute(t, m, istiotest.Proxy{IP: "10.1.0.20", Name: "productpage-v1", Namespace: "default", Labels: map[string]string{"app": "productpage"}},
			"reviews.default.svc.cluster.local",
			"outbound|9080||reviews.default.svc.cluster.local=90 "+remote+"=10",
			map[string]string{remote: "outbound_.9080_.version-v2_.reviews.default.svc.west.global"})
	})
	t.Run("west", func(t *testing.T) {
		m := startMesh(t, "federation-traffic-shift", "west", "cluster.local",
			pod{namespace: "default", name: "reviews-v1-1", ip: "10.2.0.11", serviceAccount: "reviews",
				labels: map[string]string{"app": "reviews", "version": "v1"}, containerPort: 8080},
			pod{namespace: "default", name: "reviews-v2-1", ip: "10.2.0.12", serviceAccount: "reviews",
				labels: map[string]string{"app": "reviews", "version": "v2"}, containerPort: 8080})
		createService(t, m.kube, "default", "reviews", 9080, 8080)
		gw := istiotest.Proxy{Type: "router", IP: "10.2.0.30", Name: "istio-eastwestgateway-1", Namespace: "istio-system",
			Labels: map[string]string{"istio": "eastwestgateway"}, RouterMode: "sni-dnat"}
		name := "outbound_.9080_.version-v2_.reviews.default.svc.west.global"
		eventually(t, "the gateway's endpoints of "+name, func() string {
			la := m.endpoints(t, gw, name)
			got := istiotest.Flatten(la)
			if len(got) == 1 && got[0].Address == "10.2.0.12" && got[0].Port == 8080 {
				logProto(t, "east-west gateway endpoints of "+name, la)
				return ""
			}
			return fmt.Sprintf("endpoints %q, want the v2 pod alone, 10.2.0.12:8080", endpointsString(got))
		})
		sidecarRoute(t, m, istiotest.Proxy{IP: "10.2.0.20", Name: "productpage-v1", Namespace: "default", Labels: map[string]string{"app": "productpage"}},
			"reviews.default.svc.east.global",
			"outbound|9080||reviews.default.svc.east.global=90 outbound|9080|version-v2|reviews.default.svc.cluster.local=10",
			map[string]string{"outbound|9080||reviews.default.svc.east.global": "outbound_.9080_._.reviews.default.svc.east.global"})
	})
}

// TrafficPolicies on a service of west reach east's clients through the
// federated host (golden case federation-route-policies, cluster east):
// the sidecar's route for reviews.default.svc.west.global has the
// header-matched canary to the v2 subset (a cluster of its own, reached
// by the SNI that names the subset) before the route with the resilience
// settings, whose mirror goes to ratings' federated host. (The mirror of
// reviews-shadow to productpage, which is not federated, is left out of
// east with a warning: the golden case shows it.)
func TestFederatedRoutePoliciesOnEnvoy(t *testing.T) {
	const c = "federation-route-policies"
	b := newBookinfo("default")
	m := b.start(t, c, "east", "cluster.local")
	fed, ratingsFed := "reviews.default.svc.west.global", "ratings.default.svc.west.global"
	v2 := istiotest.ClusterName(9080, "version-v2", fed)
	x, vh := vsRoutes(t, m, b.productpage, fed, v2, istiotest.ClusterName(9080, "", ratingsFed))
	if len(vh.GetRoutes()) < 2 {
		t.Fatalf("virtual host %s has %d routes, want the canary and the resilience route", vh.GetName(), len(vh.GetRoutes()))
	}
	canary := meshplaneObject(t, c, "trafficPolicies", "reviews-canary")
	r0 := vh.GetRoutes()[0]
	cc := canary.on(t, "route 9080, virtual host "+vh.GetName()+", route 0", r0)
	cc.equal("spec.httpRequestMatchers[0].headers (end-user: jason)", "route.match", matchText(r0.GetMatch()), "prefix /; header end-user exact jason")
	cc.equal("spec.policy.trafficShift.destinations[0].kubeService.subset (version v2 of reviews in west)", "route.cluster", weights(r0), map[string]uint32{v2: 100})
	tls, err := istiotest.UpstreamTLS(cluster(t, x.clusters, v2))
	if err != nil {
		t.Fatal(err)
	}
	canary.on(t, "cluster "+v2, x.clusters[v2]).equal("spec.policy.trafficShift.destinations[0].kubeService.subset", "cluster transport socket SNI (the east-west gateway routes by it)",
		tls.GetSni(), "outbound_.9080_.version-v2_.reviews.default.svc.west.global")

	res := meshplaneObject(t, c, "trafficPolicies", "reviews-resilience")
	r1 := vh.GetRoutes()[1]
	rc := res.on(t, "route 9080, virtual host "+vh.GetName()+", route 1", r1)
	rc.equal("spec.policy.requestTimeout", "route.timeout", r1.GetRoute().GetTimeout(), durationpb.New(3*time.Second))
	rp := r1.GetRoute().GetRetryPolicy()
	rc.equal("spec.policy.retries (attempts, perTryTimeout, retryOn)", "route.retry_policy (num_retries, per_try_timeout, retry_on)",
		[]any{rp.GetNumRetries().GetValue(), rp.GetPerTryTimeout().AsDuration(), rp.GetRetryOn()}, []any{uint32(3), time.Second, "5xx"})
	fault := &faultv3.HTTPFault{}
	if perFilter(t, r1, "envoy.filters.http.fault", fault) {
		rc.equal("spec.policy.faultInjection (abort 503, 1%)", "HTTPFault.abort", fault.GetAbort(), &faultv3.FaultAbort{
			ErrorType: &faultv3.FaultAbort_HttpStatus{HttpStatus: 503}, Percentage: percent(1)})
	} else {
		rc.fail("spec.policy.faultInjection", "typed_per_filter_config[envoy.filters.http.fault]", "none")
	}
	rc.that("spec.policy.corsPolicy", "typed_per_filter_config[envoy.filters.http.cors]", perFilter(t, r1, "envoy.filters.http.cors", &corsv3.CorsPolicy{}), nil, "a CORS policy")
	rc.equal("spec.policy.headerManipulation", "route request_headers_to_add, response_headers_to_remove",
		[]any{len(r1.GetRequestHeadersToAdd()), r1.GetResponseHeadersToRemove()}, []any{1, []string{"server"}})

	mirrors := r1.GetRoute().GetRequestMirrorPolicies()
	if len(mirrors) != 1 {
		rc.fail("spec.policy.mirror", "route.request_mirror_policies", fmt.Sprintf("%d mirror policies, want 1", len(mirrors)))
		return
	}
	rc.equal("spec.policy.mirror.kubeService (ratings in west: its federated host), .percentage", "route.request_mirror_policies[0] cluster, runtime_fraction",
		[]any{mirrors[0].GetCluster(), mirrors[0].GetRuntimeFraction().GetDefaultValue()}, []any{istiotest.ClusterName(9080, "", ratingsFed), percent(5)})
}

// Selective federation with a hostname suffix (golden case
// federation-selective, cluster east): east's sidecar gets a cluster for
// the service exported to every mesh (ratings of west), under the suffix,
// through west's gateway, and none for another cluster's service that
// is not exported to east;
// east's east-west gateway passes the SNI of its own reviews, exported to
// north.
func TestSelectiveFederationOnEnvoy(t *testing.T) {
	const c = "federation-selective"
	b := newBookinfo("default")
	m := b.start(t, c, "east", "cluster.local")
	vm := meshplaneObject(t, c, "virtualMeshes", "global")
	ratings := istiotest.ClusterName(9080, "", "ratings.default.svc.west.mesh.example")
	x := m.fetch(t, b.productpage.proxy(), nil, func(x *xds) string {
		if _, ok := x.clusters[ratings]; !ok {
			return "no cluster " + ratings
		}
		return ""
	})
	cl := x.clusters[ratings]
	check := vm.on(t, "cluster "+ratings, cl)
	check.equal("spec.federation.hostnameSuffix, .selective.selectors[1] (ratings of west, to every mesh)", "cluster load_assignment endpoints (west's gateway)",
		endpointsString(istiotest.Flatten(cl.GetLoadAssignment())), "west.example.com:15443 priority 0 locality \"\"")
	// Services of the other clusters under the suffix (east's own
	// reviews is there too: the server-side ServiceEntry the gateway
	// resolves its SNI with).
	var remote []string
	for name := range x.clusters {
		if strings.HasSuffix(name, ".mesh.example") && !strings.HasSuffix(name, ".svc.east.mesh.example") {
			remote = append(remote, name)
		}
	}
	slices.Sort(remote)
	vm.on(t, "productpage's clusters", cl).equal("spec.federation.selective.selectors (only ratings of west is exported to east)", "the sidecar's clusters for other clusters' services",
		remote, []string{ratings})

	gw := istiotest.Proxy{Type: "router", IP: "10.1.0.30", Name: "istio-eastwestgateway-1", Namespace: "istio-system",
		Labels: map[string]string{"istio": "eastwestgateway"}, RouterMode: "sni-dnat"}
	gx := m.fetch(t, gw, nil, func(x *xds) string {
		if _, ok := x.listeners["0.0.0.0_15443"]; !ok {
			return "no listener 0.0.0.0_15443"
		}
		return ""
	})
	var snis []string
	for _, fc := range gx.listeners["0.0.0.0_15443"].GetFilterChains() {
		snis = append(snis, fc.GetFilterChainMatch().GetServerNames()...)
	}
	vm.on(t, "east-west gateway listener 0.0.0.0_15443", gx.listeners["0.0.0.0_15443"]).that(
		"spec.federation.selective.selectors[0] (reviews of east, to north), .hostnameSuffix", "filter_chain_match.server_names",
		slices.Contains(snis, sniName(9080, "reviews.default.svc.east.mesh.example")), snis, sniName(9080, "reviews.default.svc.east.mesh.example"))
}
