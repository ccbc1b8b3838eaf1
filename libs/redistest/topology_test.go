package redistest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshplane/meshplane/libs/redistest"
)

func TestDeploymentsServeClients(t *testing.T) {
	redistest.ForEachTopology(t, func(t *testing.T, d *redistest.Deployment) {
		c := d.Client(t)
		ctx := t.Context()
		// Keys spread over every slot range of a cluster.
		for i := range 50 {
			k := fmt.Sprintf("key-%d", i)
			if err := c.Set(ctx, k, i, 0).Err(); err != nil {
				t.Fatalf("SET %s: %v", k, err)
			}
		}
		for i := range 50 {
			k := fmt.Sprintf("key-%d", i)
			if got, err := c.Get(ctx, k).Int(); err != nil || got != i {
				t.Fatalf("GET %s = %d, %v; want %d", k, got, err, i)
			}
		}
		switch d.Topology {
		case redistest.Standalone:
			if len(d.Nodes) != 1 || len(d.Sentinels) != 0 {
				t.Errorf("standalone: %d nodes, %d sentinels", len(d.Nodes), len(d.Sentinels))
			}
		case redistest.Sentinel:
			if _, ok := c.(*redis.Client); !ok {
				t.Errorf("sentinel options make a %T, want the failover *redis.Client", c)
			}
			if len(d.Nodes) != 3 || len(d.Sentinels) != 3 {
				t.Errorf("sentinel: %d nodes, %d sentinels; want 3 and 3", len(d.Nodes), len(d.Sentinels))
			}
		case redistest.Cluster:
			if _, ok := c.(*redis.ClusterClient); !ok {
				t.Errorf("cluster options make a %T, want *redis.ClusterClient", c)
			}
			primaries, err := d.Primaries(ctx)
			if err != nil || len(primaries) != 3 {
				t.Errorf("cluster: %d primaries (%v), want 3", len(primaries), err)
			}
		}
		if err := d.FlushAll(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := countKeys(ctx, c)
		if err != nil || n != 0 {
			t.Errorf("after FlushAll: %d keys (%v), want 0", n, err)
		}
	})
}

func countKeys(ctx context.Context, c redis.UniversalClient) (int64, error) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		var total int64
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			n, err := m.DBSize(ctx).Result()
			total += n
			return err
		})
		return total, err
	}
	return c.DBSize(ctx).Result()
}

// Killing the Sentinel primary promotes a replica; a write the replicas
// acknowledged (WAIT) survives, and the same client carries on.
func TestSentinelFailover(t *testing.T) {
	d := redistest.StartDeployment(t, redistest.Sentinel)
	ctx := t.Context()
	c := d.Client(t)
	if err := c.Set(ctx, "kept", "yes", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n < 1 {
		t.Fatalf("WAIT 1 = %d, %v; want a replica's acknowledgement", n, err)
	}
	old, err := d.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old.Kill()
	waitFor(t, 30*time.Second, "a replica promoted", func(ctx context.Context) error {
		p, err := d.Primary(ctx)
		if err != nil {
			return err
		}
		if p == old {
			return fmt.Errorf("the sentinels still name %s", p.Addr())
		}
		return nil
	})
	waitFor(t, 30*time.Second, "the client to reach the new primary", func(ctx context.Context) error {
		return c.Set(ctx, "after", "yes", 0).Err()
	})
	if got, err := c.Get(ctx, "kept").Result(); err != nil || got != "yes" {
		t.Errorf("GET kept after failover = %q, %v; want the acknowledged write", got, err)
	}
}

// Killing a Cluster primary promotes its replica; every slot is served
// again.
func TestClusterFailover(t *testing.T) {
	d := redistest.StartDeployment(t, redistest.Cluster)
	ctx := t.Context()
	c := d.Client(t)
	primaries, err := d.Primaries(ctx)
	if err != nil || len(primaries) != 3 {
		t.Fatalf("%d primaries, %v", len(primaries), err)
	}
	for i := range 30 {
		if err := c.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	primaries[0].Kill()
	waitFor(t, 30*time.Second, "every slot served with one primary gone", func(ctx context.Context) error {
		if err := d.Ready(ctx); err != nil {
			return err
		}
		now, err := d.Primaries(ctx)
		if err != nil {
			return err
		}
		if len(now) != 3 || slices.Contains(now, primaries[0]) {
			return fmt.Errorf("%d primaries", len(now))
		}
		return nil
	})
	// go-redis learns the new slot map from a MOVED reply or after its
	// reload interval; a dead node gives neither, so the test asks for it
	// (the services' client does so on a failed dial: libs/snapshots).
	waitFor(t, 30*time.Second, "the client to write to every slot", func(ctx context.Context) error {
		c.(*redis.ClusterClient).ReloadState(ctx)
		for i := range 30 {
			if err := c.Set(ctx, fmt.Sprintf("n%d", i), i, 0).Err(); err != nil {
				return err
			}
		}
		return nil
	})
}
