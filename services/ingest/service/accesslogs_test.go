package service_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/ingest/service"
	"github.com/prometheus/client_golang/prometheus"
)

func logEntry(cluster, pod, path string, code uint32) *observabilityv1.AccessLogEntry {
	return &observabilityv1.AccessLogEntry{
		Cluster:  cluster,
		Workload: &commonv1.ClusterObjectRef{Name: pod, Namespace: "bookinfo", Cluster: cluster},
		Method:   "GET", Path: path, ResponseCode: code,
		Policies: []*commonv1.ObjectRef{{Namespace: "ops", Name: "errors"}},
	}
}

func pushLogs(ctx context.Context, c ingestv1connect.IngestServiceClient, entries ...*observabilityv1.AccessLogEntry) (uint64, error) {
	stream := c.PushAccessLogs(ctx)
	if err := stream.Send(&ingestv1.PushAccessLogsRequest{Entries: entries, Dropped: 2}); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	res, err := stream.CloseAndReceive()
	if err != nil {
		return 0, err
	}
	return res.Msg.GetAccepted(), nil
}

func paths(entries []*observabilityv1.AccessLogEntry) string {
	var out []string
	for _, e := range entries {
		out = append(out, e.GetPath())
	}
	return strings.Join(out, ",")
}

// TestAccessLogsAcrossReplicas: two ingest replicas share a real Redis. A
// follower on replica B, filtered to server errors of east, gets the
// entry an agent of east pushed to replica A, and only that one; B's
// buffer holds it for later tails too. The same holds for replicas built
// as the all-in-one process builds ingest: its own input store and Redis
// client (WithInputs, WithRedis), no --redis-addrs of ingest's own.
func TestAccessLogsAcrossReplicas(t *testing.T) {
	t.Run("redis-addrs", func(t *testing.T) { testAccessLogsAcrossReplicas(t, false) })
	t.Run("all-in-one", func(t *testing.T) { testAccessLogsAcrossReplicas(t, true) })
}

