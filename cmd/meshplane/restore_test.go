package main

import (
	"testing"
	"time"

	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/snapshots"
	ingest "github.com/meshplane/meshplane/services/ingest/service"
)

// TestAllInOneRestoresInputsAfterRedisLoss: Redis restarts empty while
// east's agent stays connected to the all-in-one process, and east's input
// is written back, although the agent has nothing new to push, as a
// standalone ingest does (TestRedisRestartRestoresConnectedClusters).
// Without it translation, which reads inputs from Redis, would not see
// east again until east's content changed.
func TestAllInOneRestoresInputsAfterRedisLoss(t *testing.T) {
	p := startHeapPlane(t, ingest.DefaultConfig().Limits)
	in := bigInput("east", 3, 1, 3)
	push := p.ing.Push(p.ctx)
	t.Cleanup(func() {
		_ = push.CloseRequest()
		_ = push.CloseResponse()
	})
	if err := push.Send(&ingestv1.PushRequest{Snapshot: in}); err != nil {
		t.Fatal(err)
	}
	if _, err := push.Receive(); err != nil {
		t.Fatalf("push: %v", err)
	}
	rc := p.redis.Client(t)
	key := "meshplane:{" + p.install + "}:" + string(snapshots.Inputs) + ":east"
	inRedis := func() bool {
		v, _ := rc.HGet(t.Context(), key, "version").Result()
		return v == in.GetVersion()
	}
	platformtest.Eventually(t, 20*time.Second, "east's input to reach Redis", inRedis)

	// A crash, and a restart with an empty data set (redistest keeps no
	// RDB or AOF).
	p.redis.Kill()
	if err := p.redis.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 20*time.Second, "east's input to be restored to Redis", inRedis)
}
