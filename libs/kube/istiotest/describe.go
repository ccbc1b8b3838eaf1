package istiotest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// DescribeVirtualHost says, a route a paragraph, what Envoy does with the
// requests of a virtual host: the match, where they go (clusters and
// weights), the timeout, the retries, and which other features the route
// has (fault injection, mirrors, CORS, header changes).
func DescribeVirtualHost(vh *routev3.VirtualHost) string {
	var b strings.Builder
	fmt.Fprintf(&b, "virtual host %s (domains %s)\n", vh.GetName(), strings.Join(vh.GetDomains(), ", "))
	for i, r := range vh.GetRoutes() {
		name := ""
		if r.GetName() != "" {
			name = fmt.Sprintf(" (%s)", r.GetName())
		}
		fmt.Fprintf(&b, "  route %d%s, match %s\n", i+1, name, describeMatch(r.GetMatch()))
		ra := r.GetRoute()
		if ra == nil {
			fmt.Fprintf(&b, "    no upstream (a redirect or a direct response)\n")
			continue
		}
		if wc := ra.GetWeightedClusters(); wc != nil {
			var parts []string
			for _, c := range wc.GetClusters() {
				parts = append(parts, fmt.Sprintf("%s weight %d", c.GetName(), c.GetWeight().GetValue()))
			}
			fmt.Fprintf(&b, "    to %s\n", strings.Join(parts, ", "))
		} else {
			fmt.Fprintf(&b, "    to %s\n", ra.GetCluster())
		}
		if ra.GetTimeout() != nil && ra.GetTimeout().AsDuration() > 0 {
			fmt.Fprintf(&b, "    timeout %v\n", ra.GetTimeout().AsDuration())
		} else {
			fmt.Fprintf(&b, "    timeout none\n")
		}
		if rp := ra.GetRetryPolicy(); rp != nil && rp.GetNumRetries().GetValue() > 0 {
			fmt.Fprintf(&b, "    retries %d", rp.GetNumRetries().GetValue())
			if rp.GetPerTryTimeout() != nil {
				fmt.Fprintf(&b, ", per try timeout %v", rp.GetPerTryTimeout().AsDuration())
			}
			fmt.Fprintf(&b, ", on %s\n", rp.GetRetryOn())
		} else {
			fmt.Fprintf(&b, "    retries none\n")
		}
		more := slices.Sorted(maps.Keys(r.GetTypedPerFilterConfig()))
		if len(ra.GetRequestMirrorPolicies()) > 0 {
			more = append(more, "request mirror")
		}
		if len(r.GetRequestHeadersToAdd())+len(r.GetRequestHeadersToRemove())+len(r.GetResponseHeadersToAdd())+len(r.GetResponseHeadersToRemove()) > 0 {
			more = append(more, "header changes")
		}
		if len(more) > 0 {
			fmt.Fprintf(&b, "    also %s\n", strings.Join(more, ", "))
		}
	}
	return b.String()
}

func describeMatch(m *routev3.RouteMatch) string {
	var parts []string
	switch {
	case m.GetPrefix() != "":
		parts = append(parts, fmt.Sprintf("prefix %q", m.GetPrefix()))
	case m.GetPath() != "":
		parts = append(parts, fmt.Sprintf("path %q", m.GetPath()))
	case m.GetSafeRegex() != nil:
		parts = append(parts, fmt.Sprintf("regex %q", m.GetSafeRegex().GetRegex()))
	case m.GetPathSeparatedPrefix() != "":
		parts = append(parts, fmt.Sprintf("path prefix %q", m.GetPathSeparatedPrefix()))
	}
	for _, h := range m.GetHeaders() {
		parts = append(parts, "header "+h.GetName())
	}
	if len(parts) == 0 {
		return "any"
	}
	return strings.Join(parts, ", ")
}
