// Package redis keeps registration's shared state in Redis, so that every
// replica sees the same tokens, cluster records and revocations. Keys, all
// in one hash slot per install so that multi-key commands work on Redis
// Cluster:
//
//	meshplane:{I}:registration:token:<cluster>    hash {hash, created, expires, used}
//	meshplane:{I}:registration:cluster:<cluster>  JSON cluster record
//	meshplane:{I}:registration:clusters           set of cluster names
//	meshplane:{I}:registration:revoked            sorted set: serial -> expiry (unix ms)
package redis

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/meshplane/meshplane/libs/revocation"
	revredis "github.com/meshplane/meshplane/libs/revocation/redis"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
	"github.com/redis/go-redis/v9"
)

// UsedTokenRetention is how long a used or expired token's record is kept,
// so that presenting it again says "used" or "expired" rather than
// "invalid".
const UsedTokenRetention = 24 * time.Hour

// Store implements app.TokenStore, app.ClusterStore and app.RevocationStore.
type Store struct {
	client redis.UniversalClient
	base   string
	// revoked is the layout libs/revocation reads in every service.
	revoked string
	durable Durability
}

// Durability says how many replicas must hold a security write (a token,
// a cluster record, a revocation) before it counts as done: a primary that
// dies right after acknowledging a revocation would otherwise take it
// along, and the promoted replica would admit the revoked certificate
// again (snapstore.Durability).
type Durability = snapstore.Durability

// ErrNotReplicated says a write reached the primary but not enough
// replicas within the timeout. It may or may not survive a failover.
var ErrNotReplicated = fmt.Errorf("redis: %w", app.ErrNotDurable)

// WithDurability makes the store wait for replicas after each security
// write; Replicas 0 (the default) does not wait.
func (s *Store) WithDurability(d Durability) *Store {
	s.durable = d
	return s
}

// write runs fn on the connection to the primary of key and, when
// replicas are wanted, waits for them.
func (s *Store) write(ctx context.Context, key string, fn func(c redis.Cmdable) error) error {
	return notReplicated(s.durable.Write(ctx, s.client, key, fn))
}

// waitReplicas waits until the replicas hold every write made on c.
func (s *Store) waitReplicas(ctx context.Context, c snapstore.Waiter) error {
	return notReplicated(s.durable.Wait(ctx, c))
}

// notReplicated marks a write short of replicas as ErrNotReplicated (and
// so app.ErrNotDurable).
func notReplicated(err error) error {
	if errors.Is(err, snapshots.ErrNotReplicated) {
		return fmt.Errorf("%w: %w", ErrNotReplicated, err)
	}
	return err
}

var (
	_ app.TokenStore      = (*Store)(nil)
	_ app.ClusterStore    = (*Store)(nil)
	_ app.RevocationStore = (*Store)(nil)
)

// New returns a store for one install.
func New(client redis.UniversalClient, install string) *Store {
	return &Store{client: client, base: fmt.Sprintf("meshplane:{%s}:registration", install), revoked: revredis.Key(install)}
}

func (s *Store) tokenKey(cluster string) string   { return s.base + ":token:" + cluster }
func (s *Store) clusterKey(cluster string) string { return s.base + ":cluster:" + cluster }
func (s *Store) clustersKey() string              { return s.base + ":clusters" }
func (s *Store) revokedKey() string               { return s.revoked }

