package app

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// DiscoveryFilter selects discovered objects by their metadata. Every
// field set must match; an empty field matches anything.
type DiscoveryFilter struct {
	Cluster      string
	Namespace    string
	NameContains string
}

func (f DiscoveryFilter) matches(m *commonv1.ObjectMeta) bool {
	return (f.Cluster == "" || m.GetCluster() == f.Cluster) &&
		(f.Namespace == "" || m.GetNamespace() == f.Namespace) &&
		strings.Contains(m.GetName(), f.NameContains)
}

type discovered interface {
	GetMetadata() *commonv1.ObjectMeta
}

// Meshes returns the discovered meshes of the latest input snapshots that
// match f, ordered by cluster, namespace and name.
func (i *Ingestor) Meshes(ctx context.Context, f DiscoveryFilter) ([]*discoveryv1.Mesh, error) {
	return query(ctx, i, f, (*snapshotv1.InputSnapshot).GetMeshes)
}

// Workloads returns the discovered workloads of the latest input snapshots
// that match f, ordered by cluster, namespace and name.
func (i *Ingestor) Workloads(ctx context.Context, f DiscoveryFilter) ([]*discoveryv1.Workload, error) {
	return query(ctx, i, f, (*snapshotv1.InputSnapshot).GetWorkloads)
}

// Destinations returns the discovered destinations of the latest input
// snapshots that match f, ordered by cluster, namespace and name.
func (i *Ingestor) Destinations(ctx context.Context, f DiscoveryFilter) ([]*discoveryv1.Destination, error) {
	return query(ctx, i, f, (*snapshotv1.InputSnapshot).GetDestinations)
}

func query[T discovered](ctx context.Context, i *Ingestor, f DiscoveryFilter, get func(*snapshotv1.InputSnapshot) []T) ([]T, error) {
	snaps, err := i.latest(ctx, f.Cluster)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, s := range snaps {
		for _, o := range get(s) {
			if f.matches(o.GetMetadata()) {
				out = append(out, o)
			}
		}
	}
	slices.SortFunc(out, func(a, b T) int {
		am, bm := a.GetMetadata(), b.GetMetadata()
		return cmp.Or(
			strings.Compare(am.GetCluster(), bm.GetCluster()),
			strings.Compare(am.GetNamespace(), bm.GetNamespace()),
			strings.Compare(am.GetName(), bm.GetName()))
	})
	return out, nil
}

// latest returns the latest snapshot of cluster, or of every cluster when
// cluster is empty. A cluster without a snapshot has nothing to list.
func (i *Ingestor) latest(ctx context.Context, cluster string) ([]*snapshotv1.InputSnapshot, error) {
	if cluster != "" {
		e, err := i.store.Get(ctx, cluster)
		if errors.Is(err, snapshots.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []*snapshotv1.InputSnapshot{e.Value}, nil
	}
	entries, err := i.store.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*snapshotv1.InputSnapshot, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Value)
	}
	return out, nil
}
