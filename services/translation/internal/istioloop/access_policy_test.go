package istioloop

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	"github.com/meshplane/meshplane/libs/kube/istiotest"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
)

// principalText renders an RBAC principal: its leaves, with and/or/not
// around several.
func principalText(p *rbacv3.Principal) string {
	switch id := p.GetIdentifier().(type) {
	case *rbacv3.Principal_Any:
		return "any"
	case *rbacv3.Principal_AndIds:
		return group("and", id.AndIds.GetIds(), principalText)
	case *rbacv3.Principal_OrIds:
		return group("or", id.OrIds.GetIds(), principalText)
	case *rbacv3.Principal_NotId:
		return "not(" + principalText(id.NotId) + ")"
	case *rbacv3.Principal_Authenticated_:
		return "principal " + stringMatcherText(id.Authenticated.GetPrincipalName())
	}
	return fmt.Sprintf("%v", p)
}

// permissionText renders an RBAC permission the same way.
func permissionText(p *rbacv3.Permission) string {
	switch r := p.GetRule().(type) {
	case *rbacv3.Permission_Any:
		return "any"
	case *rbacv3.Permission_AndRules:
		return group("and", r.AndRules.GetRules(), permissionText)
	case *rbacv3.Permission_OrRules:
		return group("or", r.OrRules.GetRules(), permissionText)
	case *rbacv3.Permission_NotRule:
		return "not(" + permissionText(r.NotRule) + ")"
	case *rbacv3.Permission_Header:
		return "header " + r.Header.GetName() + " " + stringMatcherText(r.Header.GetStringMatch())
	case *rbacv3.Permission_UrlPath:
		return "path " + stringMatcherText(r.UrlPath.GetPath())
	case *rbacv3.Permission_DestinationPort:
		return fmt.Sprintf("port %d", r.DestinationPort)
	}
	return fmt.Sprintf("%v", p)
}

func group[T any](op string, items []T, text func(T) string) string {
	if len(items) == 1 {
		return text(items[0])
	}
	parts := make([]string, 0, len(items))
	for _, it := range items {
		parts = append(parts, text(it))
	}
	return op + "(" + strings.Join(parts, ", ") + ")"
}

// permissionsText renders a policy's permissions (any one may match).
func permissionsText(p *rbacv3.Policy) string {
	return group("or", p.GetPermissions(), permissionText)
}

// conditions splits a policy's permission that is an AND of conditions
// (as Istio builds one per rule: one OR group per field) into the
// conditions.
func conditions(pol *rbacv3.Policy) []string {
	if len(pol.GetPermissions()) != 1 {
		return []string{permissionsText(pol)}
	}
	p := pol.GetPermissions()[0]
	var out []string
	if and := p.GetAndRules(); and != nil {
		for _, r := range and.GetRules() {
			out = append(out, permissionText(r))
		}
		return out
	}
	return []string{permissionText(p)}
}

// condition returns the condition of cs on kind ("header :method",
// "path", "port"), or "" for none.
func condition(cs []string, kind string) string {
	for _, c := range cs {
		if strings.HasPrefix(strings.TrimPrefix(c, "or("), kind+" ") {
			return c
		}
	}
	return ""
}

// principals renders a policy's principals (any one may match), sorted.
func principals(p *rbacv3.Policy) []string {
	var out []string
	for _, id := range p.GetPrincipals() {
		out = append(out, principalText(id))
	}
	slices.Sort(out)
	return out
}

