// Package inputs answers app.VirtualMeshes from the input snapshots that
// ingest writes (libs/snapshots; Redis shared by replicas, or the memory
// store of an all-in-one process). Every cluster's input counts, the
// management cluster's included: it is one more cluster in the store.
package inputs

import (
	"context"
	"fmt"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// VirtualMeshes reads VirtualMeshes and meshes from an input store.
type VirtualMeshes struct {
	store snapshots.Store[*snapshotv1.InputSnapshot]
}

var _ app.VirtualMeshes = (*VirtualMeshes)(nil)

// New reads from store.
func New(store snapshots.Store[*snapshotv1.InputSnapshot]) *VirtualMeshes {
	return &VirtualMeshes{store: store}
}

// Lookup reads every cluster's input. SignIntermediate is called once per
// mesh and renewal, so reading them all is cheaper than keeping an index.
func (v *VirtualMeshes) Lookup(ctx context.Context, vm, mesh domain.ObjectRef) ([]domain.VirtualMesh, []domain.Mesh, error) {
	entries, err := v.store.List(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list input snapshots: %w", err)
	}
	var vms []domain.VirtualMesh
	var meshes []domain.Mesh
	for _, e := range entries {
		for _, m := range e.Value.GetMeshes() {
			if ref(m.GetMetadata()) != mesh {
				continue
			}
			meshes = append(meshes, domain.Mesh{
				Ref: mesh, Cluster: e.Cluster, TrustDomain: m.GetSpec().GetIstio().GetTrustDomain(),
			})
		}
		for _, r := range e.Value.GetVirtualMeshes() {
			if ref(r.GetMetadata()) != vm {
				continue
			}
			vms = append(vms, toVirtualMesh(e.Cluster, r))
		}
	}
	return vms, meshes, nil
}

func ref(md *commonv1.ObjectMeta) domain.ObjectRef {
	return domain.ObjectRef{Name: md.GetName(), Namespace: md.GetNamespace()}
}

func toVirtualMesh(cluster string, r *networkingv1.VirtualMesh) domain.VirtualMesh {
	spec := r.GetSpec()
	out := domain.VirtualMesh{
		Ref:     ref(r.GetMetadata()),
		Cluster: cluster,
	}
	if ts := r.GetMetadata().GetCreationTimestamp(); ts != nil {
		out.CreatedAt = ts.AsTime()
	}
	for _, m := range spec.GetMeshes() {
		out.Meshes = append(out.Meshes, domain.ObjectRef{Name: m.GetName(), Namespace: m.GetNamespace()})
	}
	mtls := spec.GetMtlsConfig()
	switch {
	case mtls.GetShared() != nil:
		out.Trust = domain.TrustShared
	case mtls.GetLimited() != nil:
		out.Trust = domain.TrustLimited
	}
	shared := mtls.GetShared()
	out.IntermediateTTL = shared.GetIntermediateTtl().AsDuration()
	ca := shared.GetRootCertificateAuthority()
	if s := ca.GetSecret(); s != nil {
		out.Root = domain.RootSource{Kind: domain.RootSecret, Secret: domain.ObjectRef{Name: s.GetName(), Namespace: s.GetNamespace()}}
		return out
	}
	g := ca.GetGenerated()
	out.Root = domain.RootSource{Kind: domain.RootGenerated, TTL: g.GetTtl().AsDuration()}
	if g.GetKeyAlgorithm() == networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_RSA_4096 {
		out.Root.KeyAlgorithm = domain.KeyRSA4096
	}
	return out
}
