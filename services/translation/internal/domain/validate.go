package domain

import (
	"fmt"
	"math"
	"regexp"
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
		v.positiveDuration(base+".retries.perTryTimeout", r.GetPerTryTimeout())
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
		v.positiveDuration(cp+".maxAge", c.GetMaxAge())
	}
	if m := p.GetMirror(); m != nil {
		mp := base + ".mirror"
		if m.GetKubeService() == nil {
			v.add(mp+".kubeService", "is required")
		} else if m.GetKubeService().GetName() == "" {
			v.add(mp+".kubeService.name", "is required")
		}
		v.percentage(mp+".percentage", m.GetPercentage())
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
