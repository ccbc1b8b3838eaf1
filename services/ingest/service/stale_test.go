package service_test

import (
	"flag"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/ingest/service"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// staleGauge returns meshplane_ingest_cluster_stale{cluster} and whether
// it was reported.
func staleGauge(t *testing.T, reg *prometheus.Registry, cluster string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "meshplane_ingest_cluster_stale" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cluster" && l.GetValue() == cluster {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// A disconnected agent's cluster is reported stale once its last push is
// older than the window; its snapshot stays.
func TestStaleCluster(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			reg := prometheus.NewRegistry()
			cfg := memoryConfig()
			cfg.StaleAfter = time.Minute
			e := newEnv(t, cfg, service.WithClock(clock.Now), service.WithRegisterer(reg))
			agent := e.client(t, eastID, p.opts)
			tools := e.client(t, translation, p.opts)

			check := func(what string, wantConnected, wantStale bool) {
				t.Helper()
				st := clusterState(t, tools, "east")
				if st == nil || st.GetConnected() != wantConnected || st.GetStale() != wantStale {
					t.Fatalf("%s: ListClusters reports %v, want connected=%v stale=%v", what, st, wantConnected, wantStale)
				}
				want := 0.0
				if wantStale {
					want = 1
				}
				if got, ok := staleGauge(t, reg, "east"); !ok || got != want {
					t.Fatalf("%s: meshplane_ingest_cluster_stale{cluster=east} = %v (reported %v), want %v", what, got, ok, want)
				}
			}

			stream := agent.Push(streamCtx(t))
			s1 := sealed("east", "a")
			if _, err := push(t, stream, s1); err != nil {
				t.Fatalf("push: %v", err)
			}
			// Connected: never stale, however old the last push.
			clock.Advance(time.Hour)
			check("connected an hour after the push", true, false)

			_ = stream.CloseRequest()
			_ = stream.CloseResponse()
			eventually(t, 10*time.Second, "east to be reported disconnected", func() bool {
				st := clusterState(t, tools, "east")
				return st != nil && !st.GetConnected()
			})
			check("disconnected, last push an hour ago", false, true)

			// Reconnecting and pushing clears it, even with the same content.
			stream = agent.Push(streamCtx(t))
			if _, err := push(t, stream, proto.Clone(s1).(*snapshotv1.InputSnapshot)); err != nil {
				t.Fatalf("push after reconnect: %v", err)
			}
			check("reconnected", true, false)
			_ = stream.CloseRequest()
			_ = stream.CloseResponse()
			eventually(t, 10*time.Second, "east to be reported disconnected again", func() bool {
				st := clusterState(t, tools, "east")
				return st != nil && !st.GetConnected()
			})
			check("disconnected, last push just now", false, false)
			clock.Advance(time.Minute)
			check("disconnected, last push exactly the window ago", false, false)
			clock.Advance(time.Second)
			check("disconnected, last push just over the window ago", false, true)

			// Stale is reported, never acted on: the snapshot is still served.
			res, err := tools.GetInputSnapshot(t.Context(), connect.NewRequest(&ingestv1.GetInputSnapshotRequest{Cluster: "east"}))
			if err != nil {
				t.Fatalf("GetInputSnapshot of a stale cluster: %v", err)
			}
			if !proto.Equal(res.Msg.GetSnapshot(), s1) {
				t.Fatalf("stale cluster's snapshot is %s, want %s", res.Msg.GetSnapshot().GetVersion(), s1.GetVersion())
			}
		})
	}
}

func TestStaleAfterFlag(t *testing.T) {
	cfg := service.DefaultConfig()
	if cfg.StaleAfter != 5*time.Minute {
		t.Fatalf("default StaleAfter = %v, want 5m", cfg.StaleAfter)
	}
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	cfg.AddFlags(fs)
	if err := fs.Parse([]string{"--stale-after=30s"}); err != nil {
		t.Fatal(err)
	}
	if cfg.StaleAfter != 30*time.Second {
		t.Fatalf("--stale-after=30s gave %v", cfg.StaleAfter)
	}
	cfg.StaleAfter = -time.Second
	if err := cfg.Validate(); err == nil {
		t.Fatal("Validate accepted a negative --stale-after")
	}
}
