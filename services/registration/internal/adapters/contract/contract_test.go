// Package contract_test runs one suite per store port against every adapter
// of that port: memory, and a real redis-server.
package contract_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/meshplane/meshplane/libs/revocation"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/memory"
	redisstore "github.com/meshplane/meshplane/services/registration/internal/adapters/redis"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// stores is one adapter's implementation of every port, fresh and empty.
type stores struct {
	tokens      app.TokenStore
	clusters    app.ClusterStore
	revocations app.RevocationStore
}

// adapters returns a constructor per adapter: memory, and Redis on each
// topology. Each Redis deployment is started once for the test and gives
// each call its own install, so subtests do not see each other's keys.
func adapters(t *testing.T) map[string]func(t *testing.T) stores {
	out := map[string]func(t *testing.T) stores{
		"memory": func(*testing.T) stores {
			return stores{tokens: memory.NewBootstrapTokens(), clusters: memory.NewClusters(), revocations: memory.NewRevocations()}
		},
	}
	var n atomic.Int64
	for _, topology := range redistest.Topologies {
		d := redistest.StartDeployment(t, topology)
		client := d.Client(t)
		out["redis-"+string(topology)] = func(*testing.T) stores {
			s := redisstore.New(client, fmt.Sprintf("contract-%d", n.Add(1)))
			return stores{tokens: s, clusters: s, revocations: s}
		}
	}
	return out
}

var t0 = time.UnixMilli(1_800_000_000_000).UTC()

func TestTokenStore(t *testing.T) {
	for name, newStores := range adapters(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("missing", func(t *testing.T) {
				s := newStores(t).tokens
				if _, err := s.Token(t.Context(), "east"); !errors.Is(err, app.ErrNotFound) {
					t.Fatalf("Token: %v, want ErrNotFound", err)
				}
				if ok, err := s.MarkTokenUsed(t.Context(), "east", domain.HashToken("x"), t0); ok || err != nil {
					t.Fatalf("MarkTokenUsed on no token: %v, %v; want false, nil", ok, err)
				}
				if err := s.DeleteToken(t.Context(), "east"); err != nil {
					t.Fatalf("DeleteToken on no token: %v", err)
				}
			})
			t.Run("round trip keeps only the hash", func(t *testing.T) {
				s := newStores(t).tokens
				want := domain.BootstrapToken{Cluster: "east", Hash: domain.HashToken("secret"), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
				put(t, s, want)
				got := get(t, s, "east")
				if !equalToken(got, want) {
					t.Fatalf("Token = %+v, want %+v", got, want)
				}
				if err := got.Check("secret", t0); err != nil {
					t.Fatalf("Check: %v", err)
				}
			})
			t.Run("single use", func(t *testing.T) {
				s := newStores(t).tokens
				h := domain.HashToken("secret")
				put(t, s, domain.BootstrapToken{Cluster: "east", Hash: h, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)})
				if ok, err := s.MarkTokenUsed(t.Context(), "east", domain.HashToken("other"), t0); ok || err != nil {
					t.Fatalf("MarkTokenUsed with another hash: %v, %v; want false", ok, err)
				}
				if ok, err := s.MarkTokenUsed(t.Context(), "east", h, t0.Add(time.Minute)); !ok || err != nil {
					t.Fatalf("first MarkTokenUsed: %v, %v; want true", ok, err)
				}
				if ok, err := s.MarkTokenUsed(t.Context(), "east", h, t0.Add(2*time.Minute)); ok || err != nil {
					t.Fatalf("second MarkTokenUsed: %v, %v; want false", ok, err)
				}
				got := get(t, s, "east")
				if !got.UsedAt.Equal(t0.Add(time.Minute)) {
					t.Fatalf("UsedAt = %v, want the first use", got.UsedAt)
				}
				if err := got.Check("secret", t0.Add(time.Minute)); !errors.Is(err, domain.ErrTokenUsed) {
					t.Fatalf("Check of a used token: %v, want ErrTokenUsed", err)
				}
			})
			t.Run("concurrent spenders: exactly one wins", func(t *testing.T) {
				s := newStores(t).tokens
				h := domain.HashToken("secret")
				put(t, s, domain.BootstrapToken{Cluster: "east", Hash: h, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)})
				var wins atomic.Int32
				var wg sync.WaitGroup
				for range 32 {
					wg.Go(func() {
						ok, err := s.MarkTokenUsed(context.Background(), "east", h, t0)
						if err != nil {
							t.Error(err)
						}
						if ok {
							wins.Add(1)
						}
					})
				}
				wg.Wait()
				if wins.Load() != 1 {
					t.Fatalf("%d callers spent the token, want 1", wins.Load())
				}
			})
			t.Run("put replaces, even a used token", func(t *testing.T) {
				s := newStores(t).tokens
				old := domain.HashToken("old")
				put(t, s, domain.BootstrapToken{Cluster: "east", Hash: old, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)})
				if ok, _ := s.MarkTokenUsed(t.Context(), "east", old, t0); !ok {
					t.Fatal("could not spend the first token")
				}
				put(t, s, domain.BootstrapToken{Cluster: "east", Hash: domain.HashToken("new"), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)})
				got := get(t, s, "east")
				if err := got.Check("new", t0); err != nil {
					t.Fatalf("new token: %v", err)
				}
				if err := got.Check("old", t0); !errors.Is(err, domain.ErrTokenInvalid) {
					t.Fatalf("old token after replacement: %v, want ErrTokenInvalid", err)
				}
				if ok, _ := s.MarkTokenUsed(t.Context(), "east", old, t0); ok {
					t.Fatal("the replaced token was spent")
				}
			})
			t.Run("tokens are per cluster", func(t *testing.T) {
				s := newStores(t).tokens
				put(t, s, domain.BootstrapToken{Cluster: "east", Hash: domain.HashToken("e"), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)})
				put(t, s, domain.BootstrapToken{Cluster: "west", Hash: domain.HashToken("w"), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)})
				if ok, _ := s.MarkTokenUsed(t.Context(), "west", domain.HashToken("e"), t0); ok {
					t.Fatal("east's token was spent as west's")
				}
				if err := s.DeleteToken(t.Context(), "east"); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Token(t.Context(), "east"); !errors.Is(err, app.ErrNotFound) {
					t.Fatalf("deleted token: %v, want ErrNotFound", err)
				}
				if err := get(t, s, "west").Check("w", t0); err != nil {
					t.Fatalf("west's token after deleting east's: %v", err)
				}
			})
		})
	}
}

