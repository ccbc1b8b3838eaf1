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
	revoked []revocation.Revoked
	err     error
}

func (s *source) Revoked(_ context.Context, now time.Time) ([]revocation.Revoked, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []revocation.Revoked
	for _, r := range s.revoked {
		if now.Before(r.NotAfter) {
			out = append(out, r)
		}
	}
	return out, s.err
}

func (s *source) set(rs ...revocation.Revoked) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked = rs
}

func TestCacheKeepsLastSetWhileSourceFails(t *testing.T) {
	ctx := t.Context()
	src := &source{revoked: []revocation.Revoked{{Serial: "42", NotAfter: time.Now().Add(time.Hour)}}}
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

// A store that comes back empty (Redis restarted without its data) does
// not unrevoke anything: the cache keeps every revocation until it
// expires, and says how many the store lost.
func TestCacheKeepsRevocationsTheSourceLost(t *testing.T) {
	ctx := t.Context()
	now := time.Now()
	src := &source{}
	src.set(revocation.Revoked{Serial: "1", NotAfter: now.Add(time.Hour)}, revocation.Revoked{Serial: "2", NotAfter: now.Add(2 * time.Hour)})
	c := revocation.NewCache(src, time.Hour, nil)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if len(c.Lost()) != 0 {
		t.Fatalf("Lost = %v before any loss", c.Lost())
	}
	src.set() // emptied
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"1", "2"} {
		if ok, _ := c.IsRevoked(ctx, s); !ok {
			t.Errorf("serial %s unrevoked by a store that lost it", s)
		}
	}
	if len(c.Lost()) != 2 {
		t.Errorf("Lost = %v, want 2", c.Lost())
	}
	if got := len(c.Snapshot()); got != 2 {
		t.Errorf("Snapshot holds %d, want 2", got)
	}
	// Re-seeded: nothing is lost any more.
	src.set(revocation.Revoked{Serial: "1", NotAfter: now.Add(time.Hour)}, revocation.Revoked{Serial: "2", NotAfter: now.Add(2 * time.Hour)})
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if len(c.Lost()) != 0 {
		t.Errorf("Lost = %v after re-seeding, want 0", c.Lost())
	}
}

// An expired revocation is forgotten, by the cache as by the store: one
// the cache holds (revoked here, or seen in the store) goes at the next
// reload after its expiry, and does not count as lost.
func TestCacheForgetsExpiredRevocations(t *testing.T) {
	ctx := t.Context()
	now := time.Now()
	src := &source{}
	src.set(revocation.Revoked{Serial: "live", NotAfter: now.Add(time.Hour)})
	c := revocation.NewCache(src, time.Hour, nil)
	// Revoked in this process with an expiry already past: held until the
	// next reload, which forgets it.
	c.Add("expired", now.Add(-time.Second))
	if ok, _ := c.IsRevoked(ctx, "expired"); !ok {
		t.Fatal("a serial revoked here is not revoked before the reload")
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.IsRevoked(ctx, "expired"); ok {
		t.Error("still revoked after its expiry")
	}
	if ok, _ := c.IsRevoked(ctx, "live"); !ok {
		t.Error("an unexpired revocation was forgotten")
	}
	if len(c.Lost()) != 0 {
		t.Errorf("an expired revocation counts as lost: %v", c.Lost())
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

// A process that has not read the shared set yet admits nobody it cannot
// check: IsRevoked fails until the first load, except for what this
// process revoked itself.
func TestCacheRefusesToAnswerBeforeTheFirstLoad(t *testing.T) {
	ctx := t.Context()
	src := &source{err: errors.New("store down")}
	c := revocation.NewCache(src, time.Hour, nil)
	if _, err := c.IsRevoked(ctx, "1"); !errors.Is(err, revocation.ErrNotLoaded) {
		t.Fatalf("IsRevoked before any load: %v, want ErrNotLoaded", err)
	}
	c.Add("7", time.Now().Add(time.Hour))
	if ok, err := c.IsRevoked(ctx, "7"); !ok || err != nil {
		t.Fatalf("IsRevoked of a serial revoked here: %v, %v; want true, nil", ok, err)
	}
	if err := c.Refresh(ctx); err == nil {
		t.Fatal("Refresh of a failing source succeeded")
	}
	if _, err := c.IsRevoked(ctx, "1"); !errors.Is(err, revocation.ErrNotLoaded) {
		t.Fatalf("IsRevoked after a failed load: %v, want ErrNotLoaded", err)
	}
	src.mu.Lock()
	src.err = nil
	src.mu.Unlock()
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.IsRevoked(ctx, "1"); ok || err != nil {
		t.Fatalf("IsRevoked after the first load: %v, %v; want false, nil", ok, err)
	}
}
