package istiotest

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// UpstreamTLS returns the TLS context of a cluster's transport socket,
// whether set directly or as the tls-mode match of Istio's auto mTLS, or
// nil when the cluster has none.
func UpstreamTLS(c *clusterv3.Cluster) (*tlsv3.UpstreamTlsContext, error) {
	sockets := []*clusterv3.Cluster_TransportSocketMatch{}
	if ts := c.GetTransportSocket(); ts != nil {
		sockets = append(sockets, &clusterv3.Cluster_TransportSocketMatch{TransportSocket: ts})
	}
	sockets = append(sockets, c.GetTransportSocketMatches()...)
	for _, m := range sockets {
		tc := m.GetTransportSocket().GetTypedConfig()
		if tc == nil || tc.GetTypeUrl() != "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext" {
			continue
		}
		u := &tlsv3.UpstreamTlsContext{}
		if err := tc.UnmarshalTo(u); err != nil {
			return nil, fmt.Errorf("istiotest: decode TLS context of %s: %w", c.GetName(), err)
		}
		return u, nil
	}
	return nil, nil
}

// MatchSubjectAltNames returns the exact SAN matches that the cluster's
// TLS context checks the server's certificate against.
func MatchSubjectAltNames(c *clusterv3.Cluster) ([]string, error) {
	u, err := UpstreamTLS(c)
	if err != nil || u == nil {
		return nil, err
	}
	var out []string
	vc := u.GetCommonTlsContext().GetCombinedValidationContext().GetDefaultValidationContext()
	if vc == nil {
		vc = u.GetCommonTlsContext().GetValidationContext()
	}
	//lint:ignore SA1019 istiod may still write the deprecated field; both are read
	for _, m := range vc.GetMatchSubjectAltNames() {
		out = append(out, m.GetExact())
	}
	for _, m := range vc.GetMatchTypedSubjectAltNames() {
		out = append(out, m.GetMatcher().GetExact())
	}
	return out, nil
}
