package domain

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/proto"
)

// The AccessLogPolicy kind, which gets statuses.
const (
	ObservabilityV1     = "observability.meshplane.dev/v1"
	KindAccessLogPolicy = "AccessLogPolicy"
)

// validateAccessLog returns the problems of an AccessLogPolicy's spec,
// each naming the field.
func validateAccessLog(spec *observabilityv1.AccessLogPolicySpec) []string {
	errs := validateWorkloadSelectors(spec.GetWorkloadSelectors())
	for i, f := range spec.GetFilters() {
		at := fmt.Sprintf("spec.filters[%d]", i)
		switch t := f.GetType().(type) {
		case *observabilityv1.AccessLogPolicySpec_Filter_StatusCodeMatcher:
			m := t.StatusCodeMatcher
			if v := m.GetValue(); v < 100 || v > 599 {
				errs = append(errs, fmt.Sprintf("%s.statusCodeMatcher.value: %d is not an HTTP status code (100-599)", at, v))
			}
			if _, ok := observabilityv1.AccessLogPolicySpec_StatusCodeMatcher_Comparator_name[int32(m.GetComparator())]; !ok {
				errs = append(errs, fmt.Sprintf("%s.statusCodeMatcher.comparator: unknown comparator %d", at, m.GetComparator()))
			}
		case *observabilityv1.AccessLogPolicySpec_Filter_HeaderMatcher:
			h := t.HeaderMatcher
			if !headerName.MatchString(h.GetName()) {
				errs = append(errs, fmt.Sprintf("%s.headerMatcher.name: %q is not a header name", at, h.GetName()))
			}
			if h.GetRegex() {
				if _, err := regexp.Compile(h.GetValue()); err != nil {
					errs = append(errs, fmt.Sprintf("%s.headerMatcher.value: bad regex: %v", at, err))
				}
			}
		case *observabilityv1.AccessLogPolicySpec_Filter_PathPrefix:
			if !strings.HasPrefix(t.PathPrefix, "/") {
				errs = append(errs, fmt.Sprintf("%s.pathPrefix: %q must start with /", at, t.PathPrefix))
			}
		default:
			errs = append(errs, at+": exactly one of statusCodeMatcher, headerMatcher and pathPrefix is required")
		}
	}
	for _, hs := range []struct {
		field string
		names []string
	}{{"includedRequestHeaders", spec.GetIncludedRequestHeaders()}, {"includedResponseHeaders", spec.GetIncludedResponseHeaders()}} {
		for i, h := range hs.names {
			if !headerName.MatchString(h) {
				errs = append(errs, fmt.Sprintf("spec.%s[%d]: %q is not a header name", hs.field, i, h))
			}
		}
	}
	return errs
}

func translateAccessLogs(e *extensionOutputs, ix *Index, in []collected[*observabilityv1.AccessLogPolicy], kept, next map[ObjectKey]Kept[*observabilityv1.AccessLogPolicySpec]) error {
	for _, c := range in {
		key, md, spec := c.Key, c.Res.GetMetadata(), c.Res.GetSpec()
		errs := validateVersion(md, spec, validateAccessLog)
		spec, held := inForce(key, md, spec, errs, kept)
		var ws []*workload
		var failures, denied []string
		if len(errs) == 0 || held != nil {
			ws, denied = scopedWorkloads(ix, key.Cluster, spec.GetWorkloadSelectors())
			failures = emitAccessLog(e, key, spec, ws)
		}
		keep(next, key, held, md, spec, len(errs) == 0)
		st, err := e.status(ObservabilityV1, KindAccessLogPolicy, key, md, append(slices.Clone(errs), denied...), failures, ws, heldGeneration(held))
		if err != nil {
			return err
		}
		if out := e.outputs[key.Cluster]; out != nil {
			out.Statuses = append(out.Statuses, st)
		}
	}
	return nil
}

// emitAccessLog adds the policy, resolved to each cluster's selected
// workloads, to that cluster's output. It returns the clusters where a
// policy of the same namespace and name from another cluster came first.
func emitAccessLog(e *extensionOutputs, key ObjectKey, spec *observabilityv1.AccessLogPolicySpec, ws []*workload) []string {
	var failures []string
	byCluster := map[string]*snapshotv1.AccessLogPolicyConfig{}
	var clusters []string
	for _, w := range ws {
		c := byCluster[w.Key.Cluster]
		if c == nil {
			if e.outputs[w.Key.Cluster] == nil {
				continue
			}
			if owner, ok := e.claim(w.Key.Cluster, KindAccessLogPolicy, key.Namespace, key.Name, key); !ok {
				failures = append(failures, fmt.Sprintf("cluster %s: AccessLogPolicy %s/%s of cluster %s is already in force there", w.Key.Cluster, key.Namespace, key.Name, owner.Cluster))
				byCluster[w.Key.Cluster] = &snapshotv1.AccessLogPolicyConfig{} // skipped
				continue
			}
			c = &snapshotv1.AccessLogPolicyConfig{
				Policy:                  &commonv1.ObjectRef{Name: key.Name, Namespace: key.Namespace},
				IncludedRequestHeaders:  slices.Clone(spec.GetIncludedRequestHeaders()),
				IncludedResponseHeaders: slices.Clone(spec.GetIncludedResponseHeaders()),
			}
			for _, f := range spec.GetFilters() {
				c.Filters = append(c.Filters, proto.CloneOf(f))
			}
			byCluster[w.Key.Cluster] = c
			clusters = append(clusters, w.Key.Cluster)
		}
		if c.GetPolicy() == nil {
			continue
		}
		c.Workloads = append(c.Workloads, &commonv1.ObjectRef{Name: w.Key.Name, Namespace: w.Key.Namespace})
		m := &snapshotv1.AccessLogPolicyConfig_WorkloadMatch{Namespace: w.Key.Namespace, Labels: maps.Clone(w.Labels)}
		if !slices.ContainsFunc(c.WorkloadMatches, func(o *snapshotv1.AccessLogPolicyConfig_WorkloadMatch) bool {
			return o.GetNamespace() == m.GetNamespace() && maps.Equal(o.GetLabels(), m.GetLabels())
		}) {
			c.WorkloadMatches = append(c.WorkloadMatches, m)
		}
	}
	for _, cluster := range clusters {
		out := e.outputs[cluster]
		out.AccessLogPolicies = append(out.AccessLogPolicies, byCluster[cluster])
	}
	return failures
}
