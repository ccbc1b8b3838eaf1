// Package redis keeps acknowledgements in Redis, shared by every
// distribution replica, so that any replica answers ListAcks and computes
// the metrics from the same state.
package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/services/distribution/internal/app"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
)

// lapsedMarkTTL is how long a lapsed watch mark is kept before a reader
// removes it.
const lapsedMarkTTL = 10 * time.Minute

// Acks is an app.AckStore in Redis.
//
// Layout, for install I:
//
//	meshplane:{I}:acks:<cluster>   hash {version, acked_at (unix nanos), apply_errors, results}
//	meshplane:{I}:acks             set of clusters
//	meshplane:{I}:watching         hash {"<cluster> <replica>": lapse time (unix nanos)}
//
// results is an encoded distribution.v1.AckRequest, so the per-object
// results keep their proto shape. The hash tag {I} keeps one MULTI on one
// slot of a Redis Cluster.
type Acks struct {
	client goredis.UniversalClient
	base   string
}

var _ app.AckStore = (*Acks)(nil)

// NewAcks returns the ack store of install.
func NewAcks(client goredis.UniversalClient, install string) *Acks {
	return &Acks{client: client, base: fmt.Sprintf("meshplane:{%s}:acks", install)}
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

func (a *Acks) PutAck(ctx context.Context, rec app.AckRecord) error {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&distributionv1.AckRequest{Version: rec.Version, Results: rec.Results})
	if err != nil {
		return fmt.Errorf("encode ack of cluster %q: %w", rec.Cluster, err)
	}
	_, err = a.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.HSet(ctx, a.key(rec.Cluster),
			"version", rec.Version,
			"acked_at", strconv.FormatInt(rec.AckedAt.UnixNano(), 10),
			"apply_errors", strconv.Itoa(rec.ApplyErrors),
			"results", b)
		p.SAdd(ctx, a.base, rec.Cluster)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store ack of cluster %q in redis: %w", rec.Cluster, err)
	}
	return nil
}

func (a *Acks) ListAcks(ctx context.Context) ([]app.AckRecord, error) {
	clusters, err := a.client.SMembers(ctx, a.base).Result()
	if err != nil {
		return nil, fmt.Errorf("list acks in redis: %w", err)
	}
	slices.SortFunc(clusters, strings.Compare)
	cmds := make([]*goredis.SliceCmd, len(clusters))
	_, err = a.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, c := range clusters {
			cmds[i] = p.HMGet(ctx, a.key(c), "version", "acked_at", "apply_errors", "results")
		}
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("read acks from redis: %w", err)
	}
	out := make([]app.AckRecord, 0, len(clusters))
	for i, c := range clusters {
		vals := cmds[i].Val()
		if len(vals) != 4 {
			continue
		}
		version, _ := vals[0].(string)
		if version == "" {
			continue // the index outlived the hash
		}
		rec := app.AckRecord{Cluster: c, Version: version}
		if s, _ := vals[1].(string); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("decode ack time of cluster %q: %w", c, err)
			}
			rec.AckedAt = time.Unix(0, n)
		}
		if s, _ := vals[2].(string); s != "" {
			if rec.ApplyErrors, err = strconv.Atoi(s); err != nil {
				return nil, fmt.Errorf("decode apply errors of cluster %q: %w", c, err)
			}
		}
		if s, _ := vals[3].(string); s != "" {
			var req distributionv1.AckRequest
			if err := proto.Unmarshal([]byte(s), &req); err != nil {
				return nil, fmt.Errorf("decode ack results of cluster %q: %w", c, err)
			}
			rec.Results = req.GetResults()
		}
		out = append(out, rec)
	}
	return out, nil
}
