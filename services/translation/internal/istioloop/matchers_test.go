package istioloop

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// matchText is a route's match as text: the path, then each header and
// query parameter condition, e.g. "prefix /a; header x-canary exact true".
func matchText(m *routev3.RouteMatch) string {
	var parts []string
	switch {
	case m.GetPath() != "":
		parts = append(parts, "exact "+m.GetPath())
	case m.GetSafeRegex() != nil:
		parts = append(parts, "regex "+m.GetSafeRegex().GetRegex())
	case m.GetPathSeparatedPrefix() != "":
		parts = append(parts, "path-separated-prefix "+m.GetPathSeparatedPrefix())
	default:
		parts = append(parts, "prefix "+m.GetPrefix())
	}
	for _, h := range m.GetHeaders() {
		s := "header " + h.GetName()
		if h.GetInvertMatch() {
			s = "header !" + h.GetName()
		}
		switch {
		case h.GetPresentMatch():
			s += " present"
		case h.GetStringMatch() != nil:
			s += " " + stringMatcherText(h.GetStringMatch())
		default:
			s += fmt.Sprintf(" %v", h.GetHeaderMatchSpecifier())
		}
		parts = append(parts, s)
	}
	for _, q := range m.GetQueryParameters() {
		s := "query " + q.GetName()
		switch {
		case q.GetPresentMatch():
			s += " present"
		case q.GetStringMatch() != nil:
			s += " " + stringMatcherText(q.GetStringMatch())
		default:
			s += " (no condition)"
		}
		parts = append(parts, s)
	}
	slices.Sort(parts[1:])
	return strings.Join(parts, "; ")
}

func stringMatcherText(s *matcherv3.StringMatcher) string {
	switch p := s.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return "exact " + p.Exact
	case *matcherv3.StringMatcher_Prefix:
		return "prefix " + p.Prefix
	case *matcherv3.StringMatcher_SafeRegex:
		return "regex " + p.SafeRegex.GetRegex()
	}
	return fmt.Sprint(s)
}

// routeIndex returns the index of the route of vh whose timeout is d
// (each policy of the case sets its own), or -1.
func routeIndex(vh *routev3.VirtualHost, d time.Duration) int {
	return slices.IndexFunc(vh.GetRoutes(), func(r *routev3.Route) bool {
		return r.GetRoute().GetTimeout().AsDuration() == d && d != 0
	})
}

// Request matchers and their order (golden case route-ordering): six
// policies on reviews, each with its own timeout so that its route can be
// told; Envoy takes the first route that matches, so the more specific
// must come first: exact, regex, the longer prefix, then prefixes with
// more conditions, then the catch-all.
func TestRequestMatchersAndOrderOnEnvoy(t *testing.T) {
	const c = "route-ordering"
	b := newBookinfo("default")
	m := b.start(t, c, "east", "cluster.local")
	_, vh := vsRoutes(t, m, b.productpage, host("reviews", "default"))
	for i, w := range []struct {
		policy, field string
		timeout       time.Duration
		match         string
	}{
		{"route-exact", "spec.httpRequestMatchers[0].exact", 5 * time.Second, "exact /a/b/c"},
		{"route-regex", "spec.httpRequestMatchers[0].regex", 3 * time.Second, "regex /a/[0-9]+"},
		{"route-prefix-ab", "spec.httpRequestMatchers[0].prefix", 4 * time.Second, "prefix /a/b"},
		{"route-headers", "spec.httpRequestMatchers[0].prefix, .headers (value; invertMatch without value)", 2 * time.Second,
			"prefix /a; header !x-debug present; header x-canary exact true"},
		{"route-query", "spec.httpRequestMatchers[0].prefix, .queryParameters, .method", 6 * time.Second,
			"prefix /a; header :method exact GET; query v exact 2"},
		{"route-prefix-a", "spec.httpRequestMatchers[0].prefix", 1 * time.Second, "prefix /a"},
	} {
		tp := meshplaneObject(t, c, "trafficPolicies", w.policy)
		check := tp.on(t, "virtual host "+vh.GetName(), vh)
		at := routeIndex(vh, w.timeout)
		if at < 0 {
			check.fail("spec.policy.requestTimeout", "route.timeout", fmt.Sprintf("no route with timeout %v", w.timeout))
			continue
		}
		check.equal(w.field+" (the order of matchers across policies)", "index in virtual_hosts.routes", at, i)
		check.equal(w.field, fmt.Sprintf("routes[%d].match", at), matchText(vh.GetRoutes()[at].GetMatch()), w.match)
	}
	last := vh.GetRoutes()[len(vh.GetRoutes())-1]
	object{desc: "route-ordering (all policies)", yaml: "(see the golden case)\n"}.on(t, "virtual host "+vh.GetName(), vh).equal(
		"(requests no matcher takes)", "the last route's match", matchText(last.GetMatch()), "prefix /")
}

