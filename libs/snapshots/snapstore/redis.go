package snapstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
)

// Redis is a Store in Redis, shared by every replica of a service.
//
// Layout, for install I and kind K (input or output):
//
//	meshplane:{I}:K:<cluster>   hash {version, data, table (outputs: OutputEncoder's, optional)}
//	meshplane:{I}:K             set of clusters
//	meshplane:{I}:K:changes     pub/sub channel, messages "<cluster> <version>"
//
// Every key carries the hash tag {I}, so that one MULTI covers the snapshot,
// the index and the notice on Redis Cluster too.
type Redis[T proto.Message] struct {
	client  redis.UniversalClient
	newT    func() T
	base    string
	durable Durability
}

// WithDurability makes every write wait for d.Replicas replicas (WAIT),
// failing with ErrNotReplicated when too few hold it in time.
func (r *Redis[T]) WithDurability(d Durability) *Redis[T] {
	r.durable = d
	return r
}

// NewRedis returns a store of kind for install.
func NewRedis[T proto.Message](client redis.UniversalClient, install string, kind snapshots.Kind, newT func() T) *Redis[T] {
	return &Redis[T]{client: client, newT: newT, base: fmt.Sprintf("meshplane:{%s}:%s", install, kind)}
}

var (
	_ snapshots.Store[proto.Message]         = (*Redis[proto.Message])(nil)
	_ snapshots.EncodedPutter[proto.Message] = (*Redis[proto.Message])(nil)
	_ snapshots.EncodedGetter[proto.Message] = (*Redis[proto.Message])(nil)
)

func (r *Redis[T]) key(cluster string) string { return r.base + ":" + cluster }
func (r *Redis[T]) channel() string           { return r.base + ":changes" }

func (r *Redis[T]) Put(ctx context.Context, cluster, version string, v T) error {
	b, err := proto.Marshal(v) // the version is the content hash; stored bytes need not be canonical
	if err != nil {
		return fmt.Errorf("encode snapshot of cluster %q: %w", cluster, err)
	}
	return r.PutEncoded(ctx, cluster, snapshots.Encoded[T]{Version: version, Value: v, Data: b})
}

// PutEncoded stores e by its encoding.
func (r *Redis[T]) PutEncoded(ctx context.Context, cluster string, e snapshots.Encoded[T]) error {
	err := r.durable.Write(ctx, r.client, r.key(cluster), func(c redis.Cmdable) error {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			return r.putTx(ctx, p, cluster, e)
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("store snapshot of cluster %q in redis: %w", cluster, err)
	}
	return nil
}

// putTx queues the writes of PutEncoded in a transaction.
func (r *Redis[T]) putTx(ctx context.Context, p redis.Pipeliner, cluster string, e snapshots.Encoded[T]) error {
	if e.Table != nil {
		p.HSet(ctx, r.key(cluster), "version", e.Version, "data", e.Data, "table", e.Table)
	} else {
		// No table of another version may stay beside these bytes.
		p.HSet(ctx, r.key(cluster), "version", e.Version, "data", e.Data)
		p.HDel(ctx, r.key(cluster), "table")
	}
	p.SAdd(ctx, r.base, cluster)
	p.Publish(ctx, r.channel(), cluster+" "+e.Version)
	return nil
}

func (r *Redis[T]) Get(ctx context.Context, cluster string) (snapshots.Entry[T], error) {
	e, err := r.GetEncoded(ctx, cluster)
	if err != nil {
		return snapshots.Entry[T]{}, err
	}
	v, err := decode(r.newT, cluster, e.Data)
	if err != nil {
		return snapshots.Entry[T]{}, err
	}
	return snapshots.Entry[T]{Cluster: cluster, Version: e.Version, Value: v}, nil
}

// GetEncoded returns the stored bytes of the cluster's snapshot.
func (r *Redis[T]) GetEncoded(ctx context.Context, cluster string) (snapshots.Encoded[T], error) {
	vals, err := r.client.HMGet(ctx, r.key(cluster), "version", "data", "table").Result()
	if err != nil {
		return snapshots.Encoded[T]{}, fmt.Errorf("read snapshot of cluster %q from redis: %w", cluster, err)
	}
	version, _ := vals[0].(string)
	data, _ := vals[1].(string)
	if version == "" {
		return snapshots.Encoded[T]{}, snapshots.ErrNotFound
	}
	// The reply's strings are the bytes, not copied: Data and Table are
	// read only (Encoded), and a copy of a 14 MB output costs as much as
	// reading it.
	e := snapshots.Encoded[T]{Version: version, Data: stringBytes(data)}
	if table, ok := vals[2].(string); ok {
		e.Table = stringBytes(table)
	}
	return e, nil
}

func (r *Redis[T]) Version(ctx context.Context, cluster string) (string, error) {
	v, err := r.client.HGet(ctx, r.key(cluster), "version").Result()
	if errors.Is(err, redis.Nil) {
		return "", snapshots.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("read version of cluster %q from redis: %w", cluster, err)
	}
	return v, nil
}

func (r *Redis[T]) List(ctx context.Context) ([]snapshots.Entry[T], error) {
	clusters, err := r.client.SMembers(ctx, r.base).Result()
	if err != nil {
		return nil, fmt.Errorf("list snapshots in redis: %w", err)
	}
	slices.SortFunc(clusters, strings.Compare)
	out := make([]snapshots.Entry[T], 0, len(clusters))
	for _, c := range clusters {
		e, err := r.Get(ctx, c)
		if errors.Is(err, snapshots.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Subscribe delivers changes published by any replica. Every (re)subscription
// to Redis is delivered as a Resync, because notices published while the
// connection was down are lost.
func (r *Redis[T]) Subscribe(ctx context.Context) (<-chan snapshots.Change, error) {
	return subscribeRedis(ctx, r.client, r.channel())
}

// subscribeRedis follows a channel of "<cluster> <version>" notices. Every
// (re)subscription is delivered as a Resync.
func subscribeRedis(ctx context.Context, client redis.UniversalClient, channel string) (<-chan snapshots.Change, error) {
	ps := client.Subscribe(ctx, channel)
	// Wait for the first confirmation so that the caller knows that changes
	// after this call are seen.
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return nil, fmt.Errorf("subscribe to %s: %w", channel, err)
	}
	out := make(chan snapshots.Change, subscriberBuffer)
	backoff := snapshots.Backoff{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	go func() {
		// Receive does not watch ctx; closing the connection unblocks it.
		<-ctx.Done()
		ps.Close()
	}()
	go func() {
		defer close(out)
		for {
			msg, err := ps.Receive(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				// go-redis reconnects and resubscribes on the next Receive;
				// the confirmation that follows triggers a resync. Back off
				// so that an outage does not spin.
				select {
				case <-time.After(backoff.Next()):
				case <-ctx.Done():
					return
				}
				continue
			}
			backoff.Reset()
			var c snapshots.Change
			switch m := msg.(type) {
			case *redis.Subscription:
				c = snapshots.Change{Resync: true}
			case *redis.Message:
				cluster, version, _ := strings.Cut(m.Payload, " ")
				if version == "" {
					continue // not a put: nothing else publishes here
				}
				c = snapshots.Change{Cluster: cluster, Version: version}
			default:
				continue
			}
			select {
			case out <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// stringBytes returns s's bytes without copying them; they must not be
// modified.
func stringBytes(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
