package domain

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

// Route-level fields of a TrafficPolicy. Two policies that set the same one
// for the same destination and the same (sources, matchers) conflict.
const (
	fieldRequestTimeout     = "requestTimeout"
	fieldRetries            = "retries"
	fieldFaultInjection     = "faultInjection"
	fieldCorsPolicy         = "corsPolicy"
	fieldMirror             = "mirror"
	fieldHeaderManipulation = "headerManipulation"
	fieldTrafficShift       = "trafficShift"
	// Destination-level fields.
	fieldOutlierDetection = "outlierDetection"
	fieldMTLS             = "mtls"
)

func routeFields(p *networkingv1.TrafficPolicySpec_Policy) []string {
	var f []string
	if p.GetRequestTimeout() != nil {
		f = append(f, fieldRequestTimeout)
	}
	if p.GetRetries() != nil {
		f = append(f, fieldRetries)
	}
	if p.GetFaultInjection() != nil {
		f = append(f, fieldFaultInjection)
	}
	if p.GetCorsPolicy() != nil {
		f = append(f, fieldCorsPolicy)
	}
	if p.GetMirror() != nil {
		f = append(f, fieldMirror)
	}
	if p.GetHeaderManipulation() != nil {
		f = append(f, fieldHeaderManipulation)
	}
	if p.GetTrafficShift() != nil {
		f = append(f, fieldTrafficShift)
	}
	return f
}

func destinationFields(p *networkingv1.TrafficPolicySpec_Policy) []string {
	var f []string
	if p.GetOutlierDetection() != nil {
		f = append(f, fieldOutlierDetection)
	}
	if p.GetMtls() != nil {
		f = append(f, fieldMTLS)
	}
	return f
}

// sourceConditions turns source selectors into Istio match conditions for
// clients in cluster. nil means "any source". ok is false when no selector
// can match a client in cluster, so the policy has nothing to say there.
func sourceConditions(selectors []*networkingv1.WorkloadSelector, cluster string) (conds []*istiov1alpha3.HTTPMatchRequest, ok bool) {
	if len(selectors) == 0 {
		return nil, true
	}
	for _, sel := range selectors {
		m := sel.GetKubeWorkloadMatcher()
		if !containsOrEmpty(m.GetClusters(), cluster) {
			continue
		}
		if len(m.GetLabels()) == 0 && len(m.GetNamespaces()) == 0 {
			// One matcher that matches every source makes the whole list do.
			return nil, true
		}
		labels := maps.Clone(m.GetLabels())
		if len(m.GetNamespaces()) == 0 {
			conds = append(conds, &istiov1alpha3.HTTPMatchRequest{SourceLabels: labels})
			continue
		}
		for _, ns := range uniqueSorted(m.GetNamespaces()) {
			conds = append(conds, &istiov1alpha3.HTTPMatchRequest{SourceLabels: maps.Clone(labels), SourceNamespace: ns})
		}
	}
	return conds, len(conds) > 0
}

