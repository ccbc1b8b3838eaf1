package domain

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Field paths in messages use the JSON (protojson) names that users write in
// their manifests.

type validator struct{ errs []string }

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, path+": "+fmt.Sprintf(format, args...))
}

// positiveDuration checks a duration that must be greater than zero when
// set. Istio's CRDs reject durations under a millisecond, so those are
// rejected here, where the message can name the policy's field.
func (v *validator) positiveDuration(path string, d *durationpb.Duration) {
	if d == nil {
		return
	}
	if d.CheckValid() != nil {
		// Our own words, not protobuf's error text: protobuf varies its
		// spacing between builds on purpose, and statuses are part of the
		// output's content hash, which every replica must agree on.
		v.add(path, "invalid duration (seconds %d, nanos %d): seconds must be within ±315576000000, nanos within ±999999999, with the same sign",
			d.GetSeconds(), d.GetNanos())
		return
	}
	switch dur := d.AsDuration(); {
	case dur <= 0:
		v.add(path, "must be positive")
	case dur < time.Millisecond:
		v.add(path, "must be at least 1ms")
	}
}

func (v *validator) percentage(path string, p float64) {
	if math.IsNaN(p) || p < 0 || p > 100 {
		v.add(path, "must be between 0 and 100")
	}
}

// regex checks an RE2 pattern, the dialect Envoy uses.
func (v *validator) regex(path, pattern string) {
	if _, err := regexp.Compile(pattern); err != nil {
		v.add(path, "invalid RE2 regex %q: %v", pattern, err)
	}
}

var httpMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true,
	"CONNECT": true, "OPTIONS": true, "TRACE": true, "PATCH": true,
}

// ValidateTrafficPolicy checks what can be checked of a TrafficPolicy
// without looking at the estate. It returns one message per problem, each
// starting with the field path.
func ValidateTrafficPolicy(spec *networkingv1.TrafficPolicySpec) []string {
	v := &validator{}
	for i, sel := range spec.GetDestinationSelector() {
		for j, ref := range sel.GetKubeServiceRefs().GetServices() {
			if ref.GetName() == "" {
				v.add(fmt.Sprintf("spec.destinationSelector[%d].kubeServiceRefs.services[%d].name", i, j), "is required")
			}
		}
	}
	for i, m := range spec.GetHttpRequestMatchers() {
		validateMatcher(v, fmt.Sprintf("spec.httpRequestMatchers[%d]", i), m)
	}
	validatePolicy(v, spec.GetPolicy())
	return v.errs
}

func validateMatcher(v *validator, path string, m *networkingv1.TrafficPolicySpec_HttpMatcher) {
	switch p := m.GetPathSpecifier().(type) {
	case *networkingv1.TrafficPolicySpec_HttpMatcher_Prefix:
		if p.Prefix == "" {
			v.add(path+".prefix", "must not be empty")
		}
	case *networkingv1.TrafficPolicySpec_HttpMatcher_Exact:
		if p.Exact == "" {
			v.add(path+".exact", "must not be empty")
		}
	case *networkingv1.TrafficPolicySpec_HttpMatcher_Regex:
		if p.Regex == "" {
			v.add(path+".regex", "must not be empty")
		} else {
			v.regex(path+".regex", p.Regex)
		}
	}
	seen := map[[2]any]bool{}
	for i, h := range m.GetHeaders() {
		hp := fmt.Sprintf("%s.headers[%d]", path, i)
		if h.GetName() == "" {
			v.add(hp+".name", "is required")
		} else if !headerName.MatchString(h.GetName()) {
			v.add(hp+".name", "%q is not an HTTP header name", h.GetName())
		}
		if h.GetRegex() {
			v.regex(hp+".value", h.GetValue())
		}
		if k := [2]any{h.GetName(), h.GetInvertMatch()}; seen[k] {
			v.add(hp+".name", "header %q is matched twice", h.GetName())
		} else {
			seen[k] = true
		}
	}
	seenQ := map[string]bool{}
	for i, q := range m.GetQueryParameters() {
		qp := fmt.Sprintf("%s.queryParameters[%d]", path, i)
		if q.GetName() == "" {
			v.add(qp+".name", "is required")
		}
		if q.GetRegex() {
			v.regex(qp+".value", q.GetValue())
		}
		if seenQ[q.GetName()] {
			v.add(qp+".name", "query parameter %q is matched twice", q.GetName())
		}
		seenQ[q.GetName()] = true
	}
	if meth := m.GetMethod(); meth != "" && !httpMethods[meth] {
		v.add(path+".method", "%q is not an HTTP method", meth)
	}
}

