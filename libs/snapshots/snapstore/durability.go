package snapstore

import (
	"context"
	"fmt"
	"time"

	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/redis/go-redis/v9"
)

// Durability says how many replicas must hold a write before it counts as
// done. Redis replicates asynchronously: without it, a primary that dies
// right after acknowledging a write can take the write along, and the
// promoted replica never had it. With it, each write is followed on the
// same connection by WAIT; fewer acknowledgements than Replicas within
// Timeout make the write fail with ErrNotReplicated, so that its caller
// retries (a snapshot, an ack, a token or a revocation may be written
// again). Sentinel promotes the replica with the most data, so a write
// that one replica acknowledged survives the primary's death; Redis does
// not promise it under every partition. Replicas 0 does not wait.
type Durability struct {
	Replicas int
	Timeout  time.Duration
}

// Waiter is one connection that can wait for its writes to replicate: a
// redis.Conn, or the connection of a WATCH transaction.
type Waiter interface {
	Wait(ctx context.Context, replicas int, timeout time.Duration) *redis.IntCmd
}

// Write runs fn and, when replicas are wanted, waits for them. The wait
// must run on the connection that wrote, to the primary of key: fn gets
// that connection (the client itself when nothing is waited for).
func (d Durability) Write(ctx context.Context, client redis.UniversalClient, key string, fn func(c redis.Cmdable) error) error {
	if d.Replicas <= 0 {
		return fn(client)
	}
	var conn *redis.Conn
	switch c := client.(type) {
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return err
		}
		conn = node.Conn()
	case *redis.Client:
		conn = c.Conn()
	default:
		return fmt.Errorf("redis: a %T cannot wait for replicas", client)
	}
	defer conn.Close()
	if err := fn(conn); err != nil {
		return err
	}
	return d.Wait(ctx, conn)
}

// Wait waits until Replicas replicas hold every write made on c.
func (d Durability) Wait(ctx context.Context, c Waiter) error {
	if d.Replicas <= 0 {
		return nil
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = time.Second
	}
	n, err := c.Wait(ctx, d.Replicas, timeout).Result()
	if err != nil {
		return fmt.Errorf("WAIT: %w", err)
	}
	if n < int64(d.Replicas) {
		return fmt.Errorf("%w: %d of %d within %v", snapshots.ErrNotReplicated, n, d.Replicas, timeout)
	}
	return nil
}
