package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/libs/snapshots/meshview"
	"github.com/spf13/cobra"
)

// description is what `meshctl describe` prints for one object.
type description struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Cluster   string `json:"cluster"`
	// Details are facts about the object, in print order.
	Details []detail `json:"details,omitempty"`
	// Applied are the policies in force for it, in acceptance order.
	Applied []appliedRow `json:"applied"`
	// Targets are, for a policy, the destinations or meshes it selects.
	Targets  []targetRow `json:"targets,omitempty"`
	Rejected []rejectRow `json:"rejected"`
	// Unplaced are policies in the object's namespace rejected as a whole,
	// before they selected anything: they may have been meant for it.
	Unplaced []rejectRow     `json:"invalidInNamespace,omitempty"`
	Warnings []string        `json:"warnings,omitempty"`
	Objects  []objectRow     `json:"istioObjects"`
	Status   json.RawMessage `json:"status,omitempty"`
	// Object is the discovered object with status.applied_* as
	// translation returned it (-o json|yaml only).
	Object json.RawMessage `json:"object,omitempty"`
}

type detail struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type appliedRow struct {
	Order      uint32 `json:"acceptanceOrder"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Cluster    string `json:"cluster,omitempty"`
	Generation int64  `json:"observedGeneration,omitempty"`
}

type rejectRow struct {
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name"`
	Cluster   string   `json:"cluster"`
	State     string   `json:"state"`
	Errors    []string `json:"errors,omitempty"`
}

type targetRow struct {
	Target   string   `json:"target"`
	Order    uint32   `json:"acceptanceOrder"`
	State    string   `json:"state"`
	Errors   []string `json:"errors,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

type objectRow = meshview.OutputObject

// Kinds of the parents named in the meshplane.dev/parents annotation.
const (
	parentDestination = meshview.ParentDestination
	parentMesh        = meshview.ParentMesh
)

var policyKinds = []string{"TrafficPolicy", "AccessPolicy", "VirtualMesh", "VirtualDestination", "Settings"}

func newDescribeCmd() *cobra.Command {
	var namespace, cluster, kind string
	cmd := &cobra.Command{
		Use:   "describe destination|policy|mesh|workload NAME",
		Short: "Show which policies apply to an object, in what order, which were rejected and why, and the Istio objects written for it",
		Long: `Show, for a destination (by its Service name), a policy (TrafficPolicy,
AccessPolicy, VirtualMesh, VirtualDestination or Settings), a mesh or a
workload, as the last translation saw it:

  - the policies that apply, in acceptance order (the lower order owns a
    field when two policies set it);
  - the policies that were rejected for it, and why (their status errors);
  - the Istio objects written for it, and in which cluster (objects name
    their parents in the meshplane.dev/parents annotation).

The data comes from translation: TranslationService.Describe for the
discovered objects and the output snapshots of every cluster for statuses
and objects. It needs a management service certificate, like 'meshctl
snapshot dump'.`,
		Example: `  meshctl describe destination reviews -n default --cluster east --pki-dir .dev-pki
  meshctl describe policy reviews-timeout -n default
  meshctl describe mesh istiod-istio-system-east -o yaml
  meshctl describe workload reviews-v1 -n default --cluster east`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("want a kind (destination, policy, mesh or workload) and a name, got %q", args)
			}
			if !slices.Contains(describeKinds, args[0]) {
				return usagef("unknown kind %q: want destination, policy, mesh or workload", args[0])
			}
			return nil
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return describeKinds, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
	}
	cf := addClientFlags(cmd)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the object; default any")
	cmd.Flags().StringVar(&cluster, "cluster", "", "cluster of the object (for a policy: the cluster it was applied in); default any")
	_ = cmd.RegisterFlagCompletionFunc("cluster", cf.completeClusters(false))
	cmd.Flags().StringVar(&kind, "kind", "", "for policy: only this kind ("+strings.Join(policyKinds, ", ")+")")
	_ = cmd.RegisterFlagCompletionFunc("kind", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return policyKinds, cobra.ShellCompDirectiveNoFileComp
	})
	out := addOutputFlag(cmd, "table", "table", "yaml", "json")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		if kind != "" && (args[0] != "policy" || !slices.Contains(policyKinds, kind)) {
			return usagef("--kind goes with describe policy, and is one of %s", strings.Join(policyKinds, ", "))
		}
		c, err := cf.connect()
		if err != nil {
			return err
		}
		defer c.close()
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		v, err := loadView(ctx, c)
		if err != nil {
			return err
		}
		f := filter{name: args[1], namespace: namespace, cluster: cluster}
		var descs []description
		switch args[0] {
		case "destination":
			descs, err = v.describeDestinations(ctx, f)
		case "mesh":
			descs, err = v.describeMeshes(ctx, f)
		case "workload":
			descs, err = v.describeWorkloads(ctx, f)
		case "policy":
			descs = v.describePolicies(f, kind)
		}
		if err != nil {
			return err
		}
		if len(descs) == 0 {
			return callErr{fmt.Errorf("%s %s not found%s\nhint: %s", args[0], args[1], f.where(), notFoundHint(args[0]))}
		}
		w := cmd.OutOrStdout()
		if out.format != "table" {
			return printStructured(w, out.format, descs)
		}
		for i, d := range descs {
			if i > 0 {
				fmt.Fprintln(w)
			}
			printDescription(w, d)
		}
		return nil
	}
	return cmd
}