func testAccessLogsAcrossReplicas(t *testing.T, allInOne bool) {
	r := redistest.Start(t)
	ca := platformtest.NewCA(t, "test CA")
	start := func(name string) *replica {
		cfg := memoryConfig()
		cfg.Replica = name
		if !allInOne {
			cfg.Redis.Addrs = r.Addr()
			return startReplica(t, ca, cfg, &recordingNotifier{})
		}
		var logs strings.Builder
		rep := startReplica(t, ca, cfg, &recordingNotifier{}, service.WithRedis(r.Client(t)),
			service.WithInputs(snapstore.NewMemory(func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} })),
			service.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		if strings.Contains(logs.String(), "no Redis") {
			t.Errorf("%s logs that it has no Redis:\n%s", name, logs.String())
		}
		return rep
	}
	a := start("ingest-a")
	b := start("ingest-b")
	ctx := t.Context()

	// Both replicas follow the channel before anything is pushed: pub/sub
	// keeps nothing for late subscribers.
	rc := r.Client(t)
	eventually(t, 10*time.Second, "both replicas subscribed to the access-log channel", func() bool {
		n, err := rc.PubSubNumSub(ctx, "meshplane:{meshplane}:accesslogs").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n["meshplane:{meshplane}:accesslogs"] >= 2
	})

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	tools := replicaClient(t, ca, b.addr, translation)
	watch, err := tools.WatchAccessLogs(watchCtx, connect.NewRequest(&ingestv1.WatchAccessLogsRequest{Cluster: "east", MinResponseCode: 500, Follow: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()

	agent := replicaClient(t, ca, a.addr, eastID)
	accepted, err := pushLogs(ctx, agent, logEntry("east", "reviews-v1-abc", "/ok", 200), logEntry("east", "reviews-v1-abc", "/boom", 503))
	if err != nil {
		t.Fatal(err)
	}
	if accepted != 2 {
		t.Fatalf("accepted %d entries, want 2", accepted)
	}
	var got []*observabilityv1.AccessLogEntry
	for len(got) == 0 && watch.Receive() {
		got = watch.Msg().GetEntries() // the first message may be empty
	}
	if got := paths(got); got != "/boom" {
		t.Fatalf("the follower on B got %q, want only the 503 (/boom)", got)
	}

	// A's own tail has both; B's buffer has both too.
	for name, addr := range map[string]string{"A": a.addr, "B": b.addr} {
		c := replicaClient(t, ca, addr, translation)
		tail, err := c.WatchAccessLogs(ctx, connect.NewRequest(&ingestv1.WatchAccessLogsRequest{Tail: 10}))
		if err != nil {
			t.Fatal(err)
		}
		var got []*observabilityv1.AccessLogEntry
		for tail.Receive() {
			got = append(got, tail.Msg().GetEntries()...)
		}
		if err := tail.Err(); err != nil {
			t.Fatalf("tail of %s: %v", name, err)
		}
		if p := paths(got); p != "/ok,/boom" {
			t.Fatalf("tail of %s is %q, want /ok,/boom", name, p)
		}
	}
}

// TestAccessLogsRefused: the access-log procedures check who calls and
// what they send, over both protocols; accepted and dropped entries are
// counted.
func TestAccessLogsRefused(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := memoryConfig()
	cfg.AccessLogs.MaxEntryBytes = 200
	e := newEnv(t, cfg, service.WithRegisterer(reg))
	ctx := t.Context()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			agent := e.client(t, eastID, p.opts)
			tools := e.client(t, translation, p.opts)

			_, err := pushLogs(ctx, agent, logEntry("east", "a", "/x", 200), logEntry("west", "b", "/y", 200))
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "entry 1") {
				t.Fatalf("an entry of another cluster: err = %v, want InvalidArgument naming entry 1", err)
			}
			if _, err := pushLogs(ctx, tools, logEntry("east", "a", "/x", 200)); connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Fatalf("a service pushing access logs: err = %v, want PermissionDenied", err)
			}
			w, err := agent.WatchAccessLogs(ctx, connect.NewRequest(&ingestv1.WatchAccessLogsRequest{Tail: 1}))
			if err == nil {
				for w.Receive() {
				}
				err = w.Err()
			}
			if connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Fatalf("an agent watching access logs: err = %v, want PermissionDenied", err)
			}
			w, err = tools.WatchAccessLogs(ctx, connect.NewRequest(&ingestv1.WatchAccessLogsRequest{Policy: "no-slash"}))
			if err == nil {
				for w.Receive() {
				}
				err = w.Err()
			}
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("a policy filter without a namespace: err = %v, want InvalidArgument", err)
			}

			big := logEntry("east", "a", "/"+strings.Repeat("x", 300), 200)
			accepted, err := pushLogs(ctx, agent, logEntry("east", "a", "/fine", 200), big)
			if err != nil || accepted != 1 {
				t.Fatalf("a batch with one entry too large: accepted %d, err %v; want 1 accepted", accepted, err)
			}
		})
	}
	// Per protocol: one entry received, one too large, and four pushes
	// that each say the agent dropped 2 (the refused batches count too).
	n := float64(len(protocols))
	if got := counter(t, reg, "meshplane_ingest_accesslogs_received_total", map[string]string{"cluster": "east"}); got != n {
		t.Fatalf("received_total{east} = %v, want %v", got, n)
	}
	if got := counter(t, reg, "meshplane_ingest_accesslogs_dropped_total", map[string]string{"cluster": "east", "reason": "too_large"}); got != n {
		t.Fatalf("dropped_total{east,too_large} = %v, want %v", got, n)
	}
	if got := counter(t, reg, "meshplane_ingest_accesslogs_dropped_total", map[string]string{"cluster": "east", "reason": "agent"}); got != 4*n {
		t.Fatalf("dropped_total{east,agent} = %v, want %v", got, 4*n)
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			same := len(m.GetLabel()) == len(labels)
			for _, l := range m.GetLabel() {
				same = same && labels[l.GetName()] == l.GetValue()
			}
			if same {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
