package snapstore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/redis/go-redis/v9"
)

// RedisOptions says how to reach the shared store. An empty Addrs means no
// Redis: the service keeps its state in memory, which suits a single
// all-in-one process.
type RedisOptions struct {
	// Addrs is a comma-separated list: one address for a standalone server,
	// several for Redis Cluster, or Sentinel addresses with MasterName.
	Addrs      string
	MasterName string
	// Cluster selects Redis Cluster even with one address (a Service in
	// front of the nodes, or a managed configuration endpoint).
	Cluster bool
	// PasswordFile holds the password, so that it never appears in flags,
	// the environment of a process listing, or logs.
	PasswordFile string
	DB           int
	DialTimeout  time.Duration
	// WaitReplicas is how many replicas must hold a write before it
	// counts as done (WAIT; see Durability); 0 does not wait.
	// WaitTimeout bounds each wait.
	WaitReplicas int
	WaitTimeout  time.Duration

	flags *platform.Flags
}

// NewRedisOptions returns the defaults.
func NewRedisOptions() RedisOptions {
	return RedisOptions{DialTimeout: 2 * time.Second, WaitTimeout: time.Second}
}

// AddFlags registers redis-addrs, redis-master-name, redis-cluster,
// redis-password-file, redis-db, redis-dial-timeout, redis-wait-replicas
// and redis-wait-timeout.
func (o *RedisOptions) AddFlags(fs *flag.FlagSet) {
	o.flags = platform.NewFlags(fs, "redis")
	o.flags.String(&o.Addrs, "addrs", "Redis address(es), comma-separated; empty keeps state in memory only")
	o.flags.String(&o.MasterName, "master-name", "Sentinel master name; set it to use Sentinel")
	o.flags.Bool(&o.Cluster, "cluster", "Redis Cluster, even with one address (several addresses without --redis-master-name are a cluster too)")
	o.flags.String(&o.PasswordFile, "password-file", "file holding the Redis password")
	o.flags.Int(&o.DB, "db", "Redis database number (standalone and Sentinel)")
	o.flags.Duration(&o.DialTimeout, "dial-timeout", "Redis dial timeout")
	o.flags.Int(&o.WaitReplicas, "wait-replicas", "Redis replicas that must hold each write (a snapshot, an ack, a token, a cluster record, a revocation) before it counts as done (WAIT on the writing connection); 0 does not wait. Set 1 with Sentinel or Cluster")
	o.flags.Duration(&o.WaitTimeout, "wait-timeout", "how long a write waits for --redis-wait-replicas before it fails and is retried")
}

// Durability is the options' WaitReplicas and WaitTimeout.
func (o *RedisOptions) Durability() Durability {
	return Durability{Replicas: o.WaitReplicas, Timeout: o.WaitTimeout}
}

// Validate checks the options.
func (o *RedisOptions) Validate() error {
	var errs []error
	if o.flags != nil {
		errs = append(errs, o.flags.Err())
	}
	for _, a := range o.addrs() {
		if !strings.Contains(a, ":") {
			errs = append(errs, fmt.Errorf("--redis-addrs: %q is not host:port", a))
		}
	}
	if o.DB < 0 {
		errs = append(errs, errors.New("--redis-db must not be negative"))
	}
	if o.Cluster && o.MasterName != "" {
		errs = append(errs, errors.New("--redis-cluster and --redis-master-name exclude each other: Sentinel does not front a Redis Cluster"))
	}
	if o.isCluster() && o.DB != 0 {
		// go-redis would drop it and write to database 0 without a word.
		errs = append(errs, errors.New("--redis-db must be 0 with Redis Cluster, which has one database (several --redis-addrs without --redis-master-name are a cluster)"))
	}
	if o.DialTimeout <= 0 {
		errs = append(errs, errors.New("--redis-dial-timeout must be positive"))
	}
	if o.WaitReplicas < 0 || o.WaitTimeout < 0 {
		errs = append(errs, errors.New("--redis-wait-replicas and --redis-wait-timeout must not be negative (a timeout of 0 is 1s)"))
	}
	return errors.Join(errs...)
}

func (o *RedisOptions) addrs() []string {
	var out []string
	for _, a := range strings.Split(o.Addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Enabled reports whether a Redis address is set.
func (o *RedisOptions) Enabled() bool { return len(o.addrs()) > 0 }

// NewClient returns a client for standalone, Sentinel or Cluster, as the
// options say. go-redis's own log lines (a pool that cannot dial) go to
// log (nil: go-redis's default, plain text on stderr), so that they are
// JSON like the service's.
func (o *RedisOptions) NewClient(log *slog.Logger) (redis.UniversalClient, error) {
	if log != nil {
		redis.SetLogger(redisLog{log.With("component", "redis")})
	}
	password := ""
	if o.PasswordFile != "" {
		b, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("read redis password: %w", err)
		}
		password = strings.TrimSpace(string(b))
	}
	u := &redis.UniversalOptions{
		Addrs:       o.addrs(),
		MasterName:  o.MasterName,
		Password:    password,
		DB:          o.DB,
		DialTimeout: o.DialTimeout,
		// Fail fast while Redis is down: callers fall back to memory.
		MaxRetries:    1,
		DialerRetries: 1,
		ReadTimeout:   2 * time.Second,
		WriteTimeout:  2 * time.Second,
	}
	if !o.isCluster() {
		return redis.NewUniversalClient(u), nil
	}
	return newClusterClient(u.Cluster()), nil
}

// isCluster says whether the options select Redis Cluster: --redis-cluster,
// or several addresses without a Sentinel master name.
func (o *RedisOptions) isCluster() bool {
	return o.Cluster || (o.MasterName == "" && len(o.addrs()) > 1)
}

// clusterStateReloadInterval bounds how long a Cluster client may route by
// a slot map that no error revealed as stale.
const clusterStateReloadInterval = 5 * time.Second

// newClusterClient returns a Redis Cluster client that reloads the slot
// map as soon as a node cannot be reached. go-redis reloads it on MOVED
// and READONLY replies, and otherwise once a minute: after a primary dies
// its slots would fail for up to a minute, although its replica took over
// within seconds.
func newClusterClient(o *redis.ClusterOptions) *redis.ClusterClient {
	o.ClusterStateReloadInterval = clusterStateReloadInterval
	c := redis.NewClusterClient(o)
	c.OnNewNode(func(node *redis.Client) { node.AddHook(reloadOnDialFailure{c}) })
	return c
}

// reloadOnDialFailure asks its cluster client for a new slot map when a
// node refuses a connection. The reload runs in the background, at most
// one at a time.
type reloadOnDialFailure struct{ cluster *redis.ClusterClient }

func (h reloadOnDialFailure) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			h.cluster.ReloadState(ctx)
		}
		return conn, err
	}
}

func (h reloadOnDialFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h reloadOnDialFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// redisLog hands go-redis's log lines to slog. go-redis logs what goes
// wrong (dial failures, lost connections): warnings.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}
