package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/test/e2e/harness"
)

// TestMeshctlWhenRedisIsDown: the all-in-one plane started with
// --redis-addrs shares access logs over Redis (it does not log that it has
// no Redis), and with Redis stopped, meshctl check and cluster list say that
// the plane answered but cannot reach Redis, not that the plane may not be
// running.
func TestMeshctlWhenRedisIsDown(t *testing.T) {
	d := startDurablePlane(t)
	ctx := t.Context()
	err := harness.Wait(ctx, 60*time.Second, "meshctl check to pass", func(ctx context.Context) (bool, error) {
		_, out, err := d.check(ctx)
		return err == nil, fmt.Errorf("%v: %s", err, out)
	}, d.procs()...)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(d.plane.Procs[0].LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "no Redis") {
		t.Errorf("the all-in-one plane with --redis-addrs logs that it has no Redis:\n%s", log)
	}

	d.redis.Stop()
	for _, args := range [][]string{{"check"}, {"cluster", "list"}} {
		out, err := d.meshctl(ctx, args...)
		if err == nil {
			t.Errorf("meshctl %v passed with Redis stopped:\n%s", args, out)
		}
		if !strings.Contains(out, "answered, but cannot reach Redis") || strings.Contains(out, "is the management plane running") {
			t.Errorf("meshctl %v with Redis stopped does not say that Redis is unreachable:\n%s", args, out)
		}
	}
}