func TestClusterStore(t *testing.T) {
	for name, newStores := range adapters(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("missing", func(t *testing.T) {
				s := newStores(t).clusters
				if _, err := s.Cluster(t.Context(), "east"); !errors.Is(err, app.ErrNotFound) {
					t.Fatalf("Cluster: %v, want ErrNotFound", err)
				}
				cs, err := s.Clusters(t.Context())
				if err != nil || len(cs) != 0 {
					t.Fatalf("Clusters = %v, %v; want none", cs, err)
				}
			})
			t.Run("update creates, round trips, and lists by name", func(t *testing.T) {
				s := newStores(t).clusters
				for _, n := range []string{"west", "east"} {
					_, err := s.UpdateCluster(t.Context(), n, func(c *domain.Cluster, exists bool) error {
						if exists {
							t.Errorf("%s exists before it was created", n)
						}
						*c = domain.NewCluster(n, false, t0)
						c.RecordIssued(domain.IssuedCert{Serial: "123", NotAfter: t0.Add(time.Hour)}, "v1", t0)
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
				}
				got, err := s.Cluster(t.Context(), "east")
				if err != nil {
					t.Fatal(err)
				}
				want := domain.Cluster{Name: "east", Status: domain.StatusRegistered, AgentVersion: "v1", CreatedAt: t0, FirstSeen: t0, LastSeen: t0,
					Certs: []domain.IssuedCert{{Serial: "123", NotAfter: t0.Add(time.Hour)}}}
				if !equalCluster(got, want) {
					t.Fatalf("Cluster = %+v, want %+v", got, want)
				}
				cs, err := s.Clusters(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if len(cs) != 2 || cs[0].Name != "east" || cs[1].Name != "west" {
					t.Fatalf("Clusters = %v, want east and west in order", cs)
				}
			})
			t.Run("an error from fn stores nothing", func(t *testing.T) {
				s := newStores(t).clusters
				boom := errors.New("boom")
				_, err := s.UpdateCluster(t.Context(), "east", func(c *domain.Cluster, _ bool) error {
					*c = domain.NewCluster("east", false, t0)
					return boom
				})
				if !errors.Is(err, boom) {
					t.Fatalf("UpdateCluster: %v, want fn's error", err)
				}
				if _, err := s.Cluster(t.Context(), "east"); !errors.Is(err, app.ErrNotFound) {
					t.Fatalf("Cluster after a failed update: %v, want ErrNotFound", err)
				}
			})
			t.Run("concurrent updates lose nothing", func(t *testing.T) {
				s := newStores(t).clusters
				const n = 20
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						_, err := s.UpdateCluster(context.Background(), "east", func(c *domain.Cluster, exists bool) error {
							if !exists {
								*c = domain.NewCluster("east", false, t0)
							}
							c.RecordIssued(domain.IssuedCert{Serial: fmt.Sprint(i), NotAfter: t0.Add(time.Hour)}, "", t0)
							return nil
						})
						if err != nil {
							t.Error(err)
						}
					})
				}
				wg.Wait()
				c, err := s.Cluster(t.Context(), "east")
				if err != nil {
					t.Fatal(err)
				}
				if len(c.Certs) != n {
					t.Fatalf("%d certificates recorded, want %d", len(c.Certs), n)
				}
			})
		})
	}
}

