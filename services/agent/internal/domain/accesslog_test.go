package domain

import (
	"slices"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

func statusFilter(v uint32, c observabilityv1.AccessLogPolicySpec_StatusCodeMatcher_Comparator) *observabilityv1.AccessLogPolicySpec_Filter {
	return &observabilityv1.AccessLogPolicySpec_Filter{Type: &observabilityv1.AccessLogPolicySpec_Filter_StatusCodeMatcher{
		StatusCodeMatcher: &observabilityv1.AccessLogPolicySpec_StatusCodeMatcher{Value: v, Comparator: c}}}
}

func headerFilter(name, value string, regex, invert bool) *observabilityv1.AccessLogPolicySpec_Filter {
	return &observabilityv1.AccessLogPolicySpec_Filter{Type: &observabilityv1.AccessLogPolicySpec_Filter_HeaderMatcher{
		HeaderMatcher: &networkingv1.TrafficPolicySpec_HeaderMatcher{Name: name, Value: value, Regex: regex, InvertMatch: invert}}}
}

func pathFilter(p string) *observabilityv1.AccessLogPolicySpec_Filter {
	return &observabilityv1.AccessLogPolicySpec_Filter{Type: &observabilityv1.AccessLogPolicySpec_Filter_PathPrefix{PathPrefix: p}}
}

func policy(name string, filters ...*observabilityv1.AccessLogPolicySpec_Filter) *snapshotv1.AccessLogPolicyConfig {
	return &snapshotv1.AccessLogPolicyConfig{
		Policy:                 &commonv1.ObjectRef{Namespace: "ops", Name: name},
		Workloads:              []*commonv1.ObjectRef{{Namespace: "bookinfo", Name: "reviews"}},
		WorkloadMatches:        []*snapshotv1.AccessLogPolicyConfig_WorkloadMatch{{Namespace: "bookinfo", Labels: map[string]string{"app": "reviews"}}},
		Filters:                filters,
		IncludedRequestHeaders: []string{"X-User"},
	}
}

func TestAccessLogFilterKeep(t *testing.T) {
	reviews := ProxyWorkload{Pod: "reviews-v1-abc", Namespace: "bookinfo", Labels: map[string]string{"app": "reviews", "version": "v1"}}
	ratings := ProxyWorkload{Pod: "ratings-v1-abc", Namespace: "bookinfo", Labels: map[string]string{"app": "ratings"}}
	otherNS := ProxyWorkload{Pod: "reviews-v1-abc", Namespace: "prod", Labels: map[string]string{"app": "reviews"}}
	entry := func(code uint32, path string, headers map[string]string) *observabilityv1.AccessLogEntry {
		return &observabilityv1.AccessLogEntry{ResponseCode: code, Path: path, Method: "GET", RequestHeaders: headers}
	}
	GE, LE, EQ := observabilityv1.AccessLogPolicySpec_StatusCodeMatcher_GE, observabilityv1.AccessLogPolicySpec_StatusCodeMatcher_LE, observabilityv1.AccessLogPolicySpec_StatusCodeMatcher_EQ
	tests := []struct {
		name     string
		policies []*snapshotv1.AccessLogPolicyConfig
		w        ProxyWorkload
		e        *observabilityv1.AccessLogEntry
		want     []string
	}{
		{"no policy keeps nothing", nil, reviews, entry(200, "/", nil), nil},
		{"no filters keeps all of a selected workload", []*snapshotv1.AccessLogPolicyConfig{policy("all")}, reviews, entry(200, "/", nil), []string{"all"}},
		{"other workload", []*snapshotv1.AccessLogPolicyConfig{policy("all")}, ratings, entry(200, "/", nil), nil},
		{"other namespace", []*snapshotv1.AccessLogPolicyConfig{policy("all")}, otherNS, entry(200, "/", nil), nil},
		{"status GE kept", []*snapshotv1.AccessLogPolicyConfig{policy("errors", statusFilter(500, GE))}, reviews, entry(503, "/", nil), []string{"errors"}},
		{"status GE dropped", []*snapshotv1.AccessLogPolicyConfig{policy("errors", statusFilter(500, GE))}, reviews, entry(404, "/", nil), nil},
		{"status LE", []*snapshotv1.AccessLogPolicyConfig{policy("ok", statusFilter(299, LE))}, reviews, entry(200, "/", nil), []string{"ok"}},
		{"status EQ dropped", []*snapshotv1.AccessLogPolicyConfig{policy("nf", statusFilter(404, EQ))}, reviews, entry(200, "/", nil), nil},
		{"header exact", []*snapshotv1.AccessLogPolicyConfig{policy("h", headerFilter("X-User", "jason", false, false))}, reviews, entry(200, "/", map[string]string{"x-user": "jason"}), []string{"h"}},
		{"header exact mismatch", []*snapshotv1.AccessLogPolicyConfig{policy("h", headerFilter("x-user", "jason", false, false))}, reviews, entry(200, "/", map[string]string{"x-user": "bob"}), nil},
		{"header presence", []*snapshotv1.AccessLogPolicyConfig{policy("h", headerFilter("x-user", "", false, false))}, reviews, entry(200, "/", map[string]string{"x-user": "bob"}), []string{"h"}},
		{"header regex is a full match", []*snapshotv1.AccessLogPolicyConfig{policy("h", headerFilter("x-user", "ja.*", true, false))}, reviews, entry(200, "/", map[string]string{"x-user": "xjason"}), nil},
		{"header regex", []*snapshotv1.AccessLogPolicyConfig{policy("h", headerFilter("x-user", "ja.*", true, false))}, reviews, entry(200, "/", map[string]string{"x-user": "jason"}), []string{"h"}},
		{"header inverted", []*snapshotv1.AccessLogPolicyConfig{policy("h", headerFilter("x-user", "jason", false, true))}, reviews, entry(200, "/", map[string]string{"x-user": "jason"}), nil},
		{"header inverted absent", []*snapshotv1.AccessLogPolicyConfig{policy("h", headerFilter("x-user", "jason", false, true))}, reviews, entry(200, "/", nil), []string{"h"}},
		{"pseudo header :method", []*snapshotv1.AccessLogPolicyConfig{policy("h", headerFilter(":method", "GET", false, false))}, reviews, entry(200, "/", nil), []string{"h"}},
		{"path prefix", []*snapshotv1.AccessLogPolicyConfig{policy("p", pathFilter("/api/"))}, reviews, entry(200, "/api/v1", nil), []string{"p"}},
		{"path prefix dropped", []*snapshotv1.AccessLogPolicyConfig{policy("p", pathFilter("/api/"))}, reviews, entry(200, "/static", nil), nil},
		{"any filter of a policy", []*snapshotv1.AccessLogPolicyConfig{policy("p", pathFilter("/api/"), statusFilter(500, GE))}, reviews, entry(500, "/static", nil), []string{"p"}},
		{"bad regex never matches", []*snapshotv1.AccessLogPolicyConfig{policy("bad", headerFilter("x-user", "(", true, false))}, reviews, entry(200, "/", map[string]string{"x-user": "("}), nil},
		{"two policies", []*snapshotv1.AccessLogPolicyConfig{policy("a"), policy("b", statusFilter(500, GE))}, reviews, entry(500, "/", nil), []string{"a", "b"}},
		{"no workloads selects all", []*snapshotv1.AccessLogPolicyConfig{{Policy: &commonv1.ObjectRef{Namespace: "ops", Name: "any"}}}, otherNS, entry(200, "/", nil), []string{"any"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := CompileAccessLogFilter(tt.policies)
			kept := f.Keep(tt.w, tt.e)
			if kept != (tt.want != nil) {
				t.Fatalf("Keep = %v, want %v", kept, tt.want != nil)
			}
			var got []string
			for _, p := range tt.e.GetPolicies() {
				got = append(got, p.GetName())
			}
			if kept && !slices.Equal(got, tt.want) {
				t.Errorf("policies = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAccessLogFilterCopiesOnlyIncludedHeaders(t *testing.T) {
	f, errs := CompileAccessLogFilter([]*snapshotv1.AccessLogPolicyConfig{policy("all")})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	e := &observabilityv1.AccessLogEntry{RequestHeaders: map[string]string{"x-user": "jason", "authorization": "Bearer secret"}, ResponseHeaders: map[string]string{"server": "envoy"}}
	if !f.Keep(ProxyWorkload{Namespace: "bookinfo", Labels: map[string]string{"app": "reviews"}}, e) {
		t.Fatal("entry not kept")
	}
	if len(e.RequestHeaders) != 1 || e.RequestHeaders["x-user"] != "jason" {
		t.Errorf("request headers = %v, want only x-user", e.RequestHeaders)
	}
	if e.ResponseHeaders != nil {
		t.Errorf("response headers = %v, want none", e.ResponseHeaders)
	}
}

func TestCompileAccessLogFilterReportsBadFilters(t *testing.T) {
	_, errs := CompileAccessLogFilter([]*snapshotv1.AccessLogPolicyConfig{
		policy("bad", headerFilter("x", "(", true, false), &observabilityv1.AccessLogPolicySpec_Filter{}, headerFilter("", "v", false, false)),
	})
	if len(errs) != 3 {
		t.Errorf("errors = %v, want 3 (bad regex, empty filter, nameless header)", errs)
	}
}