// inboundHTTP waits for the proxy's inbound HTTP chains of port and
// returns the listener and the RBAC configs of its first chain.
func inboundHTTP(t *testing.T, m *mesh, p pod, port uint32) (*xds, []*listenerv3.FilterChain, []*rbacv3.RBAC) {
	t.Helper()
	x := m.fetch(t, p.proxy(), nil, func(x *xds) string {
		_, err := istiotest.InboundChains(x.listeners, port)
		if err != nil {
			return err.Error()
		}
		return ""
	})
	chains, _ := istiotest.InboundChains(x.listeners, port)
	var configs []*rbacv3.RBAC
	rs, err := istiotest.HTTPRBAC(chains[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		configs = append(configs, r.GetRules())
	}
	return x, chains, configs
}

// Access policies (golden case access-policy-global, cluster east, trust
// domain east.local; VirtualMesh global has shared mTLS and global access
// ENABLED) on the RBAC filter of each server's inbound listener.
func TestAccessPolicyOnEnvoy(t *testing.T) {
	const c = "access-policy-global"
	b := newBookinfo("default")
	m := b.start(t, c, "east", "east.local")
	vm := meshplaneObject(t, c, "virtualMeshes", "global")
	const global = "ns[istio-system]-policy[global-access-policy]-rule[0]"

	t.Run("reviews", func(t *testing.T) {
		x, chains, rbacs := inboundHTTP(t, m, b.reviewsV1, 8080)
		l := x.listeners[istiotest.VirtualInbound]
		label := "listener virtualInbound of reviews-v1, chain " + chains[0].GetName()
		vm.on(t, label, l).equal("VirtualMesh spec.mtlsConfig.shared (STRICT PeerAuthentication)",
			"virtualInbound filter_chain_match.transport_protocol of port 8080 (mTLS only)", istiotest.TransportProtocols(chains), []string{"tls"})
		if len(rbacs) != 1 {
			vm.on(t, label, chains[0]).fail("spec.globalAccessPolicy and the AccessPolicies (ALLOW only)", "http_filters "+istiotest.FilterHTTPRBAC,
				fmt.Sprintf("%d RBAC filters, want one", len(rbacs)))
			return
		}
		r := rbacs[0]
		fromPP := meshplaneObject(t, c, "accessPolicies", "reviews-from-productpage")
		fromNS := meshplaneObject(t, c, "accessPolicies", "reviews-from-namespaces")
		vm.on(t, label+" RBAC", r).equal("spec.globalAccessPolicy ENABLED (deny by default)", "RBAC.action and the policy "+global+" (matches nothing)",
			[]string{r.GetAction().String(), permissionsText(r.GetPolicies()[global])}, []string{"ALLOW", "not(any)"})
		vm.on(t, label+" RBAC", r).equal("spec.globalAccessPolicy ENABLED", "RBAC.policies (the AccessPolicies' rules and the deny-by-default one)",
			keys(r.GetPolicies()), []string{"ns[default]-policy[reviews]-rule[0]", "ns[default]-policy[reviews]-rule[1]", global})

		p0 := r.GetPolicies()["ns[default]-policy[reviews]-rule[0]"]
		c0 := fromPP.on(t, label+" RBAC policy ns[default]-policy[reviews]-rule[0]", p0)
		c0.equal("spec.sourceSelector[0].kubeServiceAccountRefs (with clusters east and west)", "policy.principals authenticated.principal_name",
			principals(p0), []string{"or(principal exact spiffe://east.local/ns/default/sa/bookinfo-productpage, principal exact spiffe://east.local/ns/default/sa/nosuch, principal exact spiffe://west.local/ns/default/sa/bookinfo-productpage)"})
		cs := conditions(p0)
		c0.equal("spec.allowedMethods", "policy.permissions header :method", condition(cs, "header :method"), "header :method exact GET")
		c0.equal("spec.allowedPaths (/reviews/*)", "policy.permissions url_path", condition(cs, "path"), "path prefix /reviews/")
		c0.equal("spec.allowedPorts (9080, the service port)", "policy.permissions destination_port (the pod's port)", condition(cs, "port"), "port 8080")

		p1 := r.GetPolicies()["ns[default]-policy[reviews]-rule[1]"]
		c1 := fromNS.on(t, label+" RBAC policy ns[default]-policy[reviews]-rule[1]", p1)
		c1.equal("spec.sourceSelector[*].kubeIdentityMatcher (namespaces; namespaces and clusters)", "policy.principals authenticated.principal_name",
			principals(p1), []string{"principal prefix spiffe://west.local/ns/ops/sa/", "principal regex .*/ns/monitoring/.*"})
		c1.equal("(no allowedPaths, allowedMethods, allowedPorts)", "policy.permissions", permissionsText(p1), "any")

		// TCP: a rule with HTTP conditions (methods, paths) has no
		// meaning there; Istio leaves it out of the network RBAC of the
		// TCP chains, so those sources get no TCP access.
		tcp := tcpChain(x.listeners[istiotest.VirtualInbound])
		if tcp == nil {
			t.Fatal("no TCP catch-all chain in virtualInbound")
		}
		nr, err := istiotest.NetworkRBAC(tcp)
		if err != nil || len(nr) != 1 {
			t.Fatalf("network RBAC of the TCP chain: %d filters (%v)", len(nr), err)
		}
		fromPP.on(t, "listener virtualInbound of reviews-v1, TCP chain "+tcp.GetName(), nr[0]).equal(
			"spec.allowedMethods, spec.allowedPaths (HTTP only)", "network RBAC.policies (the rule is left out for TCP)",
			keys(nr[0].GetRules().GetPolicies()), []string{"ns[default]-policy[reviews]-rule[1]", global})
	})

	t.Run("ratings", func(t *testing.T) {
		_, chains, rbacs := inboundHTTP(t, m, b.ratingsV1, 8080)
		ap := meshplaneObject(t, c, "accessPolicies", "ratings-from-reviews-anywhere")
		label := "listener virtualInbound of ratings-v1, chain " + chains[0].GetName() + " RBAC"
		if len(rbacs) != 1 {
			t.Fatalf("%d RBAC filters, want one", len(rbacs))
		}
		p := rbacs[0].GetPolicies()["ns[default]-policy[ratings]-rule[0]"]
		ap.on(t, label, rbacs[0]).equal("spec.sourceSelector[0].kubeServiceAccountRefs (no cluster: every mesh of the VirtualMesh, each in its trust domain)",
			"policy ns[default]-policy[ratings]-rule[0] principals", principals(p), []string{
				"or(principal exact spiffe://east.local/ns/default/sa/nosuch, principal exact spiffe://east.local/ns/default/sa/reviews, " +
					"principal exact spiffe://west.local/ns/default/sa/nosuch, principal exact spiffe://west.local/ns/default/sa/reviews)"})
	})

	t.Run("productpage", func(t *testing.T) {
		_, chains, rbacs := inboundHTTP(t, m, b.productpage, 8080)
		label := "listener virtualInbound of productpage-v1, chain " + chains[0].GetName() + " RBAC"
		if len(rbacs) != 1 {
			t.Fatalf("%d RBAC filters, want one", len(rbacs))
		}
		vm.on(t, label, rbacs[0]).equal("spec.globalAccessPolicy ENABLED, no AccessPolicy for productpage (deny by default)",
			"RBAC ALLOW policies (only the one that matches nothing)", keys(rbacs[0].GetPolicies()), []string{global})
	})
}

// tcpChain returns the inbound listener's catch-all TCP chain for mTLS
// traffic (no port, transport tls, no HTTP connection manager).
func tcpChain(l *listenerv3.Listener) *listenerv3.FilterChain {
	for _, fc := range l.GetFilterChains() {
		m := fc.GetFilterChainMatch()
		if m.GetDestinationPort() != nil || m.GetTransportProtocol() != "tls" {
			continue
		}
		if h, _ := istiotest.HCM(fc); h == nil && slices.ContainsFunc(fc.GetFilters(), func(f *listenerv3.Filter) bool { return f.GetName() == istiotest.FilterNetworkRBAC }) {
			return fc
		}
	}
	return nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Global access with federation (golden case federation-global-access,
// cluster east, trust domain east.local): deny by default with the
// gateways allowed, and AccessPolicies for clients in another mesh.
func TestGlobalAccessGatewaysOnEnvoy(t *testing.T) {
	const c = "federation-global-access"
	b := newBookinfo("default")
	// The user's own ingress Gateway, so that the ingress gateway has an
	// HTTP listener on which to see the global access policy (Meshplane
	// writes no Gateway for ingress).
	m := startMeshWith(t, c, "east", "east.local", b.pods(), func(kube *kubetest.Cluster) {
		b.services(t, kube, nil)
		ingress := `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: users-ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["*"]
`
		if err := kube.ApplyYAML(t.Context(), []byte(ingress)); err != nil {
			t.Fatal(err)
		}
	})
	vm := meshplaneObject(t, c, "virtualMeshes", "global")
	const global = "ns[istio-system]-policy[global-access-policy]-rule[0]"

	t.Run("ingress gateway", func(t *testing.T) {
		gw := pod{namespace: "istio-system", name: "istio-ingressgateway-1", ip: "10.1.0.31", serviceAccount: "istio-ingressgateway",
			labels: map[string]string{"istio": "ingressgateway"}}
		p := gw.proxy()
		p.Type = "router"
		x := m.fetch(t, p, nil, func(x *xds) string {
			if _, ok := x.listeners["0.0.0.0_8080"]; !ok {
				return "no listener 0.0.0.0_8080"
			}
			return ""
		})
		l := x.listeners["0.0.0.0_8080"]
		rbacs, err := istiotest.HTTPRBAC(l.GetFilterChains()[0])
		if err != nil {
			t.Fatal(err)
		}
		check := vm.on(t, "ingress gateway listener 0.0.0.0_8080", l)
		if len(rbacs) != 1 {
			check.fail("spec.globalAccessPolicy ENABLED", "http_filters "+istiotest.FilterHTTPRBAC, fmt.Sprintf("%d RBAC filters, want one", len(rbacs)))
			return
		}
		pols := rbacs[0].GetRules().GetPolicies()
		allow := "ns[istio-system]-policy[global-access-policy-istio-ingressgateway]-rule[0]"
		check.equal("spec.globalAccessPolicy ENABLED (deny by default, the mesh's gateways allowed)", "RBAC ALLOW policies",
			keys(pols), []string{allow, global})
		check.equal("spec.globalAccessPolicy ENABLED (the gateway's allow policy)", "policy "+allow+" principals and permissions",
			[]string{strings.Join(principals(pols[allow]), " | "), permissionsText(pols[allow])}, []string{"any", "any"})
	})

	t.Run("east-west gateway", func(t *testing.T) {
		p := istiotest.Proxy{Type: "router", IP: "10.1.0.30", Name: "istio-eastwestgateway-1", Namespace: "istio-system",
			Labels: map[string]string{"istio": "eastwestgateway"}, RouterMode: "sni-dnat"}
		x := m.fetch(t, p, nil, func(x *xds) string {
			if _, ok := x.listeners["0.0.0.0_15443"]; !ok {
				return "no listener 0.0.0.0_15443"
			}
			return ""
		})
		l := x.listeners["0.0.0.0_15443"]
		// AUTO_PASSTHROUGH chains forward the TLS stream unopened: istiod
		// puts no RBAC on them, so deny by default does not stop
		// federated traffic at the gateway; the server's sidecar checks
		// the client's own identity.
		for _, fc := range l.GetFilterChains() {
			nr, err := istiotest.NetworkRBAC(fc)
			if err != nil {
				t.Fatal(err)
			}
			vm.on(t, "east-west gateway listener 0.0.0.0_15443 chain "+fc.GetFilterChainMatch().GetServerNames()[0], fc).that(
				"spec.globalAccessPolicy ENABLED, spec.federation", "filters (no "+istiotest.FilterNetworkRBAC+" on an AUTO_PASSTHROUGH chain)",
				len(nr) == 0, filterNames(fc.GetFilters()), "tcp_proxy alone")
		}
	})

	t.Run("reviews", func(t *testing.T) {
		_, chains, rbacs := inboundHTTP(t, m, b.reviewsV1, 8080)
		ap := meshplaneObject(t, c, "accessPolicies", "reviews-from-west-productpage")
		if len(rbacs) != 1 {
			t.Fatalf("%d RBAC filters, want one", len(rbacs))
		}
		p := rbacs[0].GetPolicies()["ns[default]-policy[reviews]-rule[0]"]
		check := ap.on(t, "listener virtualInbound of reviews-v1, chain "+chains[0].GetName()+" RBAC", rbacs[0])
		check.equal("spec.sourceSelector[0].kubeServiceAccountRefs (cluster west: west's trust domain)", "policy ns[default]-policy[reviews]-rule[0] principals",
			principals(p), []string{"principal exact spiffe://west.local/ns/default/sa/bookinfo-productpage"})
		check.equal("spec.allowedPorts (9080, the service port)", "policy ns[default]-policy[reviews]-rule[0] permissions (the pod's port)",
			permissionsText(p), "port 8080")
	})

	t.Run("ratings", func(t *testing.T) {
		_, chains, rbacs := inboundHTTP(t, m, b.ratingsV1, 8080)
		ap := meshplaneObject(t, c, "accessPolicies", "ratings-from-anyone")
		if len(rbacs) != 1 {
			t.Fatalf("%d RBAC filters, want one", len(rbacs))
		}
		p := rbacs[0].GetPolicies()["ns[default]-policy[ratings]-rule[0]"]
		ap.on(t, "listener virtualInbound of ratings-v1, chain "+chains[0].GetName()+" RBAC", rbacs[0]).equal(
			"spec.sourceSelector (empty: every identity), no allowed*", "policy ns[default]-policy[ratings]-rule[0] principals and permissions",
			[]string{strings.Join(principals(p), " | "), permissionsText(p)}, []string{"any", "any"})
	})
}
