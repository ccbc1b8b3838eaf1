package redis_test

import (
	"slices"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/redistest"
	redisstore "github.com/meshplane/meshplane/services/registration/internal/adapters/redis"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
	"github.com/redis/go-redis/v9"
)

// TestKeys pins the key layout (other tools and replicas of other versions
// read it), and checks that only a token's hash reaches Redis and that an
// expired token's record goes away by itself.
func TestKeys(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	s := redisstore.New(client, "prod")
	ctx := t.Context()
	now := time.Now()

	token := "mpbt_very-secret"
	if err := s.PutToken(ctx, domain.BootstrapToken{Cluster: "east", Hash: domain.HashToken(token), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateCluster(ctx, "east", func(c *domain.Cluster, _ bool) error {
		*c = domain.NewCluster("east", false, now)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke(ctx, []domain.IssuedCert{{Serial: "1", NotAfter: now.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	keys, err := client.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	want := []string{
		"meshplane:{prod}:registration:cluster:east",
		"meshplane:{prod}:registration:clusters",
		"meshplane:{prod}:registration:revoked",
		"meshplane:{prod}:registration:token:east",
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	fields, err := client.HGetAll(ctx, want[3]).Result()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		if v == token {
			t.Fatalf("field %s holds the token itself", k)
		}
	}
	ttl, err := client.PTTL(ctx, want[3]).Result()
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := time.Hour+redisstore.UsedTokenRetention-time.Minute, time.Hour+redisstore.UsedTokenRetention+time.Minute; ttl < lo || ttl > hi {
		t.Fatalf("token key expires in %v, want about %v", ttl, time.Hour+redisstore.UsedTokenRetention)
	}
}