// Source selectors (golden case source-selector) become route conditions
// on the client's labels and namespace, which Istio evaluates when it
// builds a sidecar's routes: a client that a selector picks gets the
// policy's route, another does not.
func TestSourceSelectorOnEnvoy(t *testing.T) {
	const c = "source-selector"
	b := newBookinfo("default")
	details := pod{namespace: "default", name: "details-v1-1", ip: "10.1.0.15", serviceAccount: "details",
		labels: map[string]string{"app": "details", "version": "v1"}, containerPort: 8080}
	shop := pod{namespace: "shop", name: "cart-1", ip: "10.1.0.16", serviceAccount: "cart",
		labels: map[string]string{"app": "cart"}, containerPort: 8080}
	other := pod{namespace: "other", name: "productpage-v1-1", ip: "10.1.0.17", serviceAccount: "productpage",
		labels: map[string]string{"app": "productpage", "version": "v1"}, containerPort: 8080}
	m := b.start(t, c, "east", "cluster.local", details, shop, other)
	reviews, ratings := host("reviews", "default"), host("ratings", "default")
	fromProductpage := meshplaneObject(t, c, "trafficPolicies", "from-productpage")
	fromShop := meshplaneObject(t, c, "trafficPolicies", "from-anyone-in-shop-or-west")

	for _, w := range []struct {
		client  pod
		host    string
		policy  object
		field   string
		applies bool
	}{
		{b.productpage, reviews, fromProductpage, "spec.sourceSelector[0] (labels app=productpage, namespaces [default])", true},
		{b.ratingsV1, reviews, fromProductpage, "spec.sourceSelector[1] (labels app=ratings)", true},
		{details, reviews, fromProductpage, "spec.sourceSelector (app=details is in neither)", false},
		{other, reviews, fromProductpage, "spec.sourceSelector[0].kubeWorkloadMatcher.namespaces (productpage in namespace other)", false},
		{shop, ratings, fromShop, "spec.sourceSelector[1].kubeWorkloadMatcher.namespaces (shop)", true},
		{details, ratings, fromShop, "spec.sourceSelector[1].kubeWorkloadMatcher.namespaces (default)", true},
		{other, ratings, fromShop, "spec.sourceSelector (namespace other is in neither; cluster west is not this one)", false},
	} {
		x := m.fetch(t, w.client.proxy(), []string{"9080"}, func(x *xds) string {
			if _, why := x.vhost(w.host, 9080); why != "" {
				return why
			}
			// The catch-all route of the VirtualService is there for
			// every client.
			vh, _ := x.vhost(w.host, 9080)
			if !slices.ContainsFunc(vh.GetRoutes(), fromVirtualService) {
				return "no route of " + w.host + " comes from a VirtualService yet"
			}
			return ""
		})
		vh, _ := x.vhost(w.host, 9080)
		// The policy's route is told by its field: retries (4 attempts)
		// for reviews, a 3s timeout for ratings. (A route whose matches
		// are all on the source, when the client matches, is a
		// catch-all to Istio: the VirtualService's own catch-all after it
		// is dropped.)
		got := slices.ContainsFunc(vh.GetRoutes(), func(r *routev3.Route) bool {
			return r.GetRoute().GetRetryPolicy().GetNumRetries().GetValue() == 4 || r.GetRoute().GetTimeout().AsDuration() == 3*time.Second
		})
		want := "a route with the policy's retries or timeout"
		if !w.applies {
			want = "no route with the policy's retries or timeout"
		}
		w.policy.on(t, w.client.namespace+"/"+w.client.name+"'s virtual host "+vh.GetName(), vh).that(
			w.field, "virtual_hosts.routes (Istio keeps a route whose source_labels/source_namespace match the client)",
			got == w.applies, fmt.Sprintf("%d routes", len(vh.GetRoutes())), want)
		if w.client.name == b.productpage.name && w.client.namespace == b.productpage.namespace {
			// from-west-only (a 2s timeout for clients in cluster west) has
			// no route in east.
			fromWest := meshplaneObject(t, c, "trafficPolicies", "from-west-only")
			fromWest.on(t, "productpage's virtual host "+vh.GetName(), vh).that("spec.sourceSelector[0].kubeWorkloadMatcher.clusters (west)",
				"virtual_hosts.routes (none with the policy's 2s timeout in east)", routeIndex(vh, 2*time.Second) < 0, routeIndex(vh, 2*time.Second), "no such route")
		}
		x.ads.Close()
	}
}