func validatePolicy(v *validator, p *networkingv1.TrafficPolicySpec_Policy) {
	const base = "spec.policy"
	if p == nil {
		return
	}
	v.positiveDuration(base+".requestTimeout", p.GetRequestTimeout())
	if r := p.GetRetries(); r != nil {
		if r.GetAttempts() < 0 {
			v.add(base+".retries.attempts", "must be >= 0")
		}
		// Istio rejects a VirtualService with this, and with an unknown
		// condition (Envoy would ignore it).
		if r.GetAttempts() == 0 && (r.GetPerTryTimeout() != nil || r.GetRetryOn() != "") {
			v.add(base+".retries.attempts", "0 turns retries off: perTryTimeout and retryOn need attempts above 0")
		}
		v.positiveDuration(base+".retries.perTryTimeout", r.GetPerTryTimeout())
		if on := r.GetRetryOn(); on != "" {
			for _, c := range strings.Split(on, ",") {
				if !retryConditions[c] && !httpStatusCodes[atoi(c)] {
					v.add(base+".retries.retryOn", "%q is not a retry condition (one of %s, or a registered HTTP status code; comma-separated, without spaces)", c, retryConditionList)
				}
			}
		}
	}
	if f := p.GetFaultInjection(); f != nil {
		fp := base + ".faultInjection"
		switch {
		case f.GetFixedDelay() != nil:
			v.positiveDuration(fp+".fixedDelay", f.GetFixedDelay())
		case f.GetAbort() != nil:
			if s := f.GetAbort().GetHttpStatus(); s < 200 || s > 599 {
				v.add(fp+".abort.httpStatus", "must be between 200 and 599")
			}
		default:
			v.add(fp, "one of fixedDelay or abort is required")
		}
		v.percentage(fp+".percentage", f.GetPercentage())
		v.envoyShare(fp+".percentage", f.GetPercentage())
	}
	if c := p.GetCorsPolicy(); c != nil {
		cp := base + ".corsPolicy"
		for i, o := range c.GetAllowOrigins() {
			op := fmt.Sprintf("%s.allowOrigins[%d]", cp, i)
			switch o.GetMatchType().(type) {
			case *networkingv1.TrafficPolicySpec_Policy_CorsPolicy_StringMatch_Regex:
				v.regex(op+".regex", o.GetRegex())
			case nil:
				v.add(op, "one of exact, prefix or regex is required")
			}
		}
		for i, m := range c.GetAllowMethods() {
			if !httpMethods[m] && m != "*" {
				v.add(fmt.Sprintf("%s.allowMethods[%d]", cp, i), "%q is not an HTTP method", m)
			}
		}
		for _, hs := range []struct {
			path  string
			names []string
		}{{"allowHeaders", c.GetAllowHeaders()}, {"exposeHeaders", c.GetExposeHeaders()}} {
			for i, n := range hs.names {
				if n != "*" && !headerName.MatchString(n) {
					v.add(fmt.Sprintf("%s.%s[%d]", cp, hs.path, i), "%q is not an HTTP header name", n)
				}
			}
		}
		v.positiveDuration(cp+".maxAge", c.GetMaxAge())
		if c.GetMaxAge().GetNanos() != 0 {
			v.add(cp+".maxAge", "must be whole seconds: Envoy's Access-Control-Max-Age counts seconds")
		}
	}
	if m := p.GetMirror(); m != nil {
		mp := base + ".mirror"
		if m.GetKubeService() == nil {
			v.add(mp+".kubeService", "is required")
		} else if m.GetKubeService().GetName() == "" {
			v.add(mp+".kubeService.name", "is required")
		}
		v.percentage(mp+".percentage", m.GetPercentage())
		v.envoyShare(mp+".percentage", m.GetPercentage())
		if m.GetPort() > 65535 {
			v.add(mp+".port", "must be at most 65535")
		}
	}
	if h := p.GetHeaderManipulation(); h != nil {
		hp := base + ".headerManipulation"
		for _, names := range []struct {
			path  string
			names []string
		}{{"removeResponseHeaders", h.GetRemoveResponseHeaders()}, {"removeRequestHeaders", h.GetRemoveRequestHeaders()}} {
			for i, n := range names.names {
				if n == "" {
					v.add(fmt.Sprintf("%s.%s[%d]", hp, names.path, i), "must not be empty")
				} else {
					v.manipulatedHeader(fmt.Sprintf("%s.%s[%d]", hp, names.path, i), n)
				}
			}
		}
		for _, m := range []struct {
			path string
			m    map[string]string
		}{{"appendResponseHeaders", h.GetAppendResponseHeaders()}, {"appendRequestHeaders", h.GetAppendRequestHeaders()}} {
			if _, ok := m.m[""]; ok {
				v.add(hp+"."+m.path, "header names must not be empty")
			}
			for _, n := range slices.Sorted(maps.Keys(m.m)) {
				if n == "" {
					continue
				}
				at := fmt.Sprintf("%s.%s[%s]", hp, m.path, n)
				v.manipulatedHeader(at, n)
				if why := headerValueProblem(m.m[n]); why != "" {
					v.add(at, "value %q: %s", m.m[n], why)
				}
			}
		}
	}
	if ts := p.GetTrafficShift(); ts != nil {
		tp := base + ".trafficShift.destinations"
		if len(ts.GetDestinations()) == 0 {
			v.add(tp, "must not be empty")
		}
		var total uint64
		for i, d := range ts.GetDestinations() {
			dp := fmt.Sprintf("%s[%d]", tp, i)
			total += uint64(d.GetWeight())
			switch {
			case d.GetKubeService() != nil:
				ks := d.GetKubeService()
				if ks.GetName() == "" {
					v.add(dp+".kubeService.name", "is required")
				}
				if ks.GetPort() > 65535 {
					v.add(dp+".kubeService.port", "must be at most 65535")
				}
				if c, old := ks.GetCluster(), ks.GetClusterName(); c != "" && old != "" && c != old {
					v.add(dp+".kubeService.clusterName", "names cluster %q but cluster names %q; clusterName is deprecated: set only cluster", old, c)
				}
			case d.GetVirtualDestination() != nil:
				vd := d.GetVirtualDestination()
				if vd.GetName() == "" {
					v.add(dp+".virtualDestination.name", "is required")
				}
				if len(vd.GetSubset()) > 0 {
					// The endpoints of a VirtualDestination are services
					// and east-west gateways, not pods: pod labels
					// cannot select among them.
					v.add(dp+".virtualDestination.subset", "subsets of VirtualDestinations are not supported: their endpoints are services and gateways, not pods")
				}
			default:
				v.add(dp, "one of kubeService or virtualDestination is required")
			}
		}
		// A lone destination takes all the traffic, as Istio sends it
		// all to a route's only destination: its weight does not matter.
		if len(ts.GetDestinations()) > 1 && total == 0 {
			v.add(tp, "weights must not all be zero: with several destinations, the weights say how the traffic is split")
		}
	}
	if o := p.GetOutlierDetection(); o != nil {
		op := base + ".outlierDetection"
		v.positiveDuration(op+".interval", o.GetInterval())
		v.positiveDuration(op+".baseEjectionTime", o.GetBaseEjectionTime())
		if o.GetMaxEjectionPercent() > 100 {
			v.add(op+".maxEjectionPercent", "must be between 0 and 100")
		}
	}
	if m := p.GetMtls(); m != nil {
		mode := m.GetIstio().GetTlsMode()
		if _, ok := networkingv1.TrafficPolicySpec_Policy_MTLS_Istio_TLSmode_name[int32(mode)]; !ok {
			v.add(base+".mtls.istio.tlsMode", "unknown mode %d", mode)
		}
	}
}

