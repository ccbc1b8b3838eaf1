package domain

import (
	"fmt"
	"regexp"
	"strings"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

// ProxyWorkload is the pod an Envoy proxy runs in, as its node metadata
// tells it.
type ProxyWorkload struct {
	Pod       string
	Namespace string
	Labels    map[string]string
}

// AccessLogFilter decides which access-log entries the agent keeps: those
// of a workload that an AccessLogPolicyConfig selects and that match one of
// its filters. It is immutable once compiled, so it can be shared by every
// stream without a lock.
type AccessLogFilter struct {
	policies []accessLogPolicy
}

type accessLogPolicy struct {
	ref *commonv1.ObjectRef
	// all is set when the config lists no workloads at all: the policy
	// selects every workload.
	all         bool
	matches     []*snapshotv1.AccessLogPolicyConfig_WorkloadMatch
	filters     []accessLogMatcher
	reqHeaders  []string
	respHeaders []string
}

type matcherKind int

const (
	matchNever matcherKind = iota
	matchStatus
	matchHeader
	matchPath
)

type accessLogMatcher struct {
	kind       matcherKind
	status     uint32
	comparator observabilityv1.AccessLogPolicySpec_StatusCodeMatcher_Comparator
	header     string
	value      string
	re         *regexp.Regexp
	invert     bool
	prefix     string
}

// CompileAccessLogFilter compiles the policies of an EnvoyConfig. A filter
// that cannot be compiled (a bad regex, an empty filter) never matches, so
// that a broken filter narrows its policy rather than widening it to every
// entry; each such filter is reported in the returned errors.
func CompileAccessLogFilter(cfgs []*snapshotv1.AccessLogPolicyConfig) (*AccessLogFilter, []error) {
	f := &AccessLogFilter{}
	var errs []error
	for _, c := range cfgs {
		p := accessLogPolicy{
			ref:     c.GetPolicy(),
			all:     len(c.GetWorkloadMatches()) == 0 && len(c.GetWorkloads()) == 0,
			matches: c.GetWorkloadMatches(),
		}
		for _, h := range c.GetIncludedRequestHeaders() {
			p.reqHeaders = append(p.reqHeaders, strings.ToLower(h))
		}
		for _, h := range c.GetIncludedResponseHeaders() {
			p.respHeaders = append(p.respHeaders, strings.ToLower(h))
		}
		for i, flt := range c.GetFilters() {
			m, err := compileMatcher(flt)
			if err != nil {
				errs = append(errs, fmt.Errorf("access-log policy %s/%s filter %d: %w", p.ref.GetNamespace(), p.ref.GetName(), i, err))
			}
			p.filters = append(p.filters, m)
		}
		f.policies = append(f.policies, p)
	}
	return f, errs
}

func compileMatcher(flt *observabilityv1.AccessLogPolicySpec_Filter) (accessLogMatcher, error) {
	switch t := flt.GetType().(type) {
	case *observabilityv1.AccessLogPolicySpec_Filter_StatusCodeMatcher:
		return accessLogMatcher{kind: matchStatus, status: t.StatusCodeMatcher.GetValue(), comparator: t.StatusCodeMatcher.GetComparator()}, nil
	case *observabilityv1.AccessLogPolicySpec_Filter_HeaderMatcher:
		h := t.HeaderMatcher
		if h.GetName() == "" {
			return accessLogMatcher{}, fmt.Errorf("header matcher without a name")
		}
		m := accessLogMatcher{kind: matchHeader, header: strings.ToLower(h.GetName()), value: h.GetValue(), invert: h.GetInvertMatch()}
		if h.GetRegex() {
			// Envoy's safe_regex matches the whole value; so does this.
			re, err := regexp.Compile("^(?:" + h.GetValue() + ")$")
			if err != nil {
				return accessLogMatcher{}, fmt.Errorf("header %q: bad regex: %w", h.GetName(), err)
			}
			m.re = re
		}
		return m, nil
	case *observabilityv1.AccessLogPolicySpec_Filter_PathPrefix:
		return accessLogMatcher{kind: matchPath, prefix: t.PathPrefix}, nil
	default:
		return accessLogMatcher{}, fmt.Errorf("empty filter")
	}
}

// Policies reports how many policies the filter holds.
func (f *AccessLogFilter) Policies() int {
	if f == nil {
		return 0
	}
	return len(f.policies)
}

// Keep matches e, taken from w's proxy, against the policies. When a policy
// keeps it, Keep sets e's policies and replaces its header maps with only
// the headers those policies include, and reports true. e's header maps
// must hold every header the proxy logged, with lower-case names.
func (f *AccessLogFilter) Keep(w ProxyWorkload, e *observabilityv1.AccessLogEntry) bool {
	if f == nil {
		return false
	}
	var policies []*commonv1.ObjectRef
	var req, resp map[string]string
	for i := range f.policies {
		p := &f.policies[i]
		if !p.selects(w) || !p.keeps(e) {
			continue
		}
		policies = append(policies, p.ref)
		req = copyHeaders(req, e.GetRequestHeaders(), p.reqHeaders)
		resp = copyHeaders(resp, e.GetResponseHeaders(), p.respHeaders)
	}
	if len(policies) == 0 {
		return false
	}
	e.Policies, e.RequestHeaders, e.ResponseHeaders = policies, req, resp
	return true
}

func copyHeaders(dst, src map[string]string, names []string) map[string]string {
	for _, n := range names {
		if v, ok := src[n]; ok {
			if dst == nil {
				dst = make(map[string]string, len(names))
			}
			dst[n] = v
		}
	}
	return dst
}

func (p *accessLogPolicy) selects(w ProxyWorkload) bool {
	if p.all {
		return true
	}
	for _, m := range p.matches {
		if m.GetNamespace() != "" && m.GetNamespace() != w.Namespace {
			continue
		}
		if subset(m.GetLabels(), w.Labels) {
			return true
		}
	}
	return false
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

func (p *accessLogPolicy) keeps(e *observabilityv1.AccessLogEntry) bool {
	if len(p.filters) == 0 {
		return true
	}
	for i := range p.filters {
		if p.filters[i].matches(e) {
			return true
		}
	}
	return false
}

func (m *accessLogMatcher) matches(e *observabilityv1.AccessLogEntry) bool {
	switch m.kind {
	case matchStatus:
		code := e.GetResponseCode()
		switch m.comparator {
		case observabilityv1.AccessLogPolicySpec_StatusCodeMatcher_GE:
			return code >= m.status
		case observabilityv1.AccessLogPolicySpec_StatusCodeMatcher_LE:
			return code <= m.status
		default:
			return code == m.status
		}
	case matchHeader:
		v, ok := requestHeader(e, m.header)
		var hit bool
		switch {
		case m.re != nil:
			hit = ok && m.re.MatchString(v)
		case m.value == "":
			hit = ok
		default:
			hit = ok && v == m.value
		}
		return hit != m.invert
	case matchPath:
		return strings.HasPrefix(e.GetPath(), m.prefix)
	default:
		return false
	}
}

// requestHeader looks a request header up, including the pseudo-headers
// that Envoy logs as fields of their own.
func requestHeader(e *observabilityv1.AccessLogEntry, name string) (string, bool) {
	if v, ok := e.GetRequestHeaders()[name]; ok {
		return v, true
	}
	var v string
	switch name {
	case ":path":
		v = e.GetPath()
	case ":method":
		v = e.GetMethod()
	case ":authority", "host":
		v = e.GetAuthority()
	case "x-request-id":
		v = e.GetRequestId()
	default:
		return "", false
	}
	return v, v != ""
}

// CloneHeaders copies a header map with lower-case names.
func CloneHeaders(h map[string]string) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[strings.ToLower(k)] = v
	}
	return out
}
