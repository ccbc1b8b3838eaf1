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

// istioDuration checks a duration that goes into an Istio object (a
// timeout, a delay, an interval): positive, and in whole milliseconds,
// Istio's precision, as its validation wants.
func (v *validator) istioDuration(path string, d *durationpb.Duration) {
	n := len(v.errs)
	v.positiveDuration(path, d)
	if len(v.errs) == n && d != nil && d.AsDuration()%time.Millisecond != 0 {
		v.add(path, "%s is not a whole number of milliseconds, Istio's precision", d.AsDuration())
	}
}

// maxRegexLength is the longest regex Istio takes: Envoy limits the size
// of a regex's program, which Istio bounds by the length.
const maxRegexLength = 1024

// regex checks an RE2 pattern, the dialect Envoy uses, as Istio does: not
// empty, at most maxRegexLength characters, and one that compiles.
func (v *validator) regex(path, pattern string) {
	switch {
	case pattern == "":
		v.add(path, "an empty regex is not allowed (Istio refuses it)")
	case len(pattern) > maxRegexLength:
		v.add(path, "the regex is %d characters long; Istio takes at most %d", len(pattern), maxRegexLength)
	default:
		if _, err := regexp.Compile(pattern); err != nil {
			v.add(path, "invalid RE2 regex %q: %v", pattern, err)
		}
	}
}

// headerName is an HTTP header field name (an RFC 9110 token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// pseudoHeaders are the HTTP/2 pseudo-headers a request matcher may name.
var pseudoHeaders = []string{":authority", ":method", ":path", ":scheme"}

// matchedHeader checks the name of a header that a request matcher reads.
func (v *validator) matchedHeader(path, name string) {
	switch {
	case name == "":
		v.add(path, "is required")
	case !headerName.MatchString(name) && !slices.Contains(pseudoHeaders, name):
		v.add(path, "%q is not an HTTP header name", name)
	}
}

// headerOperation says what a header manipulation does with a header, for
// the rules Istio and Envoy have on which headers may be changed.
type headerOperation int

const (
	addRequestHeader     headerOperation = iota // :authority and Host may be set
	otherHeaderOperation                        // removing a request header, any response header
)

// changedHeader checks the name of a header that a header manipulation
// adds or removes: a header name, and neither a pseudo-header nor Host,
// which Envoy manages, except that a request may get its authority set.
func (v *validator) changedHeader(path, name string, op headerOperation) {
	switch lower := strings.ToLower(name); {
	case op == addRequestHeader && (lower == ":authority" || lower == "host"):
	case strings.HasPrefix(name, ":") || lower == "host":
		v.add(path, "%q cannot be changed here: Istio refuses pseudo-headers and Host", name)
	case !headerName.MatchString(name):
		v.add(path, "%q is not an HTTP header name", name)
	}
}

// envoyHeaderValue is what may follow a "%" in a header value Envoy
// writes: an escaped percent ("%%"), or a variable, %NAME% or
// %NAME(argument)%, which Envoy substitutes.
var envoyHeaderValue = regexp.MustCompile(`%%|%[A-Z][A-Z0-9_]*(\([^\s\[)"\\][^)"\\]*\))?%`)

// headerValue checks a header value Envoy writes: no control characters,
// and every "%" escaped as "%%" or part of a variable.
func (v *validator) headerValue(path, value string) {
	if strings.ContainsFunc(value, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
		v.add(path, "%q has a control character", value)
		return
	}
	if strings.Contains(envoyHeaderValue.ReplaceAllString(value, ""), "%") {
		v.add(path, "%q has a %% that is neither escaped as %%%% nor part of an Envoy variable such as %%HOSTNAME%%", value)
	}
}

// labels checks Kubernetes labels that go into an Istio object, which
// Istio checks as the API server checks a pod's.
func (v *validator) labels(path string, labels map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if !validLabelKey(k) {
			v.add(path, "%q is not a Kubernetes label key", k)
		}
		if val := labels[k]; !validLabelValue(val) {
			v.add(path, "the value %q of %q is not a Kubernetes label value", val, k)
		}
	}
}