// requestConditions turns HTTP matchers into Istio match conditions. nil
// means "any request".
func requestConditions(matchers []*networkingv1.TrafficPolicySpec_HttpMatcher) []*istiov1alpha3.HTTPMatchRequest {
	var out []*istiov1alpha3.HTTPMatchRequest
	for _, m := range matchers {
		r := &istiov1alpha3.HTTPMatchRequest{}
		switch p := m.GetPathSpecifier().(type) {
		case *networkingv1.TrafficPolicySpec_HttpMatcher_Prefix:
			r.Uri = &istiov1alpha3.StringMatch{MatchType: &istiov1alpha3.StringMatch_Prefix{Prefix: p.Prefix}}
		case *networkingv1.TrafficPolicySpec_HttpMatcher_Exact:
			r.Uri = &istiov1alpha3.StringMatch{MatchType: &istiov1alpha3.StringMatch_Exact{Exact: p.Exact}}
		case *networkingv1.TrafficPolicySpec_HttpMatcher_Regex:
			r.Uri = &istiov1alpha3.StringMatch{MatchType: &istiov1alpha3.StringMatch_Regex{Regex: p.Regex}}
		}
		for _, h := range m.GetHeaders() {
			sm := stringMatch(h.GetValue(), h.GetRegex())
			if h.GetInvertMatch() {
				if r.WithoutHeaders == nil {
					r.WithoutHeaders = map[string]*istiov1alpha3.StringMatch{}
				}
				r.WithoutHeaders[h.GetName()] = sm
			} else {
				if r.Headers == nil {
					r.Headers = map[string]*istiov1alpha3.StringMatch{}
				}
				r.Headers[h.GetName()] = sm
			}
		}
		for _, q := range m.GetQueryParameters() {
			if r.QueryParams == nil {
				r.QueryParams = map[string]*istiov1alpha3.StringMatch{}
			}
			r.QueryParams[q.GetName()] = stringMatch(q.GetValue(), q.GetRegex())
		}
		if m.GetMethod() != "" {
			r.Method = &istiov1alpha3.StringMatch{MatchType: &istiov1alpha3.StringMatch_Exact{Exact: m.GetMethod()}}
		}
		out = append(out, r)
	}
	return out
}

// stringMatch matches a value exactly or by regex. An empty exact value
// checks that the header is present, as Istio does for an empty match.
func stringMatch(value string, regex bool) *istiov1alpha3.StringMatch {
	switch {
	case regex:
		return &istiov1alpha3.StringMatch{MatchType: &istiov1alpha3.StringMatch_Regex{Regex: value}}
	case value == "":
		return &istiov1alpha3.StringMatch{}
	default:
		return &istiov1alpha3.StringMatch{MatchType: &istiov1alpha3.StringMatch_Exact{Exact: value}}
	}
}

// combine ANDs every request condition with every source condition. The
// result is nil, a catch-all, only when both are.
func combine(requests, sources []*istiov1alpha3.HTTPMatchRequest) []*istiov1alpha3.HTTPMatchRequest {
	if len(requests) == 0 && len(sources) == 0 {
		return nil
	}
	if len(requests) == 0 {
		requests = []*istiov1alpha3.HTTPMatchRequest{{}}
	}
	if len(sources) == 0 {
		sources = []*istiov1alpha3.HTTPMatchRequest{{}}
	}
	out := make([]*istiov1alpha3.HTTPMatchRequest, 0, len(requests)*len(sources))
	for _, r := range requests {
		for _, s := range sources {
			m := proto.Clone(r).(*istiov1alpha3.HTTPMatchRequest)
			m.SourceLabels = maps.Clone(s.GetSourceLabels())
			m.SourceNamespace = s.GetSourceNamespace()
			out = append(out, m)
		}
	}
	slices.SortFunc(out, compareMatch)
	return slices.CompactFunc(out, func(a, b *istiov1alpha3.HTTPMatchRequest) bool { return proto.Equal(a, b) })
}

// matchKey is a canonical text of a set of match conditions: two policies
// with the same key share one route.
func matchKey(matches []*istiov1alpha3.HTTPMatchRequest) string {
	var b strings.Builder
	for _, m := range matches {
		raw, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		fmt.Fprintf(&b, "%x;", raw)
	}
	return b.String()
}

// Specificity of a match: Envoy takes the first route that matches, so the
// more specific conditions must come first.
func uriRank(m *istiov1alpha3.HTTPMatchRequest) (rank int, length int) {
	switch u := m.GetUri().GetMatchType().(type) {
	case *istiov1alpha3.StringMatch_Exact:
		return 0, len(u.Exact)
	case *istiov1alpha3.StringMatch_Regex:
		return 1, len(u.Regex)
	case *istiov1alpha3.StringMatch_Prefix:
		return 2, len(u.Prefix)
	}
	return 3, 0
}

func requestConditionCount(m *istiov1alpha3.HTTPMatchRequest) int {
	n := len(m.GetHeaders()) + len(m.GetWithoutHeaders()) + len(m.GetQueryParams())
	if m.GetMethod() != nil {
		n++
	}
	return n
}

