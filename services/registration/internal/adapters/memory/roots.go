package memory

import (
	"context"
	"sync"

	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// Roots is an app.RootStore in memory, for tests: roots are lost at exit.
type Roots struct {
	mu    sync.Mutex
	roots map[string]domain.RootCA
}

var _ app.RootStore = (*Roots)(nil)

// NewRoots returns an empty store.
func NewRoots() *Roots { return &Roots{roots: map[string]domain.RootCA{}} }

func (s *Roots) LoadOrCreateRoot(_ context.Context, key string, create func() (domain.RootCA, error)) (domain.RootCA, bool, error) {
	s.mu.Lock()
	if r, ok := s.roots[key]; ok {
		s.mu.Unlock()
		return r, false, nil
	}
	s.mu.Unlock()
	// Made outside the lock, as the real stores do: the first to store
	// wins.
	r, err := create()
	if err != nil {
		return domain.RootCA{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.roots[key]; ok {
		return old, false, nil
	}
	s.roots[key] = r
	return r, true, nil
}

// VirtualMeshes is an app.VirtualMeshes over a fixed set, for app tests.
type VirtualMeshes struct {
	mu     sync.Mutex
	vms    []domain.VirtualMesh
	meshes []domain.Mesh
}

var _ app.VirtualMeshes = (*VirtualMeshes)(nil)

// NewVirtualMeshes returns an empty set.
func NewVirtualMeshes() *VirtualMeshes { return &VirtualMeshes{} }

// AddVirtualMesh adds vm.
func (s *VirtualMeshes) AddVirtualMesh(vm domain.VirtualMesh) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vms = append(s.vms, vm)
}

// AddMesh adds m.
func (s *VirtualMeshes) AddMesh(m domain.Mesh) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.meshes = append(s.meshes, m)
}

func (s *VirtualMeshes) Lookup(_ context.Context, vm, mesh domain.ObjectRef) ([]domain.VirtualMesh, []domain.Mesh, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var vms []domain.VirtualMesh
	var meshes []domain.Mesh
	for _, v := range s.vms {
		if v.Ref == vm {
			vms = append(vms, v)
		}
	}
	for _, m := range s.meshes {
		if m.Ref == mesh {
			meshes = append(meshes, m)
		}
	}
	return vms, meshes, nil
}
