// Package memory holds translation's stores in memory, for tests and for
// installs without a management cluster.
package memory

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/meshplane/meshplane/services/translation/internal/app"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
)

// LastGood keeps last valid versions in memory.
type LastGood struct {
	mu sync.Mutex
	m  map[string]domain.KeptVersion
}

var _ app.LastGoodStore = (*LastGood)(nil)

// NewLastGood returns an empty store.
func NewLastGood() *LastGood { return &LastGood{m: map[string]domain.KeptVersion{}} }

func id(kind string, key domain.ObjectKey) string { return kind + "\x00" + key.String() }

// Load returns copies of the versions held, by kind and key.
func (s *LastGood) Load(context.Context) ([]domain.KeptVersion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]domain.KeptVersion, 0, len(s.m))
	for _, k := range slices.Sorted(maps.Keys(s.m)) {
		v := s.m[k]
		v.Spec = proto.Clone(v.Spec)
		out = append(out, v)
	}
	return out, nil
}

// Put keeps a copy of v.
func (s *LastGood) Put(_ context.Context, v domain.KeptVersion) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v.Spec = proto.Clone(v.Spec)
	s.m[id(v.Kind, v.Key)] = v
	return nil
}

// Delete forgets a version.
func (s *LastGood) Delete(_ context.Context, kind string, key domain.ObjectKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id(kind, key))
	return nil
}