var (
	labelName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	// dnsLabel is an RFC 1123 label, such as a namespace's name.
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// validLabelKey says whether k is a label key: a name of at most 63
// characters, after an optional DNS subdomain prefix and "/".
func validLabelKey(k string) bool {
	name := k
	if prefix, rest, ok := strings.Cut(k, "/"); ok {
		if prefix == "" || len(prefix) > 253 || !dnsLabels.MatchString(prefix) {
			return false
		}
		name = rest
	}
	return len(name) <= 63 && labelName.MatchString(name)
}

// validLabelValue says whether val is a label value: empty, or a name of at
// most 63 characters.
func validLabelValue(val string) bool {
	return val == "" || len(val) <= 63 && labelName.MatchString(val)
}

// namespace checks a namespace name.
func (v *validator) namespace(path, ns string) {
	if len(ns) > 63 || !dnsLabel.MatchString(ns) {
		v.add(path, "%q is not a namespace name", ns)
	}
}

// envoyRetryOn are the retry conditions Envoy knows, for HTTP and gRPC
// (x-envoy-retry-on and x-envoy-retry-grpc-on), which Istio takes.
var envoyRetryOn = []string{
	"5xx", "gateway-error", "reset", "reset-before-request", "connect-failure", "retriable-4xx",
	"refused-stream", "retriable-status-codes", "retriable-headers", "envoy-ratelimited",
	"http3-post-connect-failure", "cancelled", "deadline-exceeded", "internal",
	"resource-exhausted", "unavailable",
}

// httpStatusCodes are the registered HTTP status codes, the ones Istio
// takes as retry conditions.
var httpStatusCodes = []int{
	100, 101, 102, 103,
	200, 201, 202, 203, 204, 205, 206, 207, 208, 226,
	300, 301, 302, 303, 304, 305, 307, 308,
	400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 418,
	421, 422, 423, 424, 425, 426, 428, 429, 431, 451,
	500, 501, 502, 503, 504, 505, 506, 507, 508, 510, 511,
}

// retryOn checks a comma-separated list of retry conditions.
func (v *validator) retryOn(path, list string) {
	for _, c := range strings.Split(list, ",") {
		if slices.Contains(envoyRetryOn, c) {
			continue
		}
		if n, err := strconv.Atoi(c); err == nil && slices.Contains(httpStatusCodes, n) {
			continue
		}
		v.add(path, "%q is not a retry condition: use Envoy's (5xx, gateway-error, reset, connect-failure, retriable-4xx, refused-stream, retriable-status-codes, ...) or HTTP status codes, separated by commas without spaces", c)
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
	for i, sel := range spec.GetSourceSelector() {
		// The labels and namespaces of sources go into Istio's match
		// conditions.
		m := sel.GetKubeWorkloadMatcher()
		p := fmt.Sprintf("spec.sourceSelector[%d].kubeWorkloadMatcher", i)
		v.labels(p+".labels", m.GetLabels())
		for j, ns := range m.GetNamespaces() {
			v.namespace(fmt.Sprintf("%s.namespaces[%d]", p, j), ns)
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
		v.matchedHeader(hp+".name", h.GetName())
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
	v.istioDuration(base+".requestTimeout", p.GetRequestTimeout())
	if r := p.GetRetries(); r != nil {
		switch {
		case r.GetAttempts() < 0:
			v.add(base+".retries.attempts", "must be >= 0")
		case r.GetAttempts() == 0 && (r.GetPerTryTimeout() != nil || r.GetRetryOn() != ""):
			v.add(base+".retries.attempts", "is 0, which turns retries off, but perTryTimeout or retryOn is set: set attempts, or leave them out")
		}
		v.istioDuration(base+".retries.perTryTimeout", r.GetPerTryTimeout())
		if r.GetRetryOn() != "" {
			v.retryOn(base+".retries.retryOn", r.GetRetryOn())
		}
	}
	if f := p.GetFaultInjection(); f != nil {
		fp := base + ".faultInjection"
		switch {
		case f.GetFixedDelay() != nil:
			v.istioDuration(fp+".fixedDelay", f.GetFixedDelay())
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
		validateCORS(v, base+".corsPolicy", c)
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
		validateHeaderManipulation(v, base+".headerManipulation", h)
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
				//lint:ignore SA1019 the deprecated clusterName is still accepted for one release
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
		validateOutlierDetection(v, op, o)
	}
	if m := p.GetMtls(); m != nil {
		mode := m.GetIstio().GetTlsMode()
		if _, ok := networkingv1.TrafficPolicySpec_Policy_MTLS_Istio_TLSmode_name[int32(mode)]; !ok {
			v.add(base+".mtls.istio.tlsMode", "unknown mode %d", mode)
		}
	}
}

func validateCORS(v *validator, path string, c *networkingv1.TrafficPolicySpec_Policy_CorsPolicy) {
	for i, o := range c.GetAllowOrigins() {
		op := fmt.Sprintf("%s.allowOrigins[%d]", path, i)
		switch t := o.GetMatchType().(type) {
		case *networkingv1.TrafficPolicySpec_Policy_CorsPolicy_StringMatch_Exact:
			if t.Exact == "" {
				v.add(op+".exact", "must not be empty")
			}
		case *networkingv1.TrafficPolicySpec_Policy_CorsPolicy_StringMatch_Prefix:
			if t.Prefix == "" {
				v.add(op+".prefix", "must not be empty")
			}
		case *networkingv1.TrafficPolicySpec_Policy_CorsPolicy_StringMatch_Regex:
			v.regex(op+".regex", t.Regex)
		case nil:
			v.add(op, "one of exact, prefix or regex is required")
		}
	}
	for i, m := range c.GetAllowMethods() {
		if !httpMethods[m] && m != "*" {
			v.add(fmt.Sprintf("%s.allowMethods[%d]", path, i), "%q is not an HTTP method (upper case) or *", m)
		}
	}
	for _, names := range []struct {
		field string
		names []string
	}{{"allowHeaders", c.GetAllowHeaders()}, {"exposeHeaders", c.GetExposeHeaders()}} {
		for i, n := range names.names {
			if n != "*" && !headerName.MatchString(n) {
				v.add(fmt.Sprintf("%s.%s[%d]", path, names.field, i), "%q is not an HTTP header name or *", n)
			}
		}
	}
	n := len(v.errs)
	v.positiveDuration(path+".maxAge", c.GetMaxAge())
	if len(v.errs) == n && c.GetMaxAge() != nil && c.GetMaxAge().AsDuration()%time.Second != 0 {
		v.add(path+".maxAge", "%s is not a whole number of seconds, the precision of CORS max-age", c.GetMaxAge().AsDuration())
	}
}

func validateHeaderManipulation(v *validator, path string, h *networkingv1.TrafficPolicySpec_Policy_HeaderManipulation) {
	for _, names := range []struct {
		field string
		names []string
	}{{"removeResponseHeaders", h.GetRemoveResponseHeaders()}, {"removeRequestHeaders", h.GetRemoveRequestHeaders()}} {
		for i, n := range names.names {
			p := fmt.Sprintf("%s.%s[%d]", path, names.field, i)
			if n == "" {
				v.add(p, "must not be empty")
				continue
			}
			v.changedHeader(p, n, otherHeaderOperation)
		}
	}
	for _, m := range []struct {
		field string
		m     map[string]string
		op    headerOperation
	}{{"appendResponseHeaders", h.GetAppendResponseHeaders(), otherHeaderOperation}, {"appendRequestHeaders", h.GetAppendRequestHeaders(), addRequestHeader}} {
		p := path + "." + m.field
		if _, ok := m.m[""]; ok {
			v.add(p, "header names must not be empty")
		}
		for _, name := range slices.Sorted(maps.Keys(m.m)) {
			if name == "" {
				continue
			}
			v.changedHeader(p, name, m.op)
			v.headerValue(fmt.Sprintf("%s[%q]", p, name), m.m[name])
		}
	}
}

// validateOutlierDetection checks the outlier detection of a
// TrafficPolicy or a VirtualDestination.
func validateOutlierDetection(v *validator, path string, o *networkingv1.OutlierDetection) {
	v.istioDuration(path+".interval", o.GetInterval())
	v.istioDuration(path+".baseEjectionTime", o.GetBaseEjectionTime())
	if o.GetMaxEjectionPercent() > 100 {
		v.add(path+".maxEjectionPercent", "must be between 0 and 100")
	}
}

// envoyShare checks a percentage of requests against Envoy's precision:
// Envoy counts requests per million, so a share under 0.0001% is none.
func (v *validator) envoyShare(path string, p float64) {
	if p > 0 && p < 0.0001 {
		v.add(path, "must be 0 or at least 0.0001: Envoy counts requests per million, and a smaller share is none")
	}
}