var describeKinds = []string{"destination", "policy", "mesh", "workload"}

func notFoundHint(kind string) string {
	switch kind {
	case "destination":
		return "a destination is named by its Service (reviews, not reviews-default-east); `meshctl snapshot dump --input --cluster C -o table` lists what was discovered"
	case "policy":
		return "a policy has a status once translation has seen it; is it applied in a registered cluster or the management cluster?"
	}
	return "`meshctl snapshot dump --input --cluster C -o table` lists what was discovered"
}

type filter struct{ name, namespace, cluster string }

func (f filter) where() string {
	var parts []string
	if f.namespace != "" {
		parts = append(parts, "namespace "+f.namespace)
	}
	if f.cluster != "" {
		parts = append(parts, "cluster "+f.cluster)
	}
	if len(parts) == 0 {
		return ""
	}
	return " in " + strings.Join(parts, ", ")
}

func (f filter) matches(name, namespace, cluster string) bool {
	return f.name == name && (f.namespace == "" || f.namespace == namespace) && (f.cluster == "" || f.cluster == cluster)
}

// view is what translation holds: the output snapshot of every cluster.
type view struct {
	tc       translationv1connect.TranslationServiceClient
	c        *conn
	clusters []string
	outputs  map[string]*snapshotv1.OutputSnapshot
}

func loadView(ctx context.Context, c *conn) (*view, error) {
	tc := translationv1connect.NewTranslationServiceClient(c.hc, c.base, c.opts...)
	st, err := tc.GetStatus(ctx, connect.NewRequest(&translationv1.GetStatusRequest{}))
	if err != nil {
		return nil, c.callError("translation", err)
	}
	v := &view{tc: tc, c: c, outputs: map[string]*snapshotv1.OutputSnapshot{}}
	v.clusters = slices.Sorted(maps.Keys(st.Msg.GetOutputVersions()))
	for _, cl := range v.clusters {
		res, err := tc.GetOutputSnapshot(ctx, connect.NewRequest(&translationv1.GetOutputSnapshotRequest{Cluster: cl}))
		if connect.CodeOf(err) == connect.CodeNotFound {
			continue
		}
		if err != nil {
			return nil, c.callError("translation", err)
		}
		v.outputs[cl] = res.Msg.GetSnapshot()
	}
	return v, nil
}