// manipulatedHeader checks the name of a header a policy adds or removes.
// istiod drops a pseudo-header (":path") from the operation, and turns an
// added host into a rewrite of the authority (a removed one it drops).
func (v *validator) manipulatedHeader(path, name string) {
	switch {
	case strings.EqualFold(name, "host"):
		v.add(path, "the host header cannot be added or removed (Istio would rewrite the request's authority, or drop the operation)")
	case !headerName.MatchString(name):
		v.add(path, "%q is not an HTTP header name (pseudo-headers such as :path cannot be added or removed)", name)
	}
}

// envoyShare checks a percentage of requests against Envoy's precision:
// Envoy counts requests per million, so a share under 0.0001% is none.
func (v *validator) envoyShare(path string, p float64) {
	if p > 0 && p < 0.0001 {
		v.add(path, "must be 0 or at least 0.0001: Envoy counts requests per million, and a smaller share is none")
	}
}

// envoyVariable is the inside of an Envoy header-value variable:
// %HOSTNAME%, %REQ(x-id)%.
var envoyVariable = regexp.MustCompile(`^[A-Z][A-Z0-9_]*(\([^()%]*\))?$`)

// headerValueProblem says what Envoy refuses in a header value it adds:
// control characters, and a % that is neither %% (a literal %) nor the
// start of a %VARIABLE% or %VARIABLE(...)%. Envoy rejects the whole
// route configuration for it. "" when there is nothing.
func headerValueProblem(value string) string {
	for i := 0; i < len(value); i++ {
		c := value[i]
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return "control characters are not allowed"
		}
		if c != '%' {
			continue
		}
		if i+1 < len(value) && value[i+1] == '%' {
			i++
			continue
		}
		end := strings.IndexByte(value[i+1:], '%')
		if end < 0 || !envoyVariable.MatchString(value[i+1:i+1+end]) {
			return "a literal % is written %%; %NAME% and %NAME(...)% are Envoy variables"
		}
		i += end + 1
	}
	return ""
}

