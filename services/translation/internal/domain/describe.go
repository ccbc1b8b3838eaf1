package domain

import (
	"cmp"
	"slices"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/proto"
)

// Result is the outcome of one translation: the outputs, the last valid
// versions of the policies for the next translation, and what was applied
// to each discovered entity.
type Result struct {
	Outputs  map[string]*snapshotv1.OutputSnapshot
	LastGood LastGood
	Applied  *Applied
}

// Applied remembers what one translation applied to the discovered meshes,
// workloads and destinations, so that they can be described later with
// their status.applied_* filled in. The work is done when Describe is
// called, not on every translation. An Applied is read-only and safe to
// use from several goroutines.
type Applied struct {
	inputs   map[string]*snapshotv1.InputSnapshot
	ix       *Index
	traffic  *trafficTranslation
	policies []*trafficPolicy
	access   *accessTranslation
	accessPs []*accessPolicy
	vms      *virtualMeshes
	vds      *virtualDestinations
}

// Filter selects what to describe; empty fields match anything.
type Filter struct {
	Cluster, Namespace, Name string
}

func (f Filter) matches(k ObjectKey) bool {
	return (f.Cluster == "" || f.Cluster == k.Cluster) && (f.Namespace == "" || f.Namespace == k.Namespace) && (f.Name == "" || f.Name == k.Name)
}

// Description is the discovered entities a Filter selects, each a copy
// with status.applied_* filled in, sorted by (cluster, namespace, name).
type Description struct {
	Meshes       []*discoveryv1.Mesh
	Workloads    []*discoveryv1.Workload
	Destinations []*discoveryv1.Destination
}

// Describe returns the entities f selects as this translation saw them.
// A nil Applied (nothing translated yet) describes nothing.
func (a *Applied) Describe(f Filter) Description {
	var out Description
	if a == nil {
		return out
	}
	type keyed[T any] struct {
		k ObjectKey
		v T
	}
	var meshes []keyed[*discoveryv1.Mesh]
	var works []keyed[*discoveryv1.Workload]
	var dests []keyed[*discoveryv1.Destination]
	seen := map[ObjectKey]bool{}
	for _, cluster := range sortedKeys(a.inputs) {
		in := a.inputs[cluster]
		for _, m := range in.GetMeshes() {
			k := ObjectKey{Cluster: cluster, Namespace: m.GetMetadata().GetNamespace(), Name: m.GetMetadata().GetName()}
			if _, ok := a.ix.meshByKey[k]; !ok || !f.matches(k) || seen[k] {
				continue
			}
			seen[k] = true
			c := proto.CloneOf(m)
			c.Status = a.meshStatus(k)
			meshes = append(meshes, keyed[*discoveryv1.Mesh]{k, c})
		}
		for _, w := range in.GetWorkloads() {
			k := workloadKey(cluster, w)
			if k.Name == "" || !f.matches(k) || seen[k] {
				continue
			}
			seen[k] = true
			c := proto.CloneOf(w)
			c.Status = a.workloadStatus(k)
			works = append(works, keyed[*discoveryv1.Workload]{k, c})
		}
		for _, d := range in.GetDestinations() {
			ref := d.GetSpec().GetKubeService().GetRef()
			k := ObjectKey{Cluster: cluster, Namespace: ref.GetNamespace(), Name: ref.GetName()}
			dst, ok := a.ix.byKey[k]
			if !ok || !f.matches(k) || seen[k] {
				continue
			}
			seen[k] = true
			c := proto.CloneOf(d)
			c.Status = a.destinationStatus(dst)
			dests = append(dests, keyed[*discoveryv1.Destination]{k, c})
		}
	}
	slices.SortFunc(meshes, func(x, y keyed[*discoveryv1.Mesh]) int { return x.k.compare(y.k) })
	slices.SortFunc(works, func(x, y keyed[*discoveryv1.Workload]) int { return x.k.compare(y.k) })
	slices.SortFunc(dests, func(x, y keyed[*discoveryv1.Destination]) int { return x.k.compare(y.k) })
	for _, m := range meshes {
		out.Meshes = append(out.Meshes, m.v)
	}
	for _, w := range works {
		out.Workloads = append(out.Workloads, w.v)
	}
	for _, d := range dests {
		out.Destinations = append(out.Destinations, d.v)
	}
	return out
}

