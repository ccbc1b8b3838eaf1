package istioloop

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/meshplane/meshplane/libs/kube/istiotest"
)

// A static failover list is resolved by DNS (a local service by its
// hostname, a gateway by its name): istiod stays up (it crashed on the
// failoverPriority this used to carry), and the sidecar's cluster has the
// endpoints in the list's order as priorities, whether the local service
// comes first (west) or last (east).
func TestStaticFailoverKeepsIstiodUpAndOrdersEndpoints(t *testing.T) {
	for _, tc := range []struct {
		cluster, region string
		want            []istiotest.Endpoint // address, port, priority
	}{
		{"east", "us-east-1", []istiotest.Endpoint{
			{Address: "west.gw.example.com", Port: 15443, Priority: 0},
			{Address: "reviews.default.svc.cluster.local", Port: 9080, Priority: 1},
		}},
		{"west", "us-west-1", []istiotest.Endpoint{
			{Address: "reviews.default.svc.cluster.local", Port: 9080, Priority: 0},
			{Address: "203.0.113.10", Port: 15443, Priority: 1},
		}},
	} {
		t.Run(tc.cluster, func(t *testing.T) {
			m := startMesh(t, "vd-static-failover", tc.cluster, "cluster.local")
			_, cs := m.clusters(t, istiotest.Proxy{IP: "10.9.0.20", Name: "productpage-v1", Namespace: "default",
				Labels: map[string]string{"app": "productpage"}, Region: tc.region, Zone: tc.region + "a"})
			c := cluster(t, cs, "outbound|80||reviews.global")
			logProto(t, tc.cluster+": sidecar cluster outbound|80||reviews.global load assignment", c.GetLoadAssignment())
			if c.GetType() != clusterv3.Cluster_STRICT_DNS {
				t.Errorf("cluster type %v, want STRICT_DNS", c.GetType())
			}
			got := istiotest.Flatten(c.GetLoadAssignment())
			if len(got) != len(tc.want) {
				t.Fatalf("endpoints %s, want %d", endpointsString(got), len(tc.want))
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(got, func(e istiotest.Endpoint) bool {
					return e.Address == w.Address && e.Port == w.Port && e.Priority == w.Priority
				}) {
					t.Errorf("no endpoint %s:%d with priority %d among %s", w.Address, w.Port, w.Priority, endpointsString(got))
				}
			}
			// Failover into this cluster: its gateway serves the local
			// service.
			gatewayHasLocalEndpoints(t, m, 80, "reviews.global")
			if err := m.istiod.Exited(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Locality failover across three clusters: the sidecar in east has the
// local endpoint first, then the failover region, then the rest; the
// east-west gateway's AUTO_PASSTHROUGH cluster for the hostname has the
// local service (it had none: Istio keeps only mTLS-capable endpoints
// there, which the tlsMode label says).
func TestLocalityFailoverAndGatewayEndpoints(t *testing.T) {
	m := startMesh(t, "vd-locality-failover", "east", "cluster.local")
	ads, cs := m.clusters(t, istiotest.Proxy{IP: "10.9.0.20", Name: "productpage-v1", Namespace: "default",
		Labels: map[string]string{"app": "productpage"}, Region: "us-east-1", Zone: "us-east-1a"})
	c := cluster(t, cs, "outbound|9080||reviews.mesh.internal")
	logProto(t, "sidecar cluster outbound|9080||reviews.mesh.internal load assignment", c.GetLoadAssignment())
	prio := map[string]uint32{}
	for _, e := range istiotest.Flatten(c.GetLoadAssignment()) {
		prio[e.Address] = e.Priority
	}
	want := map[string]uint32{"reviews.default.svc.cluster.local": 0, "west.gw.example.com": 1, "198.51.100.7": 2}
	vd := meshplaneObject(t, "vd-locality-failover", "virtualDestinations", "reviews-local")
	check := vd.on(t, "cluster "+c.GetName(), c)
	check.equal("spec.localized.destinationSelectors, .failoverDirectives", "load_assignment.endpoints[].priority by endpoint", fmt.Sprint(prio), fmt.Sprint(want))
	od := c.GetOutlierDetection()
	check.equal("spec.localized.outlierDetection.consecutiveErrors", "cluster.outlier_detection.consecutive_5xx", od.GetConsecutive_5Xx().GetValue(), uint32(3))
	check.equal("spec.localized.outlierDetection.interval", "cluster.outlier_detection.interval", od.GetInterval().AsDuration(), 5*time.Second)

	// spec.port.protocol http: an HTTP route for the hostname.
	rcs, err := ads.Routes("9080")
	if err != nil {
		t.Fatal(err)
	}
	vh := istiotest.VirtualHost(rcs["9080"], "reviews.mesh.internal")
	check.that("spec.hostname, spec.port (9080, http)", "route configuration 9080 virtual host for reviews.mesh.internal", vh != nil && len(vh.GetRoutes()) > 0 &&
		vh.GetRoutes()[0].GetRoute().GetCluster() == c.GetName(), vh, "a route to "+c.GetName())

	gatewayHasLocalEndpoints(t, m, 9080, "reviews.mesh.internal")
}

// The same for a VirtualDestination that a TrafficPolicy shifts traffic
// to; and the sidecar's route for /v2 of reviews goes 80:20 to the
// VirtualDestination's host and reviews.
func TestTrafficShiftVirtualDestinationGatewayEndpoints(t *testing.T) {
	const c = "traffic-shift-virtual-destination"
	b := newBookinfo("default")
	m := b.start(t, c, "east", "cluster.local")
	gatewayHasLocalEndpoints(t, m, 9080, "reviews.global")

	tp := meshplaneObject(t, c, "trafficPolicies", "reviews-to-global")
	reviews := host("reviews", "default")
	_, vh := vsRoutes(t, m, b.productpage, reviews, istiotest.ClusterName(9080, "", "reviews.global"))
	i := slices.IndexFunc(vh.GetRoutes(), func(r *routev3.Route) bool { return r.GetMatch().GetPrefix() == "/v2" })
	check := tp.on(t, "route 9080, virtual host "+vh.GetName(), vh)
	if i < 0 {
		check.fail("spec.httpRequestMatchers[0].prefix", "route.match.prefix", "no route for /v2")
		return
	}
	check.equal("spec.policy.trafficShift.destinations[0].virtualDestination, [1].kubeService (80:20)", "route.weighted_clusters.clusters",
		weights(vh.GetRoutes()[i]), map[string]uint32{istiotest.ClusterName(9080, "", "reviews.global"): 80, istiotest.ClusterName(9080, "", reviews): 20})
}

// gatewayHasLocalEndpoints checks that the east-west gateway's
// AUTO_PASSTHROUGH cluster for host has the local service, and nothing
// else (a remote gateway there would send traffic on out of the cluster).
func gatewayHasLocalEndpoints(t *testing.T, m *mesh, port int, host string) {
	t.Helper()
	gw := istiotest.Proxy{Type: "router", IP: "10.9.0.30", Name: "istio-eastwestgateway-1", Namespace: "istio-system",
		Labels: map[string]string{"istio": "eastwestgateway"}, Region: "us-east-1", Zone: "us-east-1a", RouterMode: "sni-dnat"}
	_, gcs := m.clusters(t, gw)
	name := sniName(port, host)
	sni := cluster(t, gcs, name)
	logProto(t, "east-west gateway cluster "+name+" load assignment", sni.GetLoadAssignment())
	got := istiotest.Flatten(sni.GetLoadAssignment())
	if !slices.ContainsFunc(got, func(e istiotest.Endpoint) bool {
		return e.Address == "reviews.default.svc.cluster.local" && e.Port == 9080
	}) {
		t.Errorf("gateway cluster %s endpoints %q, want reviews.default.svc.cluster.local:9080", name, endpointsString(got))
	}
	for _, e := range got {
		if e.Address != "reviews.default.svc.cluster.local" {
			t.Errorf("gateway cluster %s has the remote endpoint %s", name, e)
		}
	}
}

// Federation: the east-west gateway of the server cluster sends to the
// pods' target port (8080), not the service port (9080); the client
// cluster checks the server's identities (its service accounts, in the
// server mesh's trust domain).
func TestFederationTargetPortAndSubjectAltNames(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		m := startMesh(t, "federation-identity-ports", "east", "east.local",
			pod{namespace: "default", name: "reviews-v1-1", ip: "10.1.0.11", serviceAccount: "reviews",
				labels: map[string]string{"app": "reviews", "version": "v1"}, containerPort: 8080})
		gw := istiotest.Proxy{Type: "router", IP: "10.1.0.30", Name: "istio-eastwestgateway-1", Namespace: "istio-system",
			Labels: map[string]string{"istio": "eastwestgateway"}, RouterMode: "sni-dnat"}
		name := "outbound_.9080_._.reviews.default.svc.east.global"
		eventually(t, "the gateway's endpoints of "+name, func() string {
			la := m.endpoints(t, gw, name)
			got := istiotest.Flatten(la)
			if len(got) == 1 && got[0].Address == "10.1.0.11" && got[0].Port == 8080 {
				logProto(t, "east-west gateway endpoints of "+name, la)
				return ""
			}
			return fmt.Sprintf("endpoints %q, want 10.1.0.11:8080", endpointsString(got))
		})
	})
	t.Run("client", func(t *testing.T) {
		m := startMesh(t, "federation-identity-ports", "west", "west.local")
		_, cs := m.clusters(t, istiotest.Proxy{IP: "10.2.0.20", Name: "productpage-v1", Namespace: "default",
			Labels: map[string]string{"app": "productpage"}})
		c := cluster(t, cs, "outbound|9080||reviews.default.svc.east.global")
		tls, err := istiotest.UpstreamTLS(c)
		if err != nil || tls == nil {
			t.Fatalf("no upstream TLS on the federated cluster (%v)", err)
		}
		logProto(t, "client cluster outbound|9080||reviews.default.svc.east.global TLS context", tls)
		sans, err := istiotest.MatchSubjectAltNames(c)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"spiffe://east.local/ns/default/sa/reviews", "spiffe://east.local/ns/default/sa/reviews-v2"}
		slices.Sort(sans)
		if strings.Join(sans, ",") != strings.Join(want, ",") {
			t.Errorf("matchSubjectAltNames %v, want %v", sans, want)
		}
		if got := tls.GetSni(); got != sniName(9080, "reviews.default.svc.east.global") {
			t.Errorf("SNI %q", got)
		}
	})
}

// sniName is the SNI (and gateway cluster name) Istio gives port of host.
func sniName(port int, host string) string { return fmt.Sprintf("outbound_.%d_._.%s", port, host) }