func ms(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

func fromMS(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(n), nil
}

// PutToken replaces the token of t.Cluster.
func (s *Store) PutToken(ctx context.Context, t domain.BootstrapToken) error {
	key := s.tokenKey(t.Cluster)
	err := s.write(ctx, key, func(c redis.Cmdable) error {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, key)
			p.HSet(ctx, key, "hash", hex.EncodeToString(t.Hash[:]), "created", ms(t.CreatedAt), "expires", ms(t.ExpiresAt))
			if !t.ExpiresAt.IsZero() {
				p.PExpireAt(ctx, key, t.ExpiresAt.Add(UsedTokenRetention))
			}
			return nil
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("redis: put token %s: %w", t.Cluster, err)
	}
	return nil
}

// Token returns the token of cluster.
func (s *Store) Token(ctx context.Context, cluster string) (domain.BootstrapToken, error) {
	m, err := s.client.HGetAll(ctx, s.tokenKey(cluster)).Result()
	if err != nil {
		return domain.BootstrapToken{}, fmt.Errorf("redis: get token %s: %w", cluster, err)
	}
	if len(m) == 0 {
		return domain.BootstrapToken{}, app.ErrNotFound
	}
	t := domain.BootstrapToken{Cluster: cluster}
	b, err := hex.DecodeString(m["hash"])
	if err != nil || len(b) != len(t.Hash) {
		return domain.BootstrapToken{}, fmt.Errorf("redis: token %s: bad hash", cluster)
	}
	t.Hash = domain.TokenHash(b)
	for field, dst := range map[string]*time.Time{"created": &t.CreatedAt, "expires": &t.ExpiresAt, "used": &t.UsedAt} {
		v, ok := m[field]
		if !ok {
			continue
		}
		if *dst, err = fromMS(v); err != nil {
			return domain.BootstrapToken{}, fmt.Errorf("redis: token %s: bad %s: %w", cluster, field, err)
		}
	}
	return t, nil
}

// markUsed sets "used" only while the stored hash is ARGV[1] and no "used"
// is set: one script, so two replicas can never both spend a token.
var markUsed = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'hash') ~= ARGV[1] then return 0 end
if redis.call('HEXISTS', KEYS[1], 'used') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'used', ARGV[2])
return 1
`)

// MarkTokenUsed spends the token atomically. Spending is waited for like
// the other security writes: a token spent on a primary that died before
// a replica had it would be spendable again. When the wait falls short
// the token stays spent on the primary, and the caller is told it failed.
func (s *Store) MarkTokenUsed(ctx context.Context, cluster string, hash domain.TokenHash, at time.Time) (bool, error) {
	key := s.tokenKey(cluster)
	var n int
	err := s.write(ctx, key, func(c redis.Cmdable) error {
		var err error
		n, err = markUsed.Run(ctx, c, []string{key}, hex.EncodeToString(hash[:]), ms(at)).Int()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("redis: spend token %s: %w", cluster, err)
	}
	return n == 1, nil
}

// DeleteToken removes the token of cluster.
func (s *Store) DeleteToken(ctx context.Context, cluster string) error {
	key := s.tokenKey(cluster)
	if err := s.write(ctx, key, func(c redis.Cmdable) error { return c.Del(ctx, key).Err() }); err != nil {
		return fmt.Errorf("redis: delete token %s: %w", cluster, err)
	}
	return nil
}

// clusterRecord is the stored form of domain.Cluster.
type clusterRecord struct {
	Name         string       `json:"name"`
	Status       string       `json:"status"`
	AgentVersion string       `json:"agentVersion,omitempty"`
	CreatedAt    time.Time    `json:"createdAt,omitzero"`
	FirstSeen    time.Time    `json:"firstSeen,omitzero"`
	LastSeen     time.Time    `json:"lastSeen,omitzero"`
	Certs        []certRecord `json:"certs,omitempty"`
}

type certRecord struct {
	Serial   string    `json:"serial"`
	NotAfter time.Time `json:"notAfter"`
}

var statuses = []domain.Status{domain.StatusPendingApproval, domain.StatusApproved, domain.StatusRegistered, domain.StatusDeregistered}

func encodeCluster(c domain.Cluster) ([]byte, error) {
	r := clusterRecord{Name: c.Name, Status: c.Status.String(), AgentVersion: c.AgentVersion, CreatedAt: c.CreatedAt, FirstSeen: c.FirstSeen, LastSeen: c.LastSeen}
	for _, ic := range c.Certs {
		r.Certs = append(r.Certs, certRecord(ic))
	}
	return json.Marshal(r)
}

func decodeCluster(data []byte) (domain.Cluster, error) {
	var r clusterRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return domain.Cluster{}, err
	}
	c := domain.Cluster{Name: r.Name, AgentVersion: r.AgentVersion, CreatedAt: r.CreatedAt, FirstSeen: r.FirstSeen, LastSeen: r.LastSeen}
	i := slices.IndexFunc(statuses, func(s domain.Status) bool { return s.String() == r.Status })
	if i < 0 {
		return domain.Cluster{}, fmt.Errorf("unknown status %q", r.Status)
	}
	c.Status = statuses[i]
	for _, cr := range r.Certs {
		c.Certs = append(c.Certs, domain.IssuedCert(cr))
	}
	return c, nil
}

// Cluster returns the record of name.
func (s *Store) Cluster(ctx context.Context, name string) (domain.Cluster, error) {
	data, err := s.client.Get(ctx, s.clusterKey(name)).Bytes()
	if errors.Is(err, redis.Nil) {
		return domain.Cluster{}, app.ErrNotFound
	}
	if err != nil {
		return domain.Cluster{}, fmt.Errorf("redis: get cluster %s: %w", name, err)
	}
	c, err := decodeCluster(data)
	if err != nil {
		return domain.Cluster{}, fmt.Errorf("redis: cluster %s: %w", name, err)
	}
	return c, nil
}

// Clusters returns every record, ordered by name.
func (s *Store) Clusters(ctx context.Context) ([]domain.Cluster, error) {
	names, err := s.client.SMembers(ctx, s.clustersKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: list clusters: %w", err)
	}
	if len(names) == 0 {
		return nil, nil
	}
	slices.Sort(names)
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = s.clusterKey(n)
	}
	vals, err := s.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: list clusters: %w", err)
	}
	out := make([]domain.Cluster, 0, len(vals))
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue // removed between SMEMBERS and MGET
		}
		c, err := decodeCluster([]byte(str))
		if err != nil {
			return nil, fmt.Errorf("redis: cluster %s: %w", names[i], err)
		}
		out = append(out, c)
	}
	return out, nil
}

// maxUpdateAttempts bounds optimistic retries under contention. Between
// attempts a writer that lost waits a jittered, doubling while
// (updateBackoff), so that writers that lost together do not collide
// again in lockstep: without it 20 concurrent updates of one cluster could
// exhaust the attempts on a loaded machine (CI saw "too much contention").
const maxUpdateAttempts = 32

// updateBackoff paces UpdateCluster's attempts after a lost WATCH: 0.5–1
// ms at first, at most 100 ms, about 2.5 s in all for 32 attempts.
func updateBackoff() snapshots.Backoff {
	return snapshots.Backoff{Min: time.Millisecond, Max: 100 * time.Millisecond}
}

// UpdateCluster runs fn under WATCH and writes its result in MULTI/EXEC,
// retrying when another writer got there first.
func (s *Store) UpdateCluster(ctx context.Context, name string, fn func(c *domain.Cluster, exists bool) error) (domain.Cluster, error) {
	key := s.clusterKey(name)
	var out domain.Cluster
	txf := func(tx *redis.Tx) error {
		var c domain.Cluster
		data, err := tx.Get(ctx, key).Bytes()
		exists := err == nil
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return err
		default:
			if c, err = decodeCluster(data); err != nil {
				return fmt.Errorf("cluster %s: %w", name, err)
			}
		}
		if err := fn(&c, exists); err != nil {
			return &fnError{err}
		}
		c.Name = name
		enc, err := encodeCluster(c)
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, enc, 0)
			p.SAdd(ctx, s.clustersKey(), name)
			return nil
		})
		if err != nil {
			return err
		}
		// The transaction ran on tx's connection, to the key's primary:
		// the wait goes there too.
		if err := s.waitReplicas(ctx, tx); err != nil {
			return err
		}
		out = c
		return nil
	}
	backoff := updateBackoff()
	for range maxUpdateAttempts {
		err := s.client.Watch(ctx, txf, key)
		if errors.Is(err, redis.TxFailedErr) {
			// Another writer got there first.
			if !backoff.Wait(ctx) {
				return domain.Cluster{}, fmt.Errorf("redis: update cluster %s: %w", name, ctx.Err())
			}
			continue
		}
		var fe *fnError
		if errors.As(err, &fe) {
			return domain.Cluster{}, fe.err
		}
		if err != nil {
			return domain.Cluster{}, fmt.Errorf("redis: update cluster %s: %w", name, err)
		}
		return out, nil
	}
	return domain.Cluster{}, fmt.Errorf("redis: update cluster %s: too much contention", name)
}

// fnError carries the callback's error through Watch untouched.
type fnError struct{ err error }

func (e *fnError) Error() string { return e.err.Error() }

// Revoke adds certificates to the shared set; each stays until it expires.
func (s *Store) Revoke(ctx context.Context, certs []domain.IssuedCert) error {
	if len(certs) == 0 {
		return nil
	}
	members := make([]redis.Z, len(certs))
	for i, c := range certs {
		members[i] = redis.Z{Score: float64(c.NotAfter.UnixMilli()), Member: c.Serial}
	}
	// GT keeps the later expiry when a serial is revoked twice.
	key := s.revokedKey()
	if err := s.write(ctx, key, func(c redis.Cmdable) error { return c.ZAddGT(ctx, key, members...).Err() }); err != nil {
		return fmt.Errorf("redis: revoke: %w", err)
	}
	return nil
}

// Revoked returns the revocations that have not expired at now, and
// forgets the expired ones.
func (s *Store) Revoked(ctx context.Context, now time.Time) ([]revocation.Revoked, error) {
	key := s.revokedKey()
	cutoff := strconv.FormatInt(now.UnixMilli(), 10)
	var rng *redis.ZSliceCmd
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRemRangeByScore(ctx, key, "-inf", cutoff)
		rng = p.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: "(" + cutoff, Max: "+inf"})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis: read revocations: %w", err)
	}
	return revredis.FromScores(rng.Val()), nil
}
