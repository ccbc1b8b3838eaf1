package service_test

import (
	"flag"
	"strings"
	"testing"

	"connectrpc.com/connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/ingest/service"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
)

// TestPushOverLimit: a push with more destinations than
// --max-input-destinations is refused with ResourceExhausted naming the
// limit and the count, over every protocol; the last good snapshot stays
// in use, in Redis too; the refusal is counted by cluster and reason and
// reported by ListClusters until a push is accepted.
func TestPushOverLimit(t *testing.T) {
	r := redistest.Start(t)
	rc := r.Client(t)
	reg := prometheus.NewRegistry()
	cfg := memoryConfig()
	cfg.Redis.Addrs = r.Addr()
	cfg.Limits.Destinations = 3
	e := newEnv(t, cfg, service.WithRegisterer(reg))
	key := "meshplane:{" + cfg.Install + "}:" + string(snapshots.Inputs) + ":east"
	good := sealed("east", "a", "b")
	over := sealed("east", "a", "b", "c", "d")
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			agent := e.client(t, eastID, p.opts)
			tools := e.client(t, translation, p.opts)
			stream := agent.Push(streamCtx(t))
			if got, err := push(t, stream, good); err != nil || got != good.GetVersion() {
				t.Fatalf("good push = %q, %v", got, err)
			}
			_, err := push(t, stream, over)
			wantCode(t, err, connect.CodeResourceExhausted)
			for _, want := range []string{"4 destinations", "limit of 3", "--max-input-destinations"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not say %q", err, want)
				}
			}
			_ = stream.CloseResponse()

			res, err := tools.GetInputSnapshot(t.Context(), connect.NewRequest(&ingestv1.GetInputSnapshotRequest{Cluster: "east"}))
			if err != nil || !proto.Equal(res.Msg.GetSnapshot(), good) {
				t.Fatalf("east's snapshot after a refused push: %v (%v), want the last good one", res.Msg.GetSnapshot().GetVersion(), err)
			}
			if v, _ := rc.HGet(t.Context(), key, "version").Result(); v != good.GetVersion() {
				t.Fatalf("version in Redis = %q, want the last good %q", v, good.GetVersion())
			}
			st := clusterState(t, tools, "east")
			if st.GetRefused().GetReason() != "destinations" || !strings.Contains(st.GetRefused().GetMessage(), "--max-input-destinations") ||
				st.GetRefused().GetRefusedAt() == nil || st.GetVersion() != good.GetVersion() {
				t.Fatalf("ListClusters: %v, want the refusal of east reported beside the last good version", st)
			}

			// An accepted push clears the report.
			stream = agent.Push(streamCtx(t))
			if _, err := push(t, stream, sealed("east", "a")); err != nil {
				t.Fatal(err)
			}
			_ = stream.CloseRequest()
			_ = stream.CloseResponse()
			if st := clusterState(t, tools, "east"); st.GetRefused() != nil {
				t.Fatalf("refusal still reported after an accepted push: %v", st.GetRefused())
			}
		})
	}
	n := float64(len(protocols))
	if got := counter(t, reg, "meshplane_ingest_push_refusals_total", map[string]string{"cluster": "east", "reason": "destinations"}); got != n {
		t.Fatalf("push_refusals_total{east,destinations} = %v, want %v", got, n)
	}
}

// The limits are flags with the documented defaults, and a negative one
// is refused.
func TestLimitFlags(t *testing.T) {
	cfg := service.DefaultConfig()
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	cfg.AddFlags(fs)
	if cfg.Limits != service.DefaultLimits() {
		t.Fatalf("defaults %+v, want %+v", cfg.Limits, service.DefaultLimits())
	}
	if err := fs.Parse([]string{"--max-input-destinations=5", "--max-input-workloads=6", "--max-input-meshes=7", "--max-input-policies=8", "--max-input-istio-objects=9"}); err != nil {
		t.Fatal(err)
	}
	if want := (service.Limits{Destinations: 5, Workloads: 6, Meshes: 7, Policies: 8, IstioObjects: 9}); cfg.Limits != want {
		t.Fatalf("parsed %+v, want %+v", cfg.Limits, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Limits.Workloads = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--max-input-workloads") {
		t.Fatalf("Validate of a negative limit: %v", err)
	}
}