func (v *view) describe(ctx context.Context, f filter) (*translationv1.DescribeResponse, error) {
	res, err := v.tc.Describe(ctx, connect.NewRequest(&translationv1.DescribeRequest{Cluster: f.cluster, Namespace: f.namespace, Name: f.name}))
	if err != nil {
		return nil, v.c.callError("translation", err)
	}
	return res.Msg, nil
}

type statusEntry struct {
	cluster string
	rs      *snapshotv1.ResourceStatus
	st      meshview.Status
}

func (v *view) statuses() []statusEntry {
	var out []statusEntry
	for _, cl := range v.clusters {
		for _, rs := range v.outputs[cl].GetStatuses() {
			out = append(out, statusEntry{cluster: cl, rs: rs, st: meshview.ParseStatus(rs)})
		}
	}
	return out
}

// objectsWithParent lists the objects of every cluster that name the
// parent (kind as in the annotation) with name, namespace and cluster.
func (v *view) objectsWithParent(kind, name, namespace, cluster string) []objectRow {
	return meshview.ObjectsWithParent(v.clusters, v.outputs, kind, meshview.Ref{Name: name, Namespace: namespace, Cluster: cluster})
}

func applied(kind string, list []*commonv1.AppliedPolicy) []appliedRow {
	out := make([]appliedRow, 0, len(list))
	for _, p := range list {
		out = append(out, appliedRow{Order: p.GetAcceptanceOrder(), Kind: kind, Namespace: p.GetRef().GetNamespace(), Name: p.GetRef().GetName(), Cluster: p.GetRef().GetCluster(), Generation: p.GetObservedGeneration()})
	}
	return out
}

// rejectedFor lists the policies whose status rejects the target key (in
// their destinations or meshes), and the warnings of those that accept it.
func (v *view) rejectedFor(keys []string, byMesh bool) ([]rejectRow, []string) {
	rejected := []rejectRow{}
	var warnings []string
	for _, e := range v.statuses() {
		targets := e.st.Destinations
		if byMesh {
			targets = e.st.Meshes
		}
		for _, k := range keys {
			ts, ok := targets[k]
			if !ok {
				continue
			}
			if ts.State != "ACCEPTED" {
				rejected = append(rejected, rejectRow{Kind: e.rs.GetKind(), Namespace: e.rs.GetNamespace(), Name: e.rs.GetName(), Cluster: e.cluster, State: cmp.Or(ts.State, "PENDING"), Errors: ts.Errors})
			}
			for _, w := range ts.Warnings {
				warnings = append(warnings, fmt.Sprintf("%s %s (cluster %s): %s", e.rs.GetKind(), nsName(e.rs.GetNamespace(), e.rs.GetName()), e.cluster, w))
			}
		}
	}
	return rejected, warnings
}

// unplaced lists the TrafficPolicies and AccessPolicies in namespace that
// are INVALID without a destination in their status: validation rejected
// them before selection, so no destination names them.
func (v *view) unplaced(namespace string) []rejectRow {
	var out []rejectRow
	for _, e := range v.statuses() {
		k := e.rs.GetKind()
		if (k != "TrafficPolicy" && k != "AccessPolicy") || e.rs.GetNamespace() != namespace || e.st.State == "ACCEPTED" || len(e.st.Destinations) > 0 {
			continue
		}
		out = append(out, rejectRow{Kind: k, Namespace: e.rs.GetNamespace(), Name: e.rs.GetName(), Cluster: e.cluster, State: e.st.State, Errors: e.st.Errors})
	}
	return out
}

