package istiotest

import (
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rbacnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The helpers pick the chains of a port out of an inbound listener shaped
// as istiod builds it, and decode their HCM, HTTP and network RBAC.
func TestInboundListenerHelpers(t *testing.T) {
	allow := &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{"p": {}}}
	hcm := &hcmv3.HttpConnectionManager{HttpFilters: []*hcmv3.HttpFilter{
		{Name: FilterHTTPRBAC, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &rbachttpv3.RBAC{Rules: allow})}},
		{Name: "envoy.filters.http.router"},
	}}
	chain := func(port uint32, transport string, f *listenerv3.Filter) *listenerv3.FilterChain {
		m := &listenerv3.FilterChainMatch{TransportProtocol: transport}
		if port != 0 {
			m.DestinationPort = wrapperspb.UInt32(port)
		}
		return &listenerv3.FilterChain{Name: transport, FilterChainMatch: m, Filters: []*listenerv3.Filter{f}}
	}
	httpFilter := &listenerv3.Filter{Name: FilterHCM, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, hcm)}}
	tcpFilter := &listenerv3.Filter{Name: FilterNetworkRBAC, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &rbacnetv3.RBAC{Rules: allow})}}
	ls := map[string]*listenerv3.Listener{VirtualInbound: {Name: VirtualInbound, FilterChains: []*listenerv3.FilterChain{
		chain(8080, "tls", httpFilter), chain(8080, "raw_buffer", httpFilter), chain(0, "tls", tcpFilter), chain(9090, "tls", httpFilter),
	}}}

	chains, err := InboundChains(ls, 8080)
	if err != nil || len(chains) != 2 {
		t.Fatalf("InboundChains(8080) = %d chains, %v; want 2", len(chains), err)
	}
	if got := TransportProtocols(chains); !slices.Equal(got, []string{"raw_buffer", "tls"}) {
		t.Errorf("TransportProtocols = %v", got)
	}
	if _, err := InboundChains(ls, 7070); err == nil {
		t.Error("no error for a port without chains")
	}
	rs, err := HTTPRBAC(chains[0])
	if err != nil || len(rs) != 1 || !proto.Equal(rs[0].GetRules(), allow) {
		t.Errorf("HTTPRBAC = %v, %v", rs, err)
	}
	if _, err := HTTPFilters(chain(0, "tls", tcpFilter)); err == nil {
		t.Error("HTTPFilters of a TCP chain: no error")
	}
	tcp, _ := InboundChains(ls, 0)
	nr, err := NetworkRBAC(tcp[0])
	if err != nil || len(nr) != 1 || !proto.Equal(nr[0].GetRules(), allow) {
		t.Errorf("NetworkRBAC = %v, %v", nr, err)
	}
}

func TestRouteAndClusterNames(t *testing.T) {
	if got := ClusterName(9080, "version-v2", "reviews.default.svc.cluster.local"); got != "outbound|9080|version-v2|reviews.default.svc.cluster.local" {
		t.Errorf("ClusterName = %s", got)
	}
	rc := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{
		{Name: "a", Domains: []string{"a.default.svc.cluster.local", "a"}},
		{Name: "b", Domains: []string{"b.default.svc.cluster.local"}},
	}}
	if vh := VirtualHost(rc, "b.default.svc.cluster.local"); vh.GetName() != "b" {
		t.Errorf("VirtualHost = %v", vh)
	}
	if vh := VirtualHost(rc, "c"); vh != nil {
		t.Errorf("VirtualHost of an unknown host = %v", vh)
	}
}
