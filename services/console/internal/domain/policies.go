package domain

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots/meshview"
)

// Outputs are the output snapshots of every cluster translation holds.
type Outputs map[string]*snapshotv1.OutputSnapshot

// Clusters are the outputs' clusters, sorted.
func (o Outputs) Clusters() []string { return slices.Sorted(maps.Keys(o)) }

// Target is a policy's outcome for one destination or mesh.
type Target struct {
	Target          string
	AcceptanceOrder uint32
	State           string
	Errors          []string
	Warnings        []string
}

// Policy is one user policy as translation reported it.
type Policy struct {
	Kind, Name, Namespace, Cluster string
	State                          string
	ObservedGeneration             uint64
	Errors                         []string
	LastKnownGood                  bool
	Targets                        []Target
	Objects                        []meshview.OutputObject
	StatusJSON                     string
}

// Policies lists the policies of the kinds the console shows (all of them
// when kinds is empty) from every output's statuses, with the objects each
// produced; keep decides, per kind and namespace, whether the user may see
// them.
func Policies(outs Outputs, kinds []string, keep func(kind, namespace string) bool) []Policy {
	clusters := outs.Clusters()
	var out []Policy
	for _, cl := range clusters {
		for _, rs := range outs[cl].GetStatuses() {
			if _, ok := PolicyKindOf(rs.GetKind()); !ok || (len(kinds) > 0 && !slices.Contains(kinds, rs.GetKind())) || !keep(rs.GetKind(), rs.GetNamespace()) {
				continue
			}
			out = append(out, policyOf(clusters, outs, cl, rs))
		}
	}
	slices.SortFunc(out, func(a, b Policy) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Cluster, b.Cluster))
	})
	return out
}

func policyOf(clusters []string, outs Outputs, cl string, rs *snapshotv1.ResourceStatus) Policy {
	st := meshview.ParseStatus(rs)
	p := Policy{
		Kind: rs.GetKind(), Name: rs.GetName(), Namespace: rs.GetNamespace(), Cluster: cl, State: st.State,
		ObservedGeneration: uint64(max(rs.GetObservedGeneration(), 0)), Errors: st.Errors, LastKnownGood: st.LastGood,
		StatusJSON: string(rs.GetStatus()),
	}
	targets, what := st.Destinations, "destination"
	if len(st.Meshes) > 0 {
		targets, what = st.Meshes, "mesh"
	}
	for _, k := range slices.Sorted(maps.Keys(targets)) {
		ts := targets[k]
		p.Targets = append(p.Targets, Target{Target: what + " " + k, AcceptanceOrder: ts.Order, State: cmp.Or(ts.State, "PENDING"), Errors: ts.Errors, Warnings: ts.Warnings})
	}
	p.Objects = meshview.ObjectsWithParent(clusters, outs, meshview.ParentKey(rs.GetApiVersion(), rs.GetKind()), meshview.Ref{Name: rs.GetName(), Namespace: rs.GetNamespace(), Cluster: cl})
	return p
}

// Detail is one fact about a described object.
type Detail struct{ Name, Value string }

// AppliedPolicy is a policy in force for an object.
type AppliedPolicy struct {
	AcceptanceOrder                uint32
	Kind, Name, Namespace, Cluster string
}

// Rejection is a policy that names an object but was not applied.
type Rejection struct {
	Kind, Name, Namespace, Cluster, State string
	Errors                                []string
}

// Description is what `meshctl describe` shows for one object.
type Description struct {
	Kind, Name, Namespace, Cluster string
	Details                        []Detail
	Applied                        []AppliedPolicy
	Rejected                       []Rejection
	Objects                        []meshview.OutputObject
	Related                        []string
}

func applied(kind string, list []*commonv1.AppliedPolicy) []AppliedPolicy {
	out := make([]AppliedPolicy, 0, len(list))
	for _, p := range list {
		out = append(out, AppliedPolicy{AcceptanceOrder: p.GetAcceptanceOrder(), Kind: kind, Namespace: p.GetRef().GetNamespace(), Name: p.GetRef().GetName(), Cluster: p.GetRef().GetCluster()})
	}
	return out
}