func (v *view) describeDestinations(ctx context.Context, f filter) ([]description, error) {
	res, err := v.describe(ctx, f)
	if err != nil {
		return nil, err
	}
	var out []description
	for _, d := range res.GetDestinations() {
		ref := d.GetSpec().GetKubeService().GetRef()
		cl := cmp.Or(d.GetMetadata().GetCluster(), ref.GetCluster())
		desc := description{Kind: "Destination", Name: ref.GetName(), Namespace: ref.GetNamespace(), Cluster: cl, Object: protoJSON(d)}
		st := d.GetStatus()
		desc.Details = append(desc.Details, detail{"Discovered as", d.GetMetadata().GetNamespace() + "/" + d.GetMetadata().GetName()})
		if m := d.GetSpec().GetMesh(); m != nil {
			desc.Details = append(desc.Details, detail{"Mesh", nsName(m.GetNamespace(), m.GetName())})
		}
		desc.Details = append(desc.Details, detail{"Local FQDN", st.GetLocalFqdn()})
		for _, fh := range st.GetFederatedHostnames() {
			desc.Details = append(desc.Details, detail{"Federated hostname", fh.GetHostname() + " (in mesh " + nsName(fh.GetMesh().GetNamespace(), fh.GetMesh().GetName()) + ")"})
		}
		desc.Applied = append(applied("TrafficPolicy", st.GetAppliedTrafficPolicies()), applied("AccessPolicy", st.GetAppliedAccessPolicies())...)
		desc.Rejected, desc.Warnings = v.rejectedFor([]string{ref.GetName() + "." + ref.GetNamespace() + "." + cl}, false)
		desc.Unplaced = v.unplaced(ref.GetNamespace())
		desc.Objects = v.objectsWithParent(parentDestination, ref.GetName(), ref.GetNamespace(), cl)
		out = append(out, desc)
	}
	return out, nil
}

func (v *view) describeMeshes(ctx context.Context, f filter) ([]description, error) {
	res, err := v.describe(ctx, f)
	if err != nil {
		return nil, err
	}
	var out []description
	for _, m := range res.GetMeshes() {
		md := m.GetMetadata()
		desc := description{Kind: "Mesh", Name: md.GetName(), Namespace: md.GetNamespace(), Cluster: md.GetCluster(), Object: protoJSON(m)}
		if is := m.GetSpec().GetIstio(); is != nil {
			desc.Details = append(desc.Details,
				detail{"Istio", fmt.Sprintf("%s in %s", dash(is.GetInstallation().GetVersion()), is.GetInstallation().GetNamespace())},
				detail{"Trust domain", dash(is.GetTrustDomain())})
			for _, g := range is.GetEastWestGateways() {
				desc.Details = append(desc.Details, detail{"East-west gateway", fmt.Sprintf("%s:%d", g.GetExternalAddress(), g.GetExternalTlsPort())})
			}
		}
		st := m.GetStatus()
		if vm := st.GetAppliedVirtualMesh(); vm != nil {
			row := appliedRow{Kind: "VirtualMesh", Namespace: vm.GetNamespace(), Name: vm.GetName(), Generation: st.GetObservedGeneration()}
			// The reference has no cluster; the VirtualMesh's status is in
			// the output of the cluster it was applied in.
			for _, e := range v.statuses() {
				if e.rs.GetKind() == "VirtualMesh" && e.rs.GetName() == vm.GetName() && e.rs.GetNamespace() == vm.GetNamespace() {
					row.Cluster = e.cluster
				}
			}
			desc.Applied = append(desc.Applied, row)
		}
		desc.Applied = append(desc.Applied, applied("VirtualDestination", st.GetAppliedVirtualDestinations())...)
		desc.Rejected, desc.Warnings = v.rejectedFor([]string{md.GetName() + "." + md.GetNamespace(), md.GetName() + "." + md.GetNamespace() + "." + md.GetCluster()}, true)
		desc.Objects = v.objectsWithParent(parentMesh, md.GetName(), md.GetNamespace(), md.GetCluster())
		out = append(out, desc)
	}
	return out, nil
}

