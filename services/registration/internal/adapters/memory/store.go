package memory

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshplane/meshplane/libs/revocation"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// BootstrapTokens is an app.TokenStore in memory, for a single replica.
type BootstrapTokens struct {
	mu     sync.Mutex
	tokens map[string]domain.BootstrapToken
}

var _ app.TokenStore = (*BootstrapTokens)(nil)

// NewBootstrapTokens returns an empty store.
func NewBootstrapTokens() *BootstrapTokens {
	return &BootstrapTokens{tokens: map[string]domain.BootstrapToken{}}
}

func (s *BootstrapTokens) PutToken(_ context.Context, t domain.BootstrapToken) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[t.Cluster] = t
	return nil
}

func (s *BootstrapTokens) Token(_ context.Context, cluster string) (domain.BootstrapToken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[cluster]
	if !ok {
		return domain.BootstrapToken{}, app.ErrNotFound
	}
	return t, nil
}

func (s *BootstrapTokens) MarkTokenUsed(_ context.Context, cluster string, hash domain.TokenHash, at time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[cluster]
	if !ok || t.Hash != hash || !t.UsedAt.IsZero() {
		return false, nil
	}
	t.UsedAt = at
	s.tokens[cluster] = t
	return true, nil
}

func (s *BootstrapTokens) DeleteToken(_ context.Context, cluster string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, cluster)
	return nil
}

// Clusters is an app.ClusterStore in memory.
type Clusters struct {
	mu       sync.Mutex
	clusters map[string]domain.Cluster
}

var _ app.ClusterStore = (*Clusters)(nil)

// NewClusters returns an empty store.
func NewClusters() *Clusters { return &Clusters{clusters: map[string]domain.Cluster{}} }

func (s *Clusters) Cluster(_ context.Context, name string) (domain.Cluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clusters[name]
	if !ok {
		return domain.Cluster{}, app.ErrNotFound
	}
	return clone(c), nil
}

func (s *Clusters) Clusters(context.Context) ([]domain.Cluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]domain.Cluster, 0, len(s.clusters))
	for _, c := range s.clusters {
		out = append(out, clone(c))
	}
	slices.SortFunc(out, func(a, b domain.Cluster) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *Clusters) UpdateCluster(_ context.Context, name string, fn func(c *domain.Cluster, exists bool) error) (domain.Cluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, exists := s.clusters[name]
	c = clone(c)
	if err := fn(&c, exists); err != nil {
		return domain.Cluster{}, err
	}
	c.Name = name
	s.clusters[name] = clone(c)
	return c, nil
}

// clone copies the record so that callers never share its slice.
func clone(c domain.Cluster) domain.Cluster {
	c.Certs = slices.Clone(c.Certs)
	return c
}

// Revocations is an app.RevocationStore in memory.
type Revocations struct {
	mu      sync.Mutex
	revoked map[string]time.Time
}

var _ app.RevocationStore = (*Revocations)(nil)

// NewRevocations returns an empty set.
func NewRevocations() *Revocations { return &Revocations{revoked: map[string]time.Time{}} }

func (s *Revocations) Revoke(_ context.Context, certs []domain.IssuedCert) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range certs {
		if c.NotAfter.After(s.revoked[c.Serial]) {
			s.revoked[c.Serial] = c.NotAfter
		}
	}
	return nil
}

func (s *Revocations) Revoked(_ context.Context, now time.Time) ([]revocation.Revoked, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []revocation.Revoked
	for serial, notAfter := range s.revoked {
		if !now.Before(notAfter) {
			delete(s.revoked, serial)
			continue
		}
		out = append(out, revocation.Revoked{Serial: serial, NotAfter: notAfter})
	}
	slices.SortFunc(out, func(a, b revocation.Revoked) int { return strings.Compare(a.Serial, b.Serial) })
	return out, nil
}
