package istiotest

import (
	"fmt"
	"slices"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
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
