package istiotest

import (
	"fmt"
	"slices"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbachttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rbacnetv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
)

// Type URLs of the listener and extension-config (ECDS) resources.
const (
	TypeListener        = "type.googleapis.com/envoy.config.listener.v3.Listener"
	TypeExtensionConfig = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
)

// Names Istio gives a sidecar's listener for inbound traffic and the
// filters it puts in it.
const (
	VirtualInbound    = "virtualInbound"
	FilterHCM         = "envoy.filters.network.http_connection_manager"
	FilterHTTPRBAC    = "envoy.filters.http.rbac"
	FilterNetworkRBAC = "envoy.filters.network.rbac"
)

// Listeners asks for LDS and returns the listeners by name.
func (a *ADS) Listeners() (map[string]*listenerv3.Listener, error) {
	resp, err := a.request(TypeListener, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]*listenerv3.Listener{}
	for _, r := range resp.GetResources() {
		l := &listenerv3.Listener{}
		if err := r.UnmarshalTo(l); err != nil {
			return nil, fmt.Errorf("istiotest: decode listener: %w", err)
		}
		out[l.GetName()] = l
	}
	return out, nil
}

// ExtensionConfigs asks for ECDS of the named filter configurations (as
// an HTTP filter's config_discovery names them) and returns them by name.
func (a *ADS) ExtensionConfigs(names ...string) (map[string]*corev3.TypedExtensionConfig, error) {
	resp, err := a.request(TypeExtensionConfig, names)
	if err != nil {
		return nil, err
	}
	out := map[string]*corev3.TypedExtensionConfig{}
	for _, r := range resp.GetResources() {
		c := &corev3.TypedExtensionConfig{}
		if err := r.UnmarshalTo(c); err != nil {
			return nil, fmt.Errorf("istiotest: decode extension config: %w", err)
		}
		out[c.GetName()] = c
	}
	return out, nil
}

// Route asks for the route configuration of port (a sidecar's outbound
// HTTP routes are named by port) and returns the virtual host that serves
// host there: the route for host:port.
func (a *ADS) Route(host string, port uint32) (*routev3.VirtualHost, error) {
	name := strconv.FormatUint(uint64(port), 10)
	rcs, err := a.Routes(name)
	if err != nil {
		return nil, err
	}
	rc, ok := rcs[name]
	if !ok {
		return nil, fmt.Errorf("istiotest: no route configuration %s", name)
	}
	vh := VirtualHost(rc, host)
	if vh == nil {
		var names []string
		for _, v := range rc.GetVirtualHosts() {
			names = append(names, v.GetName())
		}
		return nil, fmt.Errorf("istiotest: route configuration %s has no virtual host for %s among %v", name, host, names)
	}
	return vh, nil
}

// VirtualHost returns the virtual host of rc with host among its domains,
// or nil.
func VirtualHost(rc *routev3.RouteConfiguration, host string) *routev3.VirtualHost {
	for _, vh := range rc.GetVirtualHosts() {
		if slices.Contains(vh.GetDomains(), host) {
			return vh
		}
	}
	return nil
}

// ClusterName is the name Istio gives the outbound cluster for port of
// host, of subset when not empty: outbound|<port>|<subset>|<host>.
func ClusterName(port uint32, subset, host string) string {
	return fmt.Sprintf("outbound|%d|%s|%s", port, subset, host)
}

// SubsetCluster returns the cluster for subset of host:port among
// clusters: the cluster for a subset.
func SubsetCluster(clusters map[string]*clusterv3.Cluster, host string, port uint32, subset string) (*clusterv3.Cluster, error) {
	name := ClusterName(port, subset, host)
	c, ok := clusters[name]
	if !ok {
		return nil, fmt.Errorf("istiotest: no cluster %s", name)
	}
	return c, nil
}

