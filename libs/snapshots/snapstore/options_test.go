package snapstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
)

// The services' Redis client carries on after the primary it wrote to
// dies: Sentinel promotes a replica, Cluster a primary's replica, and the
// client finds the new primary without a restart.
func TestRedisClientFollowsFailover(t *testing.T) {
	for _, topology := range []redistest.Topology{redistest.Sentinel, redistest.Cluster} {
		t.Run(string(topology), func(t *testing.T) {
			d := redistest.StartDeployment(t, topology)
			o := snapstore.NewRedisOptions()
			o.Addrs, o.MasterName = strings.Join(d.Addrs(), ","), d.MasterName()
			c, err := o.NewClient(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := t.Context()
			for i := range 30 {
				if err := c.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			var victim *redistest.Server
			if topology == redistest.Sentinel {
				victim, err = d.Primary(ctx)
			} else {
				var ps []*redistest.Server
				ps, err = d.Primaries(ctx)
				if len(ps) > 0 {
					victim = ps[0]
				}
			}
			if err != nil || victim == nil {
				t.Fatalf("no primary to kill: %v", err)
			}
			victim.Kill()
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				last := writeAll(wctx, c)
				if last == nil {
					return
				}
				select {
				case <-wctx.Done():
					t.Fatalf("the client did not write to every slot within 30s of the primary's death: %v", last)
				case <-tick.C:
				}
			}
		})
	}
}

func writeAll(ctx context.Context, c redis.UniversalClient) error {
	for i := range 30 {
		if err := c.Set(ctx, fmt.Sprintf("n%d", i), i, 0).Err(); err != nil {
			return err
		}
	}
	return nil
}

func TestRedisOptionsSelectTopology(t *testing.T) {
	tests := []struct {
		name    string
		opts    snapstore.RedisOptions
		wantErr string
		want    string // the client's type
	}{
		{name: "one address is standalone", opts: snapstore.RedisOptions{Addrs: "r:6379"}, want: "*redis.Client"},
		{name: "a master name is Sentinel", opts: snapstore.RedisOptions{Addrs: "s1:26379,s2:26379", MasterName: "m"}, want: "*redis.Client"},
		{name: "several addresses are a cluster", opts: snapstore.RedisOptions{Addrs: "a:6379,b:6379"}, want: "*redis.ClusterClient"},
		{name: "--redis-cluster with one address", opts: snapstore.RedisOptions{Addrs: "c:6379", Cluster: true}, want: "*redis.ClusterClient"},
		{name: "a database on a cluster", opts: snapstore.RedisOptions{Addrs: "a:6379,b:6379", DB: 3}, wantErr: "--redis-db must be 0 with Redis Cluster"},
		{name: "a database with --redis-cluster", opts: snapstore.RedisOptions{Addrs: "c:6379", Cluster: true, DB: 1}, wantErr: "--redis-db must be 0"},
		{name: "Sentinel and cluster", opts: snapstore.RedisOptions{Addrs: "c:6379", Cluster: true, MasterName: "m"}, wantErr: "exclude each other"},
		{name: "a database with Sentinel", opts: snapstore.RedisOptions{Addrs: "s1:26379,s2:26379", MasterName: "m", DB: 2}, want: "*redis.Client"},
		{name: "negative replicas to wait for", opts: snapstore.RedisOptions{Addrs: "r:6379", WaitReplicas: -1}, wantErr: "--redis-wait-replicas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.DialTimeout = time.Second
			err := o.Validate()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			c, err := o.NewClient(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := fmt.Sprintf("%T", c); got != tt.want {
				t.Errorf("client %s, want %s", got, tt.want)
			}
		})
	}
}

func TestValidateInstall(t *testing.T) {
	for _, ok := range []string{"meshplane", "prod-eu", "a", "team_a.prod", "A1"} {
		if err := snapshots.ValidateInstall(ok); err != nil {
			t.Errorf("ValidateInstall(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "}x", "a{b}", "-a", "a-", "a b", "a:b", strings.Repeat("a", 64), "é"} {
		if err := snapshots.ValidateInstall(bad); err == nil {
			t.Errorf("ValidateInstall(%q) = nil, want an error", bad)
		}
	}
}

// go-redis's own complaints (a pool that cannot dial) reach the service's
// log as JSON, not as plain text on stderr.
func TestRedisClientLogsThroughSlog(t *testing.T) {
	var buf syncBuffer
	o := snapstore.NewRedisOptions()
	o.Addrs = "127.0.0.1:1" // nothing listens
	c, err := o.NewClient(slog.New(slog.NewJSONHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(t.Context()).Err(); err == nil {
		t.Fatal("PING to a closed port succeeded")
	}
	line, _, _ := strings.Cut(buf.String(), "\n")
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatalf("go-redis's log line is not JSON: %q (%v)", buf.String(), err)
	}
	if rec["component"] != "redis" || rec["level"] != "WARN" || !strings.Contains(fmt.Sprint(rec["msg"]), "dial") {
		t.Fatalf("go-redis's log line = %v; want a WARN of component redis about the dial", rec)
	}
}

// syncBuffer is a bytes.Buffer safe for go-redis's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
