// Package redis keeps acknowledgements in Redis, shared by every
// distribution replica, so that any replica answers ListAcks and computes
// the metrics from the same state.
package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/distribution/internal/app"
	goredis "github.com/redis/go-redis/v9"
)

// lapsedMarkTTL is how long a lapsed watch mark is kept before a reader
// removes it.
const lapsedMarkTTL = 10 * time.Minute

// Acks is an app.AckStore in Redis. The acks themselves are kept by
// snapshots.RedisAcks, whose layout and change notices translation reads
// too; this adapter adds the watch marks:
//
//	meshplane:{I}:watching         hash {"<cluster> <replica>": lapse time (unix nanos)}
//
// The hash tag {I} keeps every key of an install on one slot of a Redis
// Cluster.
type Acks struct {
	client goredis.UniversalClient
	base   string
	acks   *snapshots.RedisAcks
}

var _ app.AckStore = (*Acks)(nil)

// NewAcks returns the ack store of install.
func NewAcks(client goredis.UniversalClient, install string) *Acks {
	return &Acks{client: client, base: fmt.Sprintf("meshplane:{%s}:acks", install), acks: snapshots.NewRedisAcks(client, install)}
}

func (a *Acks) key(cluster string) string { return a.base + ":" + cluster }
func (a *Acks) watchingKey() string       { return strings.TrimSuffix(a.base, ":acks") + ":watching" }

func (a *Acks) MarkWatching(ctx context.Context, cluster, replica string, until time.Time) error {
	field := cluster + " " + replica
	var err error
	if until.IsZero() {
		err = a.client.HDel(ctx, a.watchingKey(), field).Err()
	} else {
		err = a.client.HSet(ctx, a.watchingKey(), field, strconv.FormatInt(until.UnixNano(), 10)).Err()
	}
	if err != nil {
		return fmt.Errorf("mark watch of cluster %q in redis: %w", cluster, err)
	}
	return nil
}

func (a *Acks) Watched(ctx context.Context, now time.Time) (map[string]bool, error) {
	marks, err := a.client.HGetAll(ctx, a.watchingKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("read watch marks from redis: %w", err)
	}
	out := map[string]bool{}
	var lapsed []string
	for field, v := range marks {
		cluster, _, _ := strings.Cut(field, " ")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || time.Unix(0, n).Before(now.Add(-lapsedMarkTTL)) {
			// A replica that died long ago left its mark. Removing only
			// old ones cannot race with a live replica's renewal.
			lapsed = append(lapsed, field)
			continue
		}
		if time.Unix(0, n).After(now) {
			out[cluster] = true
		}
	}
	if len(lapsed) > 0 {
		_ = a.client.HDel(ctx, a.watchingKey(), lapsed...).Err() // best effort
	}
	return out, nil
}

func (a *Acks) PutAck(ctx context.Context, rec app.AckRecord) error { return a.acks.PutAck(ctx, rec) }

func (a *Acks) ListAcks(ctx context.Context) ([]app.AckRecord, error) { return a.acks.ListAcks(ctx) }
