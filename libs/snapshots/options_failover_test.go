package snapshots_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// The services' Redis client carries on after the primary it wrote to
// dies: Sentinel promotes a replica, Cluster a primary's replica, and the
// client finds the new primary without a restart.
func TestRedisClientFollowsFailover(t *testing.T) {
	for _, topology := range []redistest.Topology{redistest.Sentinel, redistest.Cluster} {
		t.Run(string(topology), func(t *testing.T) {
			d := redistest.StartDeployment(t, topology)
			o := snapshots.NewRedisOptions()
			o.Addrs, o.MasterName = strings.Join(d.Addrs(), ","), d.MasterName()
			c, err := o.NewClient()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := t.Context()
			for i := range 30 {
				if err := c.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			var victim *redistest.Server
			if topology == redistest.Sentinel {
				victim, err = d.Primary(ctx)
			} else {
				var ps []*redistest.Server
				ps, err = d.Primaries(ctx)
				if len(ps) > 0 {
					victim = ps[0]
				}
			}
			if err != nil || victim == nil {
				t.Fatalf("no primary to kill: %v", err)
			}
			victim.Kill()
			deadline := time.Now().Add(30 * time.Second)
			var last error
			for time.Now().Before(deadline) {
				if last = writeAll(ctx, c); last == nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Fatalf("the client did not write to every slot within 30s of the primary's death: %v", last)
		})
	}
}

func writeAll(ctx context.Context, c redis.UniversalClient) error {
	for i := range 30 {
		if err := c.Set(ctx, fmt.Sprintf("n%d", i), i, 0).Err(); err != nil {
			return err
		}
	}
	return nil
}