func appliedRef(k ObjectKey, md *commonv1.ObjectMeta, order uint32) *commonv1.AppliedPolicy {
	return &commonv1.AppliedPolicy{
		Ref:                &commonv1.ClusterObjectRef{Name: k.Name, Namespace: k.Namespace, Cluster: k.Cluster},
		ObservedGeneration: md.GetGeneration(),
		AcceptanceOrder:    order,
	}
}

func (a *Applied) meshStatus(k ObjectKey) *discoveryv1.MeshStatus {
	s := &discoveryv1.MeshStatus{}
	if vm := a.vms.vmOf(k); vm != nil {
		s.ObservedGeneration = vm.Meta.GetGeneration()
		s.AppliedVirtualMesh = &commonv1.ObjectRef{Name: vm.Key.Name, Namespace: vm.Key.Namespace}
	}
	m := a.ix.meshByKey[k]
	for _, vd := range a.vds.all {
		if !vd.valid() || !vd.serves(k) {
			continue
		}
		s.AppliedVirtualDestinations = append(s.AppliedVirtualDestinations, appliedRef(vd.Key, vd.Meta, vd.Meshes[m.RefKey()].GetAcceptanceOrder()))
	}
	return s
}

// workloadStatus lists the policies whose sources select the workload, in
// acceptance order.
func (a *Applied) workloadStatus(k ObjectKey) *discoveryv1.WorkloadStatus {
	s := &discoveryv1.WorkloadStatus{}
	selects := func(refs []*commonv1.ClusterObjectRef) bool {
		return slices.ContainsFunc(refs, func(r *commonv1.ClusterObjectRef) bool {
			return r.GetCluster() == k.Cluster && r.GetNamespace() == k.Namespace && r.GetName() == k.Name
		})
	}
	for _, p := range a.policies {
		if len(p.Errors) == 0 || p.lastGood != nil {
			if selects(p.Status.GetWorkloads()) {
				s.AppliedTrafficPolicies = append(s.AppliedTrafficPolicies, appliedRef(p.Key, p.Meta, uint32(len(s.AppliedTrafficPolicies))))
			}
		}
	}
	for _, p := range a.accessPs {
		if len(p.Errors) == 0 || p.lastGood != nil {
			if selects(p.Status.GetWorkloads()) {
				s.AppliedAccessPolicies = append(s.AppliedAccessPolicies, appliedRef(p.Key, p.Meta, uint32(len(s.AppliedAccessPolicies))))
			}
		}
	}
	return s
}

// destinationStatus lists the policies in force for the destination (ACCEPTED
// for it, with the acceptance order their statuses show), its local FQDN
// and its federated hostnames.
func (a *Applied) destinationStatus(d *destination) *discoveryv1.DestinationStatus {
	s := &discoveryv1.DestinationStatus{LocalFqdn: d.Host}
	for _, p := range a.traffic.states[d.Key].applied {
		if as := p.Status.GetDestinations()[d.Key.String()]; as.GetState() == commonv1.ApprovalState_ACCEPTED || p.heldOn[d.Key] {
			s.AppliedTrafficPolicies = append(s.AppliedTrafficPolicies, appliedRef(p.Key, p.Meta, as.GetAcceptanceOrder()))
		}
	}
	for _, p := range a.access.applied[d.Key] {
		if as := p.Status.GetDestinations()[d.Key.String()]; as.GetState() == commonv1.ApprovalState_ACCEPTED {
			s.AppliedAccessPolicies = append(s.AppliedAccessPolicies, appliedRef(p.Key, p.Meta, as.GetAcceptanceOrder()))
		}
	}
	if vm := a.vms.vmOf(d.Mesh); vm != nil && slices.Contains(vm.federated, d.Key) {
		exported := exportRule(a.ix, vm)
		suffix := cmp.Or(vm.Spec.GetFederation().GetHostnameSuffix(), DefaultHostnameSuffix)
		for _, client := range vm.Members {
			if client.Key.Cluster == d.Key.Cluster || !exported.exports(d, client) {
				continue
			}
			s.FederatedHostnames = append(s.FederatedHostnames, &discoveryv1.DestinationStatus_FederatedHostname{
				Mesh:     &commonv1.ObjectRef{Name: client.Key.Name, Namespace: client.Key.Namespace},
				Hostname: FederatedHostname(d.Key.Name, d.Key.Namespace, d.Key.Cluster, suffix),
			})
		}
	}
	return s
}