func TestRevocationStore(t *testing.T) {
	for name, newStores := range adapters(t) {
		t.Run(name, func(t *testing.T) {
			s := newStores(t).revocations
			got, err := revocation.Serials(s.Revoked(t.Context(), t0))
			if err != nil || len(got) != 0 {
				t.Fatalf("RevokedSerials of an empty set = %v, %v", got, err)
			}
			if err := s.Revoke(t.Context(), nil); err != nil {
				t.Fatalf("Revoke(nil): %v", err)
			}
			err = s.Revoke(t.Context(), []domain.IssuedCert{
				{Serial: "1", NotAfter: t0.Add(time.Hour)},
				{Serial: "2", NotAfter: t0.Add(2 * time.Hour)},
				{Serial: "340282366920938463463374607431768211455", NotAfter: t0.Add(3 * time.Hour)},
			})
			if err != nil {
				t.Fatal(err)
			}
			// Revoking again with an earlier expiry keeps the later one.
			if err := s.Revoke(t.Context(), []domain.IssuedCert{{Serial: "2", NotAfter: t0.Add(time.Minute)}}); err != nil {
				t.Fatal(err)
			}
			// Each comes back with its expiry (the later one for 2).
			all, err := s.Revoked(t.Context(), t0)
			if err != nil || len(all) != 3 || !all[1].NotAfter.Equal(t0.Add(2*time.Hour)) || !all[0].NotAfter.Equal(t0.Add(time.Hour)) {
				t.Fatalf("Revoked at t0 = %v, %v; want 1, 2 and the long one with their expiries", all, err)
			}
			for _, tc := range []struct {
				at   time.Time
				want []string
			}{
				{t0, []string{"1", "2", "340282366920938463463374607431768211455"}},
				{t0.Add(time.Hour), []string{"2", "340282366920938463463374607431768211455"}},
				{t0.Add(3 * time.Hour), nil},
			} {
				got, err := revocation.Serials(s.Revoked(t.Context(), tc.at))
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, tc.want) {
					t.Fatalf("RevokedSerials at %v = %v, want %v", tc.at, got, tc.want)
				}
			}
		})
	}
}

func put(t *testing.T, s app.TokenStore, tok domain.BootstrapToken) {
	t.Helper()
	if err := s.PutToken(t.Context(), tok); err != nil {
		t.Fatalf("PutToken: %v", err)
	}
}

func get(t *testing.T, s app.TokenStore, cluster string) domain.BootstrapToken {
	t.Helper()
	tok, err := s.Token(t.Context(), cluster)
	if err != nil {
		t.Fatalf("Token(%s): %v", cluster, err)
	}
	return tok
}

func equalToken(a, b domain.BootstrapToken) bool {
	return a.Cluster == b.Cluster && a.Hash == b.Hash && a.CreatedAt.Equal(b.CreatedAt) && a.ExpiresAt.Equal(b.ExpiresAt) && a.UsedAt.Equal(b.UsedAt)
}

func equalCluster(a, b domain.Cluster) bool {
	return a.Name == b.Name && a.Status == b.Status && a.AgentVersion == b.AgentVersion &&
		a.CreatedAt.Equal(b.CreatedAt) && a.FirstSeen.Equal(b.FirstSeen) && a.LastSeen.Equal(b.LastSeen) &&
		slices.EqualFunc(a.Certs, b.Certs, func(x, y domain.IssuedCert) bool { return x.Serial == y.Serial && x.NotAfter.Equal(y.NotAfter) })
}
