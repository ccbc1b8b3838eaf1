package snapstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
)

// RedisAcks is an AckStore in Redis.
//
// Layout, for install I:
//
//	meshplane:{I}:acks:<cluster>   hash {version, acked_at (unix nanos), apply_errors, results}
//	meshplane:{I}:acks             set of clusters
//	meshplane:{I}:acks:changes     pub/sub channel, messages "<cluster> <version>"
//
// results is an encoded distribution.v1.AckRequest, so the per-object
// results keep their proto shape.
type RedisAcks struct {
	client  redis.UniversalClient
	base    string
	durable Durability
}

// WithDurability makes every ack wait for d.Replicas replicas (WAIT),
// failing with ErrNotReplicated when too few hold it in time: the agent
// then sends it again.
func (a *RedisAcks) WithDurability(d Durability) *RedisAcks {
	a.durable = d
	return a
}

var _ snapshots.AckStore = (*RedisAcks)(nil)

// NewRedisAcks returns the ack store of install.
func NewRedisAcks(client redis.UniversalClient, install string) *RedisAcks {
	return &RedisAcks{client: client, base: fmt.Sprintf("meshplane:{%s}:acks", install)}
}

func (a *RedisAcks) key(cluster string) string { return a.base + ":" + cluster }
func (a *RedisAcks) channel() string           { return a.base + ":changes" }

func (a *RedisAcks) PutAck(ctx context.Context, rec snapshots.Ack) error {
	req := &distributionv1.AckRequest{Version: rec.Version, Results: rec.Results}
	if rec.Applied > 0 || rec.Deleted > 0 {
		req.Counts = &distributionv1.AckCounts{Applied: uint32(rec.Applied), Deleted: uint32(rec.Deleted)}
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode ack of cluster %q: %w", rec.Cluster, err)
	}
	err = a.durable.Write(ctx, a.client, a.key(rec.Cluster), func(c redis.Cmdable) error {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, a.key(rec.Cluster),
				"version", rec.Version,
				"acked_at", strconv.FormatInt(rec.AckedAt.UnixNano(), 10),
				"apply_errors", strconv.Itoa(rec.ApplyErrors),
				"results", b)
			p.SAdd(ctx, a.base, rec.Cluster)
			p.Publish(ctx, a.channel(), rec.Cluster+" "+rec.Version)
			return nil
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("store ack of cluster %q in redis: %w", rec.Cluster, err)
	}
	return nil
}

var ackFields = []string{"version", "acked_at", "apply_errors", "results"}

func (a *RedisAcks) GetAck(ctx context.Context, cluster string) (snapshots.Ack, error) {
	vals, err := a.client.HMGet(ctx, a.key(cluster), ackFields...).Result()
	if err != nil {
		return snapshots.Ack{}, fmt.Errorf("read ack of cluster %q from redis: %w", cluster, err)
	}
	rec, ok, err := decodeAck(cluster, vals)
	if err != nil {
		return snapshots.Ack{}, err
	}
	if !ok {
		return snapshots.Ack{}, snapshots.ErrNotFound
	}
	return rec, nil
}

func (a *RedisAcks) ListAcks(ctx context.Context) ([]snapshots.Ack, error) {
	clusters, err := a.client.SMembers(ctx, a.base).Result()
	if err != nil {
		return nil, fmt.Errorf("list acks in redis: %w", err)
	}
	slices.SortFunc(clusters, strings.Compare)
	cmds := make([]*redis.SliceCmd, len(clusters))
	_, err = a.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range clusters {
			cmds[i] = p.HMGet(ctx, a.key(c), ackFields...)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read acks from redis: %w", err)
	}
	out := make([]snapshots.Ack, 0, len(clusters))
	for i, c := range clusters {
		rec, ok, err := decodeAck(c, cmds[i].Val())
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, rec)
		}
	}
	return out, nil
}

// decodeAck decodes the fields of an ack hash; ok is false when there is
// none (the index outlived the hash).
func decodeAck(cluster string, vals []any) (rec snapshots.Ack, ok bool, err error) {
	if len(vals) != len(ackFields) {
		return snapshots.Ack{}, false, nil
	}
	version, _ := vals[0].(string)
	if version == "" {
		return snapshots.Ack{}, false, nil
	}
	rec = snapshots.Ack{Cluster: cluster, Version: version}
	if s, _ := vals[1].(string); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return snapshots.Ack{}, false, fmt.Errorf("decode ack time of cluster %q: %w", cluster, err)
		}
		rec.AckedAt = time.Unix(0, n)
	}
	if s, _ := vals[2].(string); s != "" {
		if rec.ApplyErrors, err = strconv.Atoi(s); err != nil {
			return snapshots.Ack{}, false, fmt.Errorf("decode apply errors of cluster %q: %w", cluster, err)
		}
	}
	if s, _ := vals[3].(string); s != "" {
		var req distributionv1.AckRequest
		if err := proto.Unmarshal([]byte(s), &req); err != nil {
			return snapshots.Ack{}, false, fmt.Errorf("decode ack results of cluster %q: %w", cluster, err)
		}
		rec.Results = req.GetResults()
		rec.Applied, rec.Deleted = int(req.GetCounts().GetApplied()), int(req.GetCounts().GetDeleted())
	}
	return rec, true, nil
}

// SubscribeAcks follows the acks put by any replica. Every (re)subscription
// to Redis is delivered as a Resync.
func (a *RedisAcks) SubscribeAcks(ctx context.Context) (<-chan snapshots.Change, error) {
	return subscribeRedis(ctx, a.client, a.channel())
}

// MemoryAcks is an AckStore in process memory, for one all-in-one process
// without Redis.
type MemoryAcks struct {
	mu   sync.RWMutex
	acks map[string]snapshots.Ack
	subs map[*memSub]struct{}
}

var _ snapshots.AckStore = (*MemoryAcks)(nil)

// NewMemoryAcks returns an empty store.
func NewMemoryAcks() *MemoryAcks {
	return &MemoryAcks{acks: map[string]snapshots.Ack{}, subs: map[*memSub]struct{}{}}
}

func (m *MemoryAcks) PutAck(_ context.Context, rec snapshots.Ack) error {
	rec.Results = slices.Clone(rec.Results)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.acks[rec.Cluster] = rec
	for s := range m.subs {
		select {
		case s.ch <- snapshots.Change{Cluster: rec.Cluster, Version: rec.Version}:
		default:
			// The subscriber is behind: it is told to resync instead.
			select {
			case s.ch <- snapshots.Change{Resync: true}:
			default:
			}
		}
	}
	return nil
}

func (m *MemoryAcks) GetAck(_ context.Context, cluster string) (snapshots.Ack, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	rec, ok := m.acks[cluster]
	if !ok {
		return snapshots.Ack{}, snapshots.ErrNotFound
	}
	return rec, nil
}

func (m *MemoryAcks) ListAcks(context.Context) ([]snapshots.Ack, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]snapshots.Ack, 0, len(m.acks))
	for _, r := range m.acks {
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y snapshots.Ack) int { return strings.Compare(x.Cluster, y.Cluster) })
	return out, nil
}

func (m *MemoryAcks) SubscribeAcks(ctx context.Context) (<-chan snapshots.Change, error) {
	s := &memSub{ch: make(chan snapshots.Change, subscriberBuffer)}
	m.mu.Lock()
	m.subs[s] = struct{}{}
	m.mu.Unlock()
	out := make(chan snapshots.Change, subscriberBuffer)
	go func() {
		defer close(out)
		defer func() {
			m.mu.Lock()
			delete(m.subs, s)
			m.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-s.ch:
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}
