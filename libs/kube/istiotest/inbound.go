package istiotest

import (
	"fmt"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// hcmTypeURL is the type of the HTTP connection manager's config.
const hcmTypeURL = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"

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
				if hf.GetName() != FilterHTTPRBAC {
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