func sourceConditionCount(m *istiov1alpha3.HTTPMatchRequest) int {
	n := len(m.GetSourceLabels())
	if m.GetSourceNamespace() != "" {
		n++
	}
	return n
}

// compareMatch orders match conditions most specific first: exact before
// regex before prefix before none, longer paths first, more header, query
// and method conditions first, more source conditions first; the rest by
// content so that the order is total.
func compareMatch(a, b *istiov1alpha3.HTTPMatchRequest) int {
	ra, la := uriRank(a)
	rb, lb := uriRank(b)
	if c := cmp.Or(
		cmp.Compare(ra, rb),
		cmp.Compare(lb, la),
		cmp.Compare(requestConditionCount(b), requestConditionCount(a)),
		cmp.Compare(sourceConditionCount(b), sourceConditionCount(a)),
	); c != 0 {
		return c
	}
	ja, _ := encode.Spec(a)
	jb, _ := encode.Spec(b)
	return strings.Compare(string(ja), string(jb))
}

// compareRoutes orders routes by their most specific match; a route without
// matches is a catch-all and goes last.
func compareRoutes(a, b *istiov1alpha3.HTTPRoute) int {
	am, bm := a.GetMatch(), b.GetMatch()
	switch {
	case len(am) == 0 && len(bm) == 0:
		return 0
	case len(am) == 0:
		return 1
	case len(bm) == 0:
		return -1
	}
	for i := range min(len(am), len(bm)) {
		if c := compareMatch(am[i], bm[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(bm), len(am))
}

func cloneDuration(d *durationpb.Duration) *durationpb.Duration {
	if d == nil {
		return nil
	}
	return &durationpb.Duration{Seconds: d.GetSeconds(), Nanos: d.GetNanos()}
}

// setRouteField writes one field of a policy into a route. Targets are
// resolved already: shift holds the weighted destinations and mirror the
// mirror destination.
func setRouteField(r *istiov1alpha3.HTTPRoute, field string, p *networkingv1.TrafficPolicySpec_Policy, shift []*istiov1alpha3.HTTPRouteDestination, mirror *istiov1alpha3.Destination) {
	switch field {
	case fieldRequestTimeout:
		r.Timeout = cloneDuration(p.GetRequestTimeout())
	case fieldRetries:
		rp := p.GetRetries()
		r.Retries = &istiov1alpha3.HTTPRetry{Attempts: rp.GetAttempts(), PerTryTimeout: cloneDuration(rp.GetPerTryTimeout()), RetryOn: rp.GetRetryOn()}
	case fieldFaultInjection:
		f := p.GetFaultInjection()
		pct := &istiov1alpha3.Percent{Value: f.GetPercentage()}
		if d := f.GetFixedDelay(); d != nil {
			r.Fault = &istiov1alpha3.HTTPFaultInjection{Delay: &istiov1alpha3.HTTPFaultInjection_Delay{
				HttpDelayType: &istiov1alpha3.HTTPFaultInjection_Delay_FixedDelay{FixedDelay: cloneDuration(d)},
				Percentage:    pct,
			}}
		} else {
			r.Fault = &istiov1alpha3.HTTPFaultInjection{Abort: &istiov1alpha3.HTTPFaultInjection_Abort{
				ErrorType:  &istiov1alpha3.HTTPFaultInjection_Abort_HttpStatus{HttpStatus: f.GetAbort().GetHttpStatus()},
				Percentage: pct,
			}}
		}
	case fieldCorsPolicy:
		c := p.GetCorsPolicy()
		cp := &istiov1alpha3.CorsPolicy{
			AllowMethods:  slices.Clone(c.GetAllowMethods()),
			AllowHeaders:  slices.Clone(c.GetAllowHeaders()),
			ExposeHeaders: slices.Clone(c.GetExposeHeaders()),
			MaxAge:        cloneDuration(c.GetMaxAge()),
		}
		if ac := c.GetAllowCredentials(); ac != nil {
			cp.AllowCredentials = wrapperspb.Bool(ac.GetValue())
		}
		for _, o := range c.GetAllowOrigins() {
			sm := &istiov1alpha3.StringMatch{}
			switch t := o.GetMatchType().(type) {
			case *networkingv1.TrafficPolicySpec_Policy_CorsPolicy_StringMatch_Exact:
				sm.MatchType = &istiov1alpha3.StringMatch_Exact{Exact: t.Exact}
			case *networkingv1.TrafficPolicySpec_Policy_CorsPolicy_StringMatch_Prefix:
				sm.MatchType = &istiov1alpha3.StringMatch_Prefix{Prefix: t.Prefix}
			case *networkingv1.TrafficPolicySpec_Policy_CorsPolicy_StringMatch_Regex:
				sm.MatchType = &istiov1alpha3.StringMatch_Regex{Regex: t.Regex}
			}
			cp.AllowOrigins = append(cp.AllowOrigins, sm)
		}
		r.CorsPolicy = cp
	case fieldMirror:
		r.Mirror = mirror
		r.MirrorPercentage = &istiov1alpha3.Percent{Value: p.GetMirror().GetPercentage()}
	case fieldHeaderManipulation:
		h := p.GetHeaderManipulation()
		hs := &istiov1alpha3.Headers{}
		if len(h.GetAppendRequestHeaders()) > 0 || len(h.GetRemoveRequestHeaders()) > 0 {
			hs.Request = &istiov1alpha3.Headers_HeaderOperations{Add: maps.Clone(h.GetAppendRequestHeaders()), Remove: slices.Clone(h.GetRemoveRequestHeaders())}
		}
		if len(h.GetAppendResponseHeaders()) > 0 || len(h.GetRemoveResponseHeaders()) > 0 {
			hs.Response = &istiov1alpha3.Headers_HeaderOperations{Add: maps.Clone(h.GetAppendResponseHeaders()), Remove: slices.Clone(h.GetRemoveResponseHeaders())}
		}
		r.Headers = hs
	case fieldTrafficShift:
		r.Route = shift
	}
}

// normalizeWeights scales relative weights to Istio's integer weights.
// They add up to 100, percentages as people read them, by the largest
// remainder method; ties go to the earlier destination. A non-zero weight
// must not become 0: istiod drops a destination of weight 0 from the
// route, so it would get no traffic at all (a 999:1 canary would get
// none). When one would, the weights add up to 1,000, 10,000, ... up to
// 1,000,000 instead, the first total at which none does; at 1,000,000, a
// weight that still rounds to 0 gets 1, taken from the largest.
func normalizeWeights(weights []uint32) []int32 {
	var total uint64
	for _, w := range weights {
		total += uint64(w)
	}
	if total == 0 {
		return make([]int32, len(weights))
	}
	var out []int32
	for scale := uint64(100); scale <= 1_000_000; scale *= 10 {
		out = largestRemainder(weights, total, scale)
		if len(dropped(weights, out)) == 0 {
			return out
		}
	}
	for _, i := range dropped(weights, out) {
		out[i] = 1
		out[slices.Index(out, slices.Max(out))]--
	}
	return out
}

// largestRemainder apportions scale among weights, whose sum is total.
func largestRemainder(weights []uint32, total, scale uint64) []int32 {
	out := make([]int32, len(weights))
	type rem struct {
		i int
		r uint64
	}
	rems := make([]rem, len(weights))
	var sum uint64
	for i, w := range weights {
		out[i] = int32(uint64(w) * scale / total)
		sum += uint64(out[i])
		rems[i] = rem{i, uint64(w) * scale % total}
	}
	slices.SortStableFunc(rems, func(a, b rem) int { return cmp.Compare(b.r, a.r) })
	for j := 0; sum < scale; j++ {
		out[rems[j%len(rems)].i]++
		sum++
	}
	return out
}

// dropped lists the indexes of the non-zero weights that scaled to 0.
func dropped(weights []uint32, scaled []int32) []int {
	var out []int
	for i, w := range weights {
		if w > 0 && scaled[i] == 0 {
			out = append(out, i)
		}
	}
	return out
}