// retryConditions are the retry conditions Envoy and Istio know
// (x-envoy-retry-on and x-envoy-retry-grpc-on values).
var retryConditions = map[string]bool{
	"5xx": true, "gateway-error": true, "reset": true, "reset-before-request": true, "connect-failure": true,
	"retriable-4xx": true, "refused-stream": true, "retriable-status-codes": true, "retriable-headers": true,
	"envoy-ratelimited": true, "http3-post-connect-failure": true,
	"cancelled": true, "deadline-exceeded": true, "internal": true, "resource-exhausted": true, "unavailable": true,
}

var retryConditionList = strings.Join(slices.Sorted(maps.Keys(retryConditions)), ", ")

// httpStatusCodes are the registered HTTP status codes, the ones Istio
// takes in retryOn (as retriable status codes).
var httpStatusCodes = map[int]bool{
	100: true, 101: true, 102: true, 103: true,
	200: true, 201: true, 202: true, 203: true, 204: true, 205: true, 206: true, 207: true, 208: true, 226: true,
	300: true, 301: true, 302: true, 303: true, 304: true, 305: true, 307: true, 308: true,
	400: true, 401: true, 402: true, 403: true, 404: true, 405: true, 406: true, 407: true, 408: true, 409: true,
	410: true, 411: true, 412: true, 413: true, 414: true, 415: true, 416: true, 417: true, 418: true, 421: true,
	422: true, 423: true, 424: true, 425: true, 426: true, 428: true, 429: true, 431: true, 451: true,
	500: true, 501: true, 502: true, 503: true, 504: true, 505: true, 506: true, 507: true, 508: true, 510: true, 511: true,
}

// atoi is the number c spells, or 0.
func atoi(c string) int {
	n, err := strconv.Atoi(c)
	if err != nil {
		return 0
	}
	return n
}
