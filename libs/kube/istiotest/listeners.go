package istiotest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// More type URLs, and the names Istio gives what tests look for.
const (
	TypeListener = "type.googleapis.com/envoy.config.listener.v3.Listener"
	// VirtualInbound is the sidecar's listener for inbound traffic: one
	// filter chain (or more) per port of the pod.
	VirtualInbound = "virtualInbound"
	// RBACFilter is the name of Envoy's HTTP RBAC filter, the
	// AuthorizationPolicies of the proxy.
	RBACFilter = "envoy.filters.http.rbac"
	hcmTypeURL = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
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

// AwaitRoutes waits until istiod's route configuration name satisfies ok,
// and returns it with the time it arrived. Unless the stream holds it
// already (from Routes or an earlier AwaitRoutes of name alone), it asks
// for it; then it checks each push of it, which istiod sends when its
// config changes. After timeout it gives up and closes the stream,
// returning the last configuration seen and an error.
func (a *ADS) AwaitRoutes(name string, timeout time.Duration, ok func(*routev3.RouteConfiguration) bool) (*routev3.RouteConfiguration, time.Time, error) {
	timer := time.AfterFunc(timeout, a.Close)
	defer timer.Stop()
	names := []string{name}
	subscribed := slices.Equal(a.routeNames, names)
	last := a.routes[name]
	if subscribed && last != nil && ok(last) {
		return last, time.Now(), nil
	}
	for {
		var resp *discoveryv3.DiscoveryResponse
		var err error
		if subscribed {
			resp, err = a.receive(TypeRoute, names)
		} else {
			resp, err = a.request(TypeRoute, names)
			a.routeNames, subscribed = names, true
		}
		at := time.Now()
		if err != nil {
			return last, at, fmt.Errorf("istiotest: route configuration %s: no push that satisfies the condition within %v: %w", name, timeout, err)
		}
		rcs, err := a.decodeRoutes(resp)
		if err != nil {
			return last, at, err
		}
		if rc, found := rcs[name]; found {
			last = rc
			if ok(rc) {
				return rc, at, nil
			}
		}
	}
}

// VirtualHost returns the virtual host of rc that serves domain, or nil.
func VirtualHost(rc *routev3.RouteConfiguration, domain string) *routev3.VirtualHost {
	for _, vh := range rc.GetVirtualHosts() {
		if slices.Contains(vh.GetDomains(), domain) {
			return vh
		}
	}
	return nil
}

// InboundRBAC returns the RBAC filters of the HTTP filter chains of l (a
// sidecar's virtualInbound listener) that serve port, one per chain
// (Istio builds a chain for mTLS and one for plain text).
func InboundRBAC(l *listenerv3.Listener, port uint32) ([]*rbacv3.RBAC, error) {
	var out []*rbacv3.RBAC
	for _, fc := range l.GetFilterChains() {
		if fc.GetFilterChainMatch().GetDestinationPort().GetValue() != port {
			continue
		}
		for _, f := range fc.GetFilters() {
			tc := f.GetTypedConfig()
			if tc.GetTypeUrl() != hcmTypeURL {
				continue
			}
			hcm := &hcmv3.HttpConnectionManager{}
			if err := tc.UnmarshalTo(hcm); err != nil {
				return nil, fmt.Errorf("istiotest: decode the connection manager of %s port %d: %w", l.GetName(), port, err)
			}
			for _, hf := range hcm.GetHttpFilters() {
				if hf.GetName() != RBACFilter {
					continue
				}
				r := &rbacv3.RBAC{}
				if err := hf.GetTypedConfig().UnmarshalTo(r); err != nil {
					return nil, fmt.Errorf("istiotest: decode the RBAC filter of %s port %d: %w", l.GetName(), port, err)
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// DescribeChains lists the filter chains of l, for failure messages: name,
// destination port, and the network filters, with the HTTP filters of a
// connection manager in brackets.
func DescribeChains(l *listenerv3.Listener) string {
	var chains []string
	for _, fc := range l.GetFilterChains() {
		var filters []string
		for _, f := range fc.GetFilters() {
			name := f.GetName()
			hcm := &hcmv3.HttpConnectionManager{}
			if f.GetTypedConfig().GetTypeUrl() == hcmTypeURL && f.GetTypedConfig().UnmarshalTo(hcm) == nil {
				var hfs []string
				for _, hf := range hcm.GetHttpFilters() {
					hfs = append(hfs, hf.GetName())
				}
				name += "[" + strings.Join(hfs, " ") + "]"
			}
			filters = append(filters, name)
		}
		chains = append(chains, fmt.Sprintf("%s port %d: %s", fc.GetName(), fc.GetFilterChainMatch().GetDestinationPort().GetValue(), strings.Join(filters, ", ")))
	}
	return strings.Join(chains, "; ")
}
