package domain

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
	extensionsv1alpha1 "istio.io/api/extensions/v1alpha1"
	typev1beta1 "istio.io/api/type/v1beta1"
)

// Kinds of the Wasm output and of the policy it comes from.
const (
	ExtensionsV1alpha1       = "extensions.istio.io/v1alpha1"
	KindWasmPlugin           = "WasmPlugin"
	KindWasmDeploymentPolicy = "WasmDeploymentPolicy"
	parentKindWasm           = NetworkingV1 + ", Kind=" + KindWasmDeploymentPolicy
)

var (
	// filterName is a DNS label: the filter name is part of Kubernetes
	// object names and of the ECDS resource name.
	filterName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	sha256Hex  = regexp.MustCompile(`^[a-f0-9]{64}$`)
	// ociRef is the shape of an image reference without a scheme:
	// registry host (optionally with a port), one or more path
	// components, then a tag, a digest or both.
	ociRef = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`)
)

// wasmPolicy is a WasmDeploymentPolicy being translated.
type wasmPolicy struct {
	Key    ObjectKey
	Meta   *commonv1.ObjectMeta
	Spec   *networkingv1.WasmDeploymentPolicySpec
	Errors []string
	// Failures are outputs that could not be written: names another
	// policy already has.
	Failures  []string
	Workloads []*workload
	// Denied says which selected workloads are outside the scope of the
	// cluster it was read from.
	Denied []string
}

// validateWasm returns the problems of a WasmDeploymentPolicy's spec, each
// naming the field.
func validateWasm(spec *networkingv1.WasmDeploymentPolicySpec) []string {
	var errs []string
	errs = append(errs, validateWorkloadSelectors(spec.GetWorkloadSelectors())...)
	if len(spec.GetFilters()) == 0 {
		errs = append(errs, "spec.filters: at least one filter is required")
	}
	seen := map[string]int{}
	for i, f := range spec.GetFilters() {
		at := fmt.Sprintf("spec.filters[%d]", i)
		switch name := f.GetName(); {
		case name == "":
			errs = append(errs, at+".name: required")
		case len(name) > 63 || !filterName.MatchString(name):
			errs = append(errs, fmt.Sprintf("%s.name: %q is not a DNS label (lowercase letters, digits and '-', at most 63 characters)", at, name))
		default:
			if j, dup := seen[name]; dup {
				errs = append(errs, fmt.Sprintf("%s.name: %q is also the name of spec.filters[%d]", at, name, j))
			} else {
				seen[name] = i
			}
		}
		switch src := f.GetSource().(type) {
		case *networkingv1.WasmDeploymentPolicySpec_WasmFilter_Http:
			errs = append(errs, validateHTTPSource(at+".http", src.Http)...)
		case *networkingv1.WasmDeploymentPolicySpec_WasmFilter_OciImage:
			if e := validateOCIRef(src.OciImage); e != "" {
				errs = append(errs, at+".ociImage: "+e)
			}
		default:
			errs = append(errs, at+": exactly one source is required: http or ociImage")
		}
		if id := f.GetRootId(); len(id) > 256 || strings.IndexFunc(id, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
			errs = append(errs, fmt.Sprintf("%s.rootId: %q must be at most 256 printable characters without spaces", at, id))
		}
		if _, ok := networkingv1.WasmDeploymentPolicySpec_WasmFilter_Phase_name[int32(f.GetPhase())]; !ok {
			errs = append(errs, fmt.Sprintf("%s.phase: unknown phase %d", at, f.GetPhase()))
		}
	}
	return errs
}

func validateHTTPSource(at string, h *networkingv1.WasmDeploymentPolicySpec_WasmFilter_HttpSource) []string {
	var errs []string
	u, err := url.Parse(h.GetUrl())
	switch {
	case h.GetUrl() == "":
		errs = append(errs, at+".url: required")
	case err != nil:
		errs = append(errs, fmt.Sprintf("%s.url: %v", at, err))
	case u.Scheme != "https" && u.Scheme != "http":
		errs = append(errs, fmt.Sprintf("%s.url: %q must be an http or https URL", at, h.GetUrl()))
	case u.Host == "":
		errs = append(errs, fmt.Sprintf("%s.url: %q has no host", at, h.GetUrl()))
	}
	if !sha256Hex.MatchString(h.GetSha256()) {
		errs = append(errs, fmt.Sprintf("%s.sha256: %q must be 64 lowercase hex digits (the module's SHA-256)", at, h.GetSha256()))
	}
	return errs
}

func validateOCIRef(ref string) string {
	switch {
	case ref == "":
		return "required"
	case strings.Contains(ref, "://"):
		return fmt.Sprintf("%q must be an image reference without a scheme, such as ghcr.io/example/filter:1.0", ref)
	case len(ref) > 1024 || !ociRef.MatchString(ref):
		return fmt.Sprintf("%q is not an image reference (registry/repository[:tag][@sha256:digest])", ref)
	}
	return ""
}

// validateWorkloadSelectors checks what Istio's workload selectors refuse:
// empty label keys and wildcards.
func validateWorkloadSelectors(sels []*networkingv1.WorkloadSelector) []string {
	var errs []string
	for i, s := range sels {
		m := s.GetKubeWorkloadMatcher()
		for _, k := range slices.Sorted(maps.Keys(m.GetLabels())) {
			at := fmt.Sprintf("spec.workloadSelectors[%d].kubeWorkloadMatcher.labels", i)
			if k == "" || strings.Contains(k, "*") || strings.Contains(m.GetLabels()[k], "*") {
				errs = append(errs, fmt.Sprintf("%s: %q=%q: label keys must not be empty and no wildcards are allowed", at, k, m.GetLabels()[k]))
			}
		}
	}
	return errs
}

// selectedWorkloads are the workloads that selectors pick; no selectors
// pick every workload.
func selectedWorkloads(ix *Index, sels []*networkingv1.WorkloadSelector) []*workload {
	if len(sels) == 0 {
		return ix.workloads
	}
	return ix.selectWorkloads(sels)
}

// scopedWorkloads are the workloads sels select that a resource read from
// cluster source may change, and an error per cluster of those it may not.
func scopedWorkloads(ix *Index, source string, sels []*networkingv1.WorkloadSelector) ([]*workload, []string) {
	all := selectedWorkloads(ix, sels)
	var out []*workload
	outside := map[[2]string]int{}
	for _, w := range all {
		if ix.scope.allows(source, w.Key.Cluster, w.Key.Namespace) {
			out = append(out, w)
			continue
		}
		outside[[2]string{w.Key.Cluster, w.Key.Namespace}]++
	}
	if len(outside) == 0 {
		return all, nil
	}
	var denied []string
	for _, k := range slices.SortedFunc(maps.Keys(outside), func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) }) {
		denied = append(denied, ix.scope.outOfScope("spec.workloadSelectors", fmt.Sprintf("%d selected workloads", outside[k]), source, k[0], k[1]))
	}
	return out, denied
}

// extensionOutputs collects what the Wasm and access-log translations add
// to each cluster's output; a name already taken in a cluster is reported
// to the later policy.
type extensionOutputs struct {
	outputs map[string]*snapshotv1.OutputSnapshot
	taken   map[string]ObjectKey // "<cluster>/<kind>/<namespace>/<name>" to its policy
	enc     encode.Encoder       // encodes the statuses
}

func (e *extensionOutputs) claim(cluster, kind, namespace, name string, by ObjectKey) (ObjectKey, bool) {
	k := cluster + "/" + kind + "/" + namespace + "/" + name
	if owner, ok := e.taken[k]; ok && owner != by {
		return owner, false
	}
	e.taken[k] = by
	return by, true
}

// translateExtensions adds the outputs of WasmDeploymentPolicies and
// AccessLogPolicies to outputs: WasmPlugins and ECDS filter configs, the
// access-log policies resolved per cluster, and the statuses of both
// kinds. Neither kind interacts with the others, so this runs after the
// rest of translation.
//
// A policy whose current version is invalid keeps its last valid version
// in last in force; next receives the versions to keep.
func translateExtensions(inputs map[string]*snapshotv1.InputSnapshot, ix *Index, outputs map[string]*snapshotv1.OutputSnapshot, opts Options, last, next LastGood) error {
	e := &extensionOutputs{outputs: outputs, taken: map[string]ObjectKey{}, enc: opts.enc}
	if err := translateWasm(e, ix, collectResources(inputs, (*snapshotv1.InputSnapshot).GetWasmDeploymentPolicies), opts, last.Wasm, next.Wasm); err != nil {
		return err
	}
	if err := translateAccessLogs(e, ix, collectResources(inputs, (*snapshotv1.InputSnapshot).GetAccessLogPolicies), last.AccessLogs, next.AccessLogs); err != nil {
		return err
	}
	for _, out := range outputs {
		slices.SortFunc(out.WasmFilters, func(a, b *snapshotv1.WasmFilterConfig) int { return strings.Compare(a.GetName(), b.GetName()) })
		slices.SortFunc(out.AccessLogPolicies, func(a, b *snapshotv1.AccessLogPolicyConfig) int {
			if c := strings.Compare(a.GetPolicy().GetNamespace(), b.GetPolicy().GetNamespace()); c != 0 {
				return c
			}
			return strings.Compare(a.GetPolicy().GetName(), b.GetPolicy().GetName())
		})
	}
	return nil
}

func translateWasm(e *extensionOutputs, ix *Index, in []collected[*networkingv1.WasmDeploymentPolicy], opts Options, kept, next map[ObjectKey]Kept[*networkingv1.WasmDeploymentPolicySpec]) error {
	for _, c := range in {
		p := &wasmPolicy{Key: c.Key, Meta: c.Res.GetMetadata(), Spec: c.Res.GetSpec()}
		p.Errors = validateVersion(p.Meta, p.Spec, validateWasm)
		spec, held := inForce(p.Key, p.Meta, p.Spec, p.Errors, kept)
		if len(p.Errors) == 0 || held != nil {
			p.Spec = spec
			p.Workloads, p.Denied = scopedWorkloads(ix, p.Key.Cluster, p.Spec.GetWorkloadSelectors())
			if err := emitWasm(e, p, opts); err != nil {
				return err
			}
		}
		keep(next, p.Key, held, p.Meta, p.Spec, len(p.Errors) == 0)
		st, err := e.status(NetworkingV1, KindWasmDeploymentPolicy, p.Key, p.Meta, append(slices.Clone(p.Errors), p.Denied...), p.Failures, p.Workloads, heldGeneration(held))
		if err != nil {
			return err
		}
		if out := e.outputs[p.Key.Cluster]; out != nil {
			out.Statuses = append(out.Statuses, st)
		}
	}
	return nil
}

// wasmTarget is one WasmPlugin: the workloads of a namespace that one
// distinct label set of the policy's selectors matches.
type wasmTarget struct {
	at     ObjectKey
	labels map[string]string
}

// emitWasm writes, for each filter, a WasmPlugin in every namespace with
// selected workloads (one per distinct selector label set), and one ECDS
// filter config per cluster with selected workloads.
func emitWasm(e *extensionOutputs, p *wasmPolicy, opts Options) error {
	// The distinct label sets of the selectors, in selector order; no
	// selectors means one empty set (every workload of the namespace).
	var labelSets []map[string]string
	for _, s := range p.Spec.GetWorkloadSelectors() {
		l := s.GetKubeWorkloadMatcher().GetLabels()
		if !slices.ContainsFunc(labelSets, func(o map[string]string) bool { return maps.Equal(o, l) }) {
			labelSets = append(labelSets, l)
		}
	}
	if len(labelSets) == 0 {
		labelSets = []map[string]string{nil}
	}
	var targets []wasmTarget
	seen := map[string]bool{}
	byCluster := map[string][]*commonv1.ObjectRef{}
	var clusters []string
	for _, w := range p.Workloads {
		if _, ok := byCluster[w.Key.Cluster]; !ok {
			clusters = append(clusters, w.Key.Cluster)
		}
		byCluster[w.Key.Cluster] = append(byCluster[w.Key.Cluster], &commonv1.ObjectRef{Name: w.Key.Name, Namespace: w.Key.Namespace})
		for i, l := range labelSets {
			if !matchesAnySelector(p.Spec.GetWorkloadSelectors(), l, w) {
				continue
			}
			name := p.Key.Name
			if len(labelSets) > 1 {
				name = fmt.Sprintf("%s.%d", name, i)
			}
			k := w.Key.Cluster + "/" + w.Key.Namespace + "/" + name
			if !seen[k] {
				seen[k] = true
				targets = append(targets, wasmTarget{at: ObjectKey{Cluster: w.Key.Cluster, Namespace: w.Key.Namespace, Name: name}, labels: l})
			}
		}
	}
	parents := []ParentRef{{Kind: parentKindWasm, Name: p.Key.Name, Namespace: p.Key.Namespace, Cluster: p.Key.Cluster}}
	for _, f := range p.Spec.GetFilters() {
		cfg, err := filterConfigJSON(f)
		if err != nil {
			return fmt.Errorf("WasmDeploymentPolicy %s filter %s: %w", p.Key, f.GetName(), err)
		}
		for _, t := range targets {
			out := e.outputs[t.at.Cluster]
			if out == nil {
				continue
			}
			at := t.at
			at.Name = t.at.Name + "." + f.GetName()
			if owner, ok := e.claim(at.Cluster, KindWasmPlugin, at.Namespace, at.Name, p.Key); !ok {
				p.Failures = append(p.Failures, fmt.Sprintf("spec.filters: WasmPlugin %s/%s in cluster %s is already written for WasmDeploymentPolicy %s", at.Namespace, at.Name, at.Cluster, owner))
				continue
			}
			raw, err := opts.enc.Spec(wasmPlugin(f, t.labels))
			if err != nil {
				return fmt.Errorf("WasmPlugin %s/%s in %s: %w", at.Namespace, at.Name, at.Cluster, err)
			}
			out.Objects = append(out.Objects, makeObject(ExtensionsV1alpha1, KindWasmPlugin, at, parents, raw, opts))
		}
		for _, cluster := range clusters {
			out := e.outputs[cluster]
			if out == nil {
				continue
			}
			name := "meshplane." + p.Key.Namespace + "." + p.Key.Name + "." + f.GetName()
			if owner, ok := e.claim(cluster, "ecds", "", name, p.Key); !ok {
				p.Failures = append(p.Failures, fmt.Sprintf("spec.filters: the ECDS filter %s in cluster %s is already served for WasmDeploymentPolicy %s", name, cluster, owner))
				continue
			}
			fc := &snapshotv1.WasmFilterConfig{
				Name:       name,
				Policy:     &commonv1.ObjectRef{Name: p.Key.Name, Namespace: p.Key.Namespace},
				Workloads:  byCluster[cluster],
				RootId:     f.GetRootId(),
				ConfigJson: cfg,
				Phase:      f.GetPhase(),
				Priority:   f.GetPriority(),
			}
			if h := f.GetHttp(); h != nil {
				fc.Url, fc.Sha256 = h.GetUrl(), h.GetSha256()
			}
			out.WasmFilters = append(out.WasmFilters, fc)
		}
	}
	return nil
}

// matchesAnySelector says whether a selector with exactly labels selects
// w; with no selectors, every workload is selected.
func matchesAnySelector(sels []*networkingv1.WorkloadSelector, labels map[string]string, w *workload) bool {
	if len(sels) == 0 {
		return true
	}
	for _, s := range sels {
		m := s.GetKubeWorkloadMatcher()
		if maps.Equal(m.GetLabels(), labels) && matchWorkload(m, w) {
			return true
		}
	}
	return false
}

// wasmPlugin is the Istio WasmPlugin spec of filter f for the workloads
// with labels.
func wasmPlugin(f *networkingv1.WasmDeploymentPolicySpec_WasmFilter, labels map[string]string) *extensionsv1alpha1.WasmPlugin {
	wp := &extensionsv1alpha1.WasmPlugin{
		PluginName:   f.GetRootId(),
		PluginConfig: f.GetConfig(),
		Phase:        extensionsv1alpha1.PluginPhase(f.GetPhase()),
		Type:         extensionsv1alpha1.PluginType_HTTP,
	}
	if len(labels) > 0 {
		wp.Selector = &typev1beta1.WorkloadSelector{MatchLabels: maps.Clone(labels)}
	}
	// Always set: Istio orders a WasmPlugin without a priority after every
	// one with a priority, negative ones included, where the policy's 0
	// (unset) sits between 1 and -1.
	wp.Priority = wrapperspb.Int32(f.GetPriority())
	if h := f.GetHttp(); h != nil {
		wp.Url, wp.Sha256 = h.GetUrl(), h.GetSha256()
	} else {
		wp.Url = "oci://" + f.GetOciImage()
	}
	return wp
}

// filterConfigJSON is the filter's configuration as compact JSON; nil
// when it has none.
func filterConfigJSON(f *networkingv1.WasmDeploymentPolicySpec_WasmFilter) ([]byte, error) {
	if f.GetConfig() == nil {
		return nil, nil
	}
	raw, err := protojson.Marshal(f.GetConfig())
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// status is the ResourceStatus of a WasmDeploymentPolicy or an
// AccessLogPolicy: INVALID with the validation errors, FAILED with the
// outputs that could not be written, or ACCEPTED; with the workloads it
// selects.
func (e *extensionOutputs) status(apiVersion, kind string, key ObjectKey, md *commonv1.ObjectMeta, errs, failures []string, ws []*workload, held *int64) (*snapshotv1.ResourceStatus, error) {
	s := &commonv1.ResourceStatus{
		ObservedGeneration: md.GetGeneration(),
		State:              commonv1.ApprovalState_ACCEPTED,
		Errors:             append(slices.Clone(errs), failures...),
	}
	if held != nil {
		s.LastKnownGood = true
		s.Errors = append(s.Errors, lastGoodMessage(*held))
	}
	switch {
	case len(errs) > 0:
		s.State = commonv1.ApprovalState_INVALID
	case len(failures) > 0:
		s.State = commonv1.ApprovalState_FAILED
	}
	for _, w := range ws {
		s.Workloads = append(s.Workloads, &commonv1.ClusterObjectRef{Name: w.Key.Name, Namespace: w.Key.Namespace, Cluster: w.Key.Cluster})
	}
	return resourceStatus(e.enc, apiVersion, kind, key, md.GetGeneration(), s)
}

// heldGeneration is the generation of a last valid version held in force,
// or nil.
func heldGeneration[S any](held *Kept[S]) *int64 {
	if held == nil {
		return nil
	}
	return &held.Generation
}
