package memory

import (
	"context"
	"slices"
	"sync"

	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/distribution/internal/app"
)

// Indexes is an app.IndexStore in memory, for one replica.
type Indexes struct {
	mu sync.Mutex
	// byCluster holds each cluster's indexes, newest first.
	byCluster map[string][]versionIndex
}

type versionIndex struct {
	version string
	idx     snapshots.OutputIndex
}

var _ app.IndexStore = (*Indexes)(nil)

// NewIndexes returns an empty store.
func NewIndexes() *Indexes { return &Indexes{byCluster: map[string][]versionIndex{}} }

func (s *Indexes) PutIndex(_ context.Context, cluster, version string, idx snapshots.OutputIndex) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := slices.DeleteFunc(s.byCluster[cluster], func(v versionIndex) bool { return v.version == version })
	list = append([]versionIndex{{version, idx}}, list...)
	s.byCluster[cluster] = list[:min(len(list), app.KeepIndexes)]
	return nil
}

func (s *Indexes) GetIndex(_ context.Context, cluster, version string) (snapshots.OutputIndex, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.byCluster[cluster] {
		if v.version == version {
			return v.idx, nil
		}
	}
	return snapshots.OutputIndex{}, snapshots.ErrNotFound
}
