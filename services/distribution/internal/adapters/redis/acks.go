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

	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/distribution/internal/app"
	goredis "github.com/redis/go-redis/v9"
)

// lapsedMarkTTL is how long a lapsed watch mark is kept before a reader
// removes it.
const lapsedMarkTTL = 10 * time.Minute

// Acks is an app.AckStore in Redis. The acks themselves are kept by
// snapstore.RedisAcks, whose layout and change notices translation reads
// too; this adapter adds the watch marks:
//
//	meshplane:{I}:watching         hash {"<cluster> <replica>": lapse time (unix nanos)}
//	meshplane:{I}:sent:<cluster>   list of "<version> <objects> <results>", newest first, at most app.KeepSent
//
// The hash tag {I} keeps every key of an install on one slot of a Redis
// Cluster.
type Acks struct {
	client goredis.UniversalClient
	base   string
	acks   *snapstore.RedisAcks
}

var _ app.AckStore = (*Acks)(nil)

// NewAcks returns the ack store of install.
func NewAcks(client goredis.UniversalClient, install string) *Acks {
	return &Acks{client: client, base: fmt.Sprintf("meshplane:{%s}:acks", install), acks: snapstore.NewRedisAcks(client, install)}
}

// WithDurability makes every ack wait for d.Replicas replicas (WAIT): one
// short of them fails, and the agent sends it again.
func (a *Acks) WithDurability(d snapstore.Durability) *Acks {
	a.acks.WithDurability(d)
	return a
}

func (a *Acks) watchingKey() string { return strings.TrimSuffix(a.base, ":acks") + ":watching" }
func (a *Acks) sentKey(cluster string) string {
	return strings.TrimSuffix(a.base, ":acks") + ":sent:" + cluster
}

// RecordSent keeps one entry per version: an entry of the same version
// is removed first, in the same transaction, so that a version sent again
// becomes the newest without pushing others out.
func (a *Acks) RecordSent(ctx context.Context, cluster string, v app.SentVersion) error {
	key := a.sentKey(cluster)
	entry := fmt.Sprintf("%s %d %d", v.Version, v.Objects, v.Results)
	_, err := a.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		// Entries of v.Version with other counts cannot be matched by
		// value; versions are content hashes, so the counts are the same.
		p.LRem(ctx, key, 0, entry)
		p.LPush(ctx, key, entry)
		p.LTrim(ctx, key, 0, app.KeepSent-1)
		return nil
	})
	if err != nil {
		return fmt.Errorf("record version sent to cluster %q in redis: %w", cluster, err)
	}
	return nil
}

func (a *Acks) SentVersions(ctx context.Context, cluster string) ([]app.SentVersion, error) {
	entries, err := a.client.LRange(ctx, a.sentKey(cluster), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("read versions sent to cluster %q from redis: %w", cluster, err)
	}
	out := make([]app.SentVersion, 0, len(entries))
	for _, e := range entries {
		var v app.SentVersion
		if _, err := fmt.Sscanf(e, "%s %d %d", &v.Version, &v.Objects, &v.Results); err != nil {
			return nil, fmt.Errorf("decode version sent to cluster %q (%q): %w", cluster, e, err)
		}
		out = append(out, v)
	}
	return out, nil
}

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