// rejectedFor lists the policies whose status does not accept one of the
// target keys (destinations, or meshes with byMesh).
func rejectedFor(outs Outputs, keys []string, byMesh bool) []Rejection {
	var out []Rejection
	for _, cl := range outs.Clusters() {
		for _, rs := range outs[cl].GetStatuses() {
			st := meshview.ParseStatus(rs)
			targets := st.Destinations
			if byMesh {
				targets = st.Meshes
			}
			for _, k := range keys {
				if ts, ok := targets[k]; ok && ts.State != "ACCEPTED" {
					out = append(out, Rejection{Kind: rs.GetKind(), Namespace: rs.GetNamespace(), Name: rs.GetName(), Cluster: cl, State: cmp.Or(ts.State, "PENDING"), Errors: ts.Errors})
				}
			}
		}
	}
	return out
}

// DescribeDestination is `meshctl describe destination`, with the
// workloads behind it as links.
func DescribeDestination(outs Outputs, d *discoveryv1.Destination, workloads []*discoveryv1.Workload) Description {
	ref := d.GetSpec().GetKubeService().GetRef()
	cl := cmp.Or(d.GetMetadata().GetCluster(), ref.GetCluster())
	desc := Description{Kind: "Destination", Name: ref.GetName(), Namespace: ref.GetNamespace(), Cluster: cl}
	st := d.GetStatus()
	desc.Details = append(desc.Details, Detail{"Discovered as", d.GetMetadata().GetNamespace() + "/" + d.GetMetadata().GetName()})
	if m := d.GetSpec().GetMesh(); m != nil {
		desc.Details = append(desc.Details, Detail{"Mesh", m.GetNamespace() + "/" + m.GetName()})
	}
	desc.Details = append(desc.Details, Detail{"Local FQDN", st.GetLocalFqdn()})
	for _, fh := range st.GetFederatedHostnames() {
		desc.Details = append(desc.Details, Detail{"Federated hostname", fh.GetHostname() + " (in mesh " + fh.GetMesh().GetNamespace() + "/" + fh.GetMesh().GetName() + ")"})
	}
	desc.Applied = append(applied("TrafficPolicy", st.GetAppliedTrafficPolicies()), applied("AccessPolicy", st.GetAppliedAccessPolicies())...)
	desc.Rejected = rejectedFor(outs, []string{ref.GetName() + "." + ref.GetNamespace() + "." + cl}, false)
	desc.Objects = meshview.ObjectsWithParent(outs.Clusters(), outs, meshview.ParentDestination, meshview.Ref{Name: ref.GetName(), Namespace: ref.GetNamespace(), Cluster: cl})
	sel := d.GetSpec().GetKubeService().GetWorkloadSelectorLabels()
	for _, w := range workloads {
		if name, ns := workloadName(w); len(sel) > 0 && ns == ref.GetNamespace() && w.GetMetadata().GetCluster() == cl && labelsMatch(sel, w.GetSpec().GetKubernetes().GetPodLabels()) {
			desc.Related = append(desc.Related, NodeID(NodeWorkload, name, ns, cl))
		}
	}
	return desc
}

// DescribeMesh is `meshctl describe mesh`.
func DescribeMesh(outs Outputs, m *discoveryv1.Mesh) Description {
	md := m.GetMetadata()
	desc := Description{Kind: "Mesh", Name: md.GetName(), Namespace: md.GetNamespace(), Cluster: md.GetCluster()}
	if is := m.GetSpec().GetIstio(); is != nil {
		desc.Details = append(desc.Details,
			Detail{"Istio", fmt.Sprintf("%s in %s", is.GetInstallation().GetVersion(), is.GetInstallation().GetNamespace())},
			Detail{"Trust domain", is.GetTrustDomain()})
		for _, g := range is.GetEastWestGateways() {
			desc.Details = append(desc.Details, Detail{"East-west gateway", fmt.Sprintf("%s:%d", g.GetExternalAddress(), g.GetExternalTlsPort())})
		}
	}
	st := m.GetStatus()
	if vm := st.GetAppliedVirtualMesh(); vm != nil {
		desc.Applied = append(desc.Applied, AppliedPolicy{Kind: "VirtualMesh", Namespace: vm.GetNamespace(), Name: vm.GetName()})
	}
	desc.Applied = append(desc.Applied, applied("VirtualDestination", st.GetAppliedVirtualDestinations())...)
	desc.Rejected = rejectedFor(outs, []string{md.GetName() + "." + md.GetNamespace(), md.GetName() + "." + md.GetNamespace() + "." + md.GetCluster()}, true)
	desc.Objects = meshview.ObjectsWithParent(outs.Clusters(), outs, meshview.ParentMesh, meshview.Ref{Name: md.GetName(), Namespace: md.GetNamespace(), Cluster: md.GetCluster()})
	return desc
}

