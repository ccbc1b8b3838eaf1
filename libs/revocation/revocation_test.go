package revocation_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/revocation"
	revredis "github.com/meshplane/meshplane/libs/revocation/redis"
	goredis "github.com/redis/go-redis/v9"
)

type source struct {
	mu      sync.Mutex
	serials []string
	err     error
}

func (s *source) RevokedSerials(context.Context, time.Time) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serials, s.err
}

func TestCacheKeepsLastSetWhileSourceFails(t *testing.T) {
	ctx := t.Context()
	src := &source{serials: []string{"42"}}
	c := revocation.NewCache(src, time.Hour, nil)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.IsRevoked(ctx, "42"); !ok {
		t.Fatal("serial 42 is in the set but not revoked")
	}
	src.err = errors.New("store down")
	if err := c.Refresh(ctx); err == nil {
		t.Fatal("Refresh must report the source's error")
	}
	c.Add("7", time.Now().Add(time.Hour))
	for _, s := range []string{"42", "7"} {
		if ok, err := c.IsRevoked(ctx, s); !ok || err != nil {
			t.Errorf("IsRevoked(%s) during an outage = %v, %v; want true, nil", s, ok, err)
		}
	}
	if ok, _ := c.IsRevoked(ctx, "8"); ok {
		t.Error("a serial nobody revoked is revoked")
	}
}

func TestRedisSourceReadsRegistrationsSet(t *testing.T) {
	redistest.ForEachTopology(t, testRedisSourceReadsRegistrationsSet)
}

func testRedisSourceReadsRegistrationsSet(t *testing.T, d *redistest.Deployment) {
	ctx := t.Context()
	client := d.Client(t)
	now := time.Now()
	// What registration writes: serial -> expiry in unix ms.
	if err := client.ZAdd(ctx, revredis.Key("prod"),
		goredis.Z{Member: "100", Score: float64(now.Add(time.Hour).UnixMilli())},
		goredis.Z{Member: "200", Score: float64(now.Add(-time.Hour).UnixMilli())},
	).Err(); err != nil {
		t.Fatal(err)
	}
	c := revocation.NewCache(revredis.NewSource(client, "prod"), time.Hour, nil)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.IsRevoked(ctx, "100"); !ok {
		t.Error("an unexpired revoked serial is not revoked")
	}
	if ok, _ := c.IsRevoked(ctx, "200"); ok {
		t.Error("an expired entry still counts")
	}
	other := revocation.NewCache(revredis.NewSource(client, "staging"), time.Hour, nil)
	if err := other.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _ := other.IsRevoked(ctx, "100"); ok {
		t.Error("another install's revocations leaked")
	}
}