func (v *view) describeWorkloads(ctx context.Context, f filter) ([]description, error) {
	res, err := v.describe(ctx, f)
	if err != nil {
		return nil, err
	}
	var out []description
	for _, w := range res.GetWorkloads() {
		md := w.GetMetadata()
		k := w.GetSpec().GetKubernetes()
		name, ns := md.GetName(), md.GetNamespace()
		if name == "" {
			name, ns = k.GetController().GetName(), k.GetController().GetNamespace()
		}
		desc := description{Kind: "Workload", Name: name, Namespace: ns, Cluster: md.GetCluster(), Object: protoJSON(w)}
		if k != nil {
			desc.Details = append(desc.Details,
				detail{"Controller", k.GetControllerKind() + " " + nsName(k.GetController().GetNamespace(), k.GetController().GetName())},
				detail{"Service account", dash(k.GetServiceAccountName())},
				detail{"Pod labels", formatLabels(k.GetPodLabels())})
		}
		if m := w.GetSpec().GetMesh(); m != nil {
			desc.Details = append(desc.Details, detail{"Mesh", nsName(m.GetNamespace(), m.GetName())})
		}
		st := w.GetStatus()
		desc.Applied = append(applied("TrafficPolicy", st.GetAppliedTrafficPolicies()), applied("AccessPolicy", st.GetAppliedAccessPolicies())...)
		desc.Rejected = []rejectRow{}
		for _, e := range v.statuses() {
			if e.st.State == "ACCEPTED" {
				continue
			}
			for _, ref := range e.st.Workloads {
				if ref.Name == name && ref.Namespace == ns && ref.Cluster == desc.Cluster {
					desc.Rejected = append(desc.Rejected, rejectRow{Kind: e.rs.GetKind(), Namespace: e.rs.GetNamespace(), Name: e.rs.GetName(), Cluster: e.cluster, State: e.st.State, Errors: e.st.Errors})
				}
			}
		}
		// The objects that govern traffic to the workload are those of the
		// destinations that select it.
		dests, err := v.describe(ctx, filter{cluster: desc.Cluster})
		if err != nil {
			return nil, err
		}
		desc.Objects = []objectRow{}
		for _, d := range dests.GetDestinations() {
			ks := d.GetSpec().GetKubeService()
			sel := ks.GetWorkloadSelectorLabels()
			if len(sel) == 0 || ks.GetRef().GetNamespace() != ns || !labelsMatch(sel, k.GetPodLabels()) {
				continue
			}
			desc.Details = append(desc.Details, detail{"Selected by destination", ks.GetRef().GetName()})
			desc.Objects = append(desc.Objects, v.objectsWithParent(parentDestination, ks.GetRef().GetName(), ks.GetRef().GetNamespace(), desc.Cluster)...)
		}
		out = append(out, desc)
	}
	return out, nil
}

func (v *view) describePolicies(f filter, kind string) []description {
	var out []description
	for _, e := range v.statuses() {
		rs := e.rs
		if !slices.Contains(policyKinds, rs.GetKind()) || (kind != "" && rs.GetKind() != kind) || !f.matches(rs.GetName(), rs.GetNamespace(), e.cluster) {
			continue
		}
		desc := description{Kind: rs.GetKind(), Name: rs.GetName(), Namespace: rs.GetNamespace(), Cluster: e.cluster, Status: json.RawMessage(rs.GetStatus()), Applied: []appliedRow{}}
		desc.Details = append(desc.Details, detail{"State", e.st.State}, detail{"Observed generation", fmt.Sprint(rs.GetObservedGeneration())})
		if e.st.LastGood {
			desc.Details = append(desc.Details, detail{"Last known good", "an invalid edit left the last valid version in force"})
		}
		desc.Rejected = []rejectRow{}
		if e.st.State != "ACCEPTED" && len(e.st.Errors) > 0 {
			desc.Rejected = append(desc.Rejected, rejectRow{Kind: rs.GetKind(), Namespace: rs.GetNamespace(), Name: rs.GetName(), Cluster: e.cluster, State: e.st.State, Errors: e.st.Errors})
		}
		targets := e.st.Destinations
		what := "destination"
		if len(e.st.Meshes) > 0 {
			targets, what = e.st.Meshes, "mesh"
		}
		for _, k := range slices.Sorted(maps.Keys(targets)) {
			ts := targets[k]
			desc.Targets = append(desc.Targets, targetRow{Target: what + " " + k, Order: ts.Order, State: cmp.Or(ts.State, "PENDING"), Errors: ts.Errors, Warnings: ts.Warnings})
		}
		for _, wl := range e.st.Workloads {
			desc.Details = append(desc.Details, detail{"Source workload", wl.Name + "." + wl.Namespace + "." + wl.Cluster})
		}
		apiVersion := rs.GetApiVersion()
		desc.Objects = v.objectsWithParent(apiVersion+", Kind="+rs.GetKind(), rs.GetName(), rs.GetNamespace(), e.cluster)
		out = append(out, desc)
	}
	return out
}