// DescribeWorkload is `meshctl describe workload`, with the destinations
// that select it as links.
func DescribeWorkload(outs Outputs, w *discoveryv1.Workload, dests []*discoveryv1.Destination) Description {
	name, ns := workloadName(w)
	k := w.GetSpec().GetKubernetes()
	desc := Description{Kind: "Workload", Name: name, Namespace: ns, Cluster: w.GetMetadata().GetCluster()}
	if k != nil {
		desc.Details = append(desc.Details,
			Detail{"Controller", k.GetControllerKind() + " " + k.GetController().GetNamespace() + "/" + k.GetController().GetName()},
			Detail{"Service account", k.GetServiceAccountName()})
	}
	st := w.GetStatus()
	desc.Applied = append(applied("TrafficPolicy", st.GetAppliedTrafficPolicies()), applied("AccessPolicy", st.GetAppliedAccessPolicies())...)
	for _, cl := range outs.Clusters() {
		for _, rs := range outs[cl].GetStatuses() {
			s := meshview.ParseStatus(rs)
			if s.State != "ACCEPTED" && slices.Contains(s.Workloads, meshview.Ref{Name: name, Namespace: ns, Cluster: desc.Cluster}) {
				desc.Rejected = append(desc.Rejected, Rejection{Kind: rs.GetKind(), Namespace: rs.GetNamespace(), Name: rs.GetName(), Cluster: cl, State: s.State, Errors: s.Errors})
			}
		}
	}
	for _, d := range dests {
		ks := d.GetSpec().GetKubeService()
		sel := ks.GetWorkloadSelectorLabels()
		dc := cmp.Or(d.GetMetadata().GetCluster(), ks.GetRef().GetCluster())
		if len(sel) == 0 || dc != desc.Cluster || ks.GetRef().GetNamespace() != ns || !labelsMatch(sel, k.GetPodLabels()) {
			continue
		}
		desc.Related = append(desc.Related, NodeID(NodeDestination, ks.GetRef().GetName(), ks.GetRef().GetNamespace(), dc))
		desc.Objects = append(desc.Objects, meshview.ObjectsWithParent(outs.Clusters(), outs, meshview.ParentDestination, meshview.Ref{Name: ks.GetRef().GetName(), Namespace: ks.GetRef().GetNamespace(), Cluster: dc})...)
	}
	return desc
}

// DescribePolicy is `meshctl describe policy` for one listed policy.
func DescribePolicy(p Policy) Description {
	desc := Description{Kind: p.Kind, Name: p.Name, Namespace: p.Namespace, Cluster: p.Cluster, Objects: p.Objects}
	desc.Details = append(desc.Details, Detail{"State", p.State}, Detail{"Observed generation", fmt.Sprint(p.ObservedGeneration)})
	if p.LastKnownGood {
		desc.Details = append(desc.Details, Detail{"Last known good", "an invalid edit left the last valid version in force"})
	}
	if p.State != "ACCEPTED" && len(p.Errors) > 0 {
		desc.Rejected = append(desc.Rejected, Rejection{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name, Cluster: p.Cluster, State: p.State, Errors: p.Errors})
	}
	for _, t := range p.Targets {
		desc.Details = append(desc.Details, Detail{"Target " + t.Target, fmt.Sprintf("%s (order %d)", t.State, t.AcceptanceOrder)})
	}
	return desc
}

// workloadName is a workload's name as describe shows it: its own, or its
// controller's.
func workloadName(w *discoveryv1.Workload) (string, string) {
	md := w.GetMetadata()
	if md.GetName() != "" {
		return md.GetName(), md.GetNamespace()
	}
	c := w.GetSpec().GetKubernetes().GetController()
	return c.GetName(), c.GetNamespace()
}

func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
