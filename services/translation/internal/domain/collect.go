package domain

import (
	"slices"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/proto"
)

type userResource interface {
	proto.Message
	GetMetadata() *commonv1.ObjectMeta
}

// collected is a user resource with the key translation knows it by.
type collected[T userResource] struct {
	Key ObjectKey // the cluster is the one whose input carried it
	Res T
}

// collectResources gathers one kind of user resource from every input in
// acceptance order (compareOrder): by first-seen time, then namespace, name and cluster. A
// resource found twice (same cluster, namespace and name) is kept once, by
// content, so that list order cannot change the result.
func collectResources[T userResource](inputs map[string]*snapshotv1.InputSnapshot, list func(*snapshotv1.InputSnapshot) []T) []collected[T] {
	byKey := map[ObjectKey]T{}
	for _, cluster := range sortedKeys(inputs) {
		for _, r := range list(inputs[cluster]) {
			md := r.GetMetadata()
			key := ObjectKey{Cluster: cluster, Namespace: md.GetNamespace(), Name: md.GetName()}
			if key.Name == "" {
				continue
			}
			if old, dup := byKey[key]; dup && compareContent(old, r) <= 0 {
				continue
			}
			byKey[key] = r
		}
	}
	out := make([]collected[T], 0, len(byKey))
	for k, r := range byKey {
		out = append(out, collected[T]{Key: k, Res: r})
	}
	slices.SortFunc(out, func(a, b collected[T]) int {
		return compareOrder(a.Res.GetMetadata(), a.Key, b.Res.GetMetadata(), b.Key)
	})
	return out
}