// ClusterEndpoints asks for EDS of cluster name and returns its
// endpoints, flattened: the endpoints of a cluster.
func (a *ADS) ClusterEndpoints(name string) ([]Endpoint, error) {
	las, err := a.Endpoints(name)
	if err != nil {
		return nil, err
	}
	la, ok := las[name]
	if !ok {
		return nil, fmt.Errorf("istiotest: no load assignment for %s", name)
	}
	return Flatten(la), nil
}

// InboundChains returns the filter chains of a sidecar's inbound
// listener (virtualInbound) for destination port, the pod's port; port 0
// gives the chains that match any port (the passthrough chains).
func InboundChains(listeners map[string]*listenerv3.Listener, port uint32) ([]*listenerv3.FilterChain, error) {
	l, ok := listeners[VirtualInbound]
	if !ok {
		return nil, fmt.Errorf("istiotest: no listener %s", VirtualInbound)
	}
	var out []*listenerv3.FilterChain
	for _, fc := range l.GetFilterChains() {
		if fc.GetFilterChainMatch().GetDestinationPort().GetValue() == port {
			out = append(out, fc)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("istiotest: listener %s has no filter chain for port %d", VirtualInbound, port)
	}
	return out, nil
}

// TransportProtocols returns the transport protocols the chains accept
// ("tls", "raw_buffer"), sorted and without duplicates: a port that takes
// "tls" alone requires mTLS.
func TransportProtocols(chains []*listenerv3.FilterChain) []string {
	var out []string
	for _, fc := range chains {
		p := fc.GetFilterChainMatch().GetTransportProtocol()
		if p == "" {
			p = "any"
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// HCM returns the HTTP connection manager of a filter chain, or nil when
// it has none (a TCP chain).
func HCM(fc *listenerv3.FilterChain) (*hcmv3.HttpConnectionManager, error) {
	for _, f := range fc.GetFilters() {
		if f.GetName() != FilterHCM {
			continue
		}
		h := &hcmv3.HttpConnectionManager{}
		if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
			return nil, fmt.Errorf("istiotest: decode the HTTP connection manager of chain %s: %w", fc.GetName(), err)
		}
		return h, nil
	}
	return nil, nil
}

// HTTPFilters returns the HTTP filters of a chain's connection manager,
// in order: the HTTP filters of the inbound listener.
func HTTPFilters(fc *listenerv3.FilterChain) ([]*hcmv3.HttpFilter, error) {
	h, err := HCM(fc)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("istiotest: chain %s has no HTTP connection manager", fc.GetName())
	}
	return h.GetHttpFilters(), nil
}

// HTTPRBAC returns the RBAC configs of a chain's HTTP filters, in filter
// order (Istio puts DENY before ALLOW): the RBAC policies of an HTTP
// inbound chain.
func HTTPRBAC(fc *listenerv3.FilterChain) ([]*rbachttpv3.RBAC, error) {
	filters, err := HTTPFilters(fc)
	if err != nil {
		return nil, err
	}
	var out []*rbachttpv3.RBAC
	for _, f := range filters {
		if f.GetName() != FilterHTTPRBAC {
			continue
		}
		r := &rbachttpv3.RBAC{}
		if err := f.GetTypedConfig().UnmarshalTo(r); err != nil {
			return nil, fmt.Errorf("istiotest: decode %s of chain %s: %w", f.GetName(), fc.GetName(), err)
		}
		out = append(out, r)
	}
	return out, nil
}

// NetworkRBAC returns the RBAC configs of a chain's network filters, in
// order: the RBAC policies of a TCP chain.
func NetworkRBAC(fc *listenerv3.FilterChain) ([]*rbacnetv3.RBAC, error) {
	var out []*rbacnetv3.RBAC
	for _, f := range fc.GetFilters() {
		if f.GetName() != FilterNetworkRBAC {
			continue
		}
		r := &rbacnetv3.RBAC{}
		if err := f.GetTypedConfig().UnmarshalTo(r); err != nil {
			return nil, fmt.Errorf("istiotest: decode %s of chain %s: %w", f.GetName(), fc.GetName(), err)
		}
		out = append(out, r)
	}
	return out, nil
}