func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func formatLabels(l map[string]string) string {
	if len(l) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

// printDescription writes d as kubectl describe does: fields, then
// sections with tables.
func printDescription(w io.Writer, d description) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Kind:\t%s\n", d.Kind)
	fmt.Fprintf(tw, "Name:\t%s\n", d.Name)
	if d.Namespace != "" {
		fmt.Fprintf(tw, "Namespace:\t%s\n", d.Namespace)
	}
	fmt.Fprintf(tw, "Cluster:\t%s\n", d.Cluster)
	for _, kv := range d.Details {
		fmt.Fprintf(tw, "%s:\t%s\n", kv.Key, kv.Value)
	}
	tw.Flush()

	if d.Targets != nil {
		fmt.Fprintln(w, "Selected (acceptance order per target):")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  TARGET\tORDER\tSTATE\tERRORS AND WARNINGS")
		for _, t := range d.Targets {
			notes := append(append([]string(nil), t.Errors...), prefixAll("warning: ", t.Warnings)...)
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", t.Target, t.Order, t.State, dash(strings.Join(notes, "; ")))
		}
		tw.Flush()
	}
	if d.Kind == "Destination" || d.Kind == "Mesh" || d.Kind == "Workload" {
		fmt.Fprintln(w, "Applied policies (acceptance order):")
		if len(d.Applied) == 0 {
			fmt.Fprintln(w, "  <none>")
		} else {
			tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  ORDER\tKIND\tNAMESPACE\tNAME\tCLUSTER\tGENERATION")
			for _, a := range d.Applied {
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%d\n", a.Order, a.Kind, dash(a.Namespace), a.Name, dash(a.Cluster), a.Generation)
			}
			tw.Flush()
		}
	}
	fmt.Fprintln(w, "Rejected:")
	if len(d.Rejected) == 0 {
		fmt.Fprintln(w, "  <none>")
	}
	for _, r := range d.Rejected {
		fmt.Fprintf(w, "  %s %s (cluster %s): %s\n", r.Kind, nsName(r.Namespace, r.Name), r.Cluster, r.State)
		for _, e := range r.Errors {
			fmt.Fprintf(w, "    %s\n", e)
		}
	}
	if len(d.Unplaced) > 0 {
		fmt.Fprintln(w, "Invalid policies in the namespace (rejected before selecting any destination):")
		for _, r := range d.Unplaced {
			fmt.Fprintf(w, "  %s %s (cluster %s): %s; see `meshctl describe policy %s -n %s`\n", r.Kind, nsName(r.Namespace, r.Name), r.Cluster, r.State, r.Name, r.Namespace)
		}
	}
	if len(d.Warnings) > 0 {
		fmt.Fprintln(w, "Warnings:")
		for _, s := range d.Warnings {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	fmt.Fprintln(w, "Istio objects:")
	if len(d.Objects) == 0 {
		fmt.Fprintln(w, "  <none>")
		return
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLUSTER\tKIND\tNAMESPACE\tNAME")
	for _, o := range d.Objects {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", o.Cluster, o.Kind, dash(o.Namespace), o.Name)
	}
	tw.Flush()
}

func prefixAll(p string, s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = p + x
	}
	return out
}
