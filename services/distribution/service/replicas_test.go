package service_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/distribution/service"
	"google.golang.org/protobuf/proto"
)

// scrape returns the samples of the admin /metrics page whose name starts
// with prefix, as "name{labels}" -> value.
func scrape(t *testing.T, admin, prefix string) map[string]string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = line[i+1:]
		}
	}
	return out
}

func wantMetric(t *testing.T, got map[string]string, name, want string) {
	t.Helper()
	if got[name] != want {
		t.Errorf("%s = %q, want %q (all: %v)", name, got[name], want, got)
	}
}

// Two replicas share Redis: an ack received by one, and the watch it
// serves, are listed by the other, and both report the same versions
// behind and apply errors.
func TestAcksSharedByReplicas(t *testing.T) {
	r := redistest.Start(t)
	cfg := service.DefaultConfig()
	cfg.Redis.Addrs = r.Addr()
	ca := platformtest.NewCA(t, "test CA")
	a, b := newEnvCA(t, ca, cfg), newEnvCA(t, ca, cfg)
	outputs := snapstore.NewRedis(r.Client(t), cfg.Install, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	a.outputs = outputs

	v1 := output("east", "reviews", "ratings")
	a.put(t, v1)
	agent := a.client(t, eastID, nil)
	next(t, watchStream(t, agent, ""))
	if _, err := agent.Ack(t.Context(), connect.NewRequest(&distributionv1.AckRequest{
		Version: v1.GetVersion(),
		Results: []*snapshotv1.ApplyResult{
			{Ref: &snapshotv1.ObjectRef{Kind: "DestinationRule", Name: "reviews"}, Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED},
			{Ref: &snapshotv1.ObjectRef{Kind: "DestinationRule", Name: "ratings"}, Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED, Error: "spec.host: Required value"},
		},
	})); err != nil {
		t.Fatalf("Ack: %v", err)
	}

	res, err := b.client(t, toolID, nil).ListAcks(t.Context(), connect.NewRequest(&distributionv1.ListAcksRequest{}))
	if err != nil {
		t.Fatalf("ListAcks on the other replica: %v", err)
	}
	if acks := res.Msg.GetClusters(); len(acks) != 1 || acks[0].GetAckedVersion() != v1.GetVersion() ||
		acks[0].GetLatestVersion() != v1.GetVersion() || acks[0].GetApplyErrors() != 1 || !acks[0].GetConnected() {
		t.Fatalf("ListAcks on the other replica = %v, want east connected and acked at %s with 1 apply error", acks, v1.GetVersion())
	}

	for _, e := range []*env{a, b} {
		m := scrape(t, e.admin, "meshplane_distribution_")
		wantMetric(t, m, `meshplane_distribution_versions_behind{cluster="east"}`, "0")
		wantMetric(t, m, `meshplane_distribution_apply_errors{cluster="east"}`, "1")
		wantMetric(t, m, `meshplane_distribution_ack_store_up`, "1")
	}
	wantMetric(t, scrape(t, a.admin, "meshplane_distribution_pull_clients"), `meshplane_distribution_pull_clients_connected{cluster="east"}`, "1")

	// A new version that nobody has acknowledged yet.
	a.put(t, output("east", "reviews"))
	for _, e := range []*env{a, b} {
		wantMetric(t, scrape(t, e.admin, "meshplane_distribution_versions"), `meshplane_distribution_versions_behind{cluster="east"}`, "1")
	}
}

// Acks are checked against the versions sent to the cluster, which every
// replica sees: an ack on another replica than the watch is recorded; an
// ack of a version never sent to the cluster, or one with more results
// than the output holds, is refused with InvalidArgument over Connect and
// gRPC, counted, and leaves the last record as it was.
func TestBogusAcksRefused(t *testing.T) {
	r := redistest.Start(t)
	cfg := service.DefaultConfig()
	cfg.Redis.Addrs = r.Addr()
	ca := platformtest.NewCA(t, "test CA")
	a, b := newEnvCA(t, ca, cfg), newEnvCA(t, ca, cfg)
	a.outputs = snapstore.NewRedis(r.Client(t), cfg.Install, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	v1 := output("east", "reviews", "ratings")
	a.put(t, v1)
	a.put(t, output("west", "details"))
	next(t, watchStream(t, a.client(t, eastID, nil), ""))
	applied := func(n int) []*snapshotv1.ApplyResult {
		out := make([]*snapshotv1.ApplyResult, n)
		for i := range out {
			out[i] = &snapshotv1.ApplyResult{Ref: &snapshotv1.ObjectRef{Kind: "DestinationRule", Name: fmt.Sprint("r", i)}, Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED}
		}
		return out
	}
	if _, err := b.client(t, eastID, nil).Ack(t.Context(), connect.NewRequest(&distributionv1.AckRequest{Version: v1.GetVersion(), Results: applied(2)})); err != nil {
		t.Fatalf("Ack on the replica that did not send: %v", err)
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			for _, tc := range []struct {
				name, id, version string
				results           int
				want              string
			}{
				{"never sent", eastID, "sha256:never-sent", 100_000, "was not sent to cluster \"east\""},
				{"sent to another cluster", eastID, output("west", "details").GetVersion(), 1, "was not sent to cluster \"east\""},
				{"more results than the output holds", eastID, v1.GetVersion(), 5, "5 results for version"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					_, err := b.client(t, tc.id, p.opts).Ack(t.Context(), connect.NewRequest(&distributionv1.AckRequest{Version: tc.version, Results: applied(tc.results)}))
					wantCode(t, err, connect.CodeInvalidArgument)
					if !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("error %q does not say %q", err, tc.want)
					}
				})
			}
		})
	}
	res, err := a.client(t, toolID, nil).ListAcks(t.Context(), connect.NewRequest(&distributionv1.ListAcksRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if acks := res.Msg.GetClusters(); len(acks) != 1 || acks[0].GetAckedVersion() != v1.GetVersion() || acks[0].GetLatestVersion() != v1.GetVersion() {
		t.Fatalf("ListAcks after refused acks = %v, want east acked at the current %s", acks, v1.GetVersion())
	}
	m := scrape(t, b.admin, "meshplane_distribution_ack_refusals_total")
	wantMetric(t, m, `meshplane_distribution_ack_refusals_total{cluster="east",reason="not-sent"}`, fmt.Sprint(2*len(protocols)))
	wantMetric(t, m, `meshplane_distribution_ack_refusals_total{cluster="east",reason="too-many-results"}`, fmt.Sprint(len(protocols)))
}

func TestDebugSnapshots(t *testing.T) {
	e := newEnv(t)
	o := &snapshotv1.OutputSnapshot{
		Cluster: "east",
		Objects: []*snapshotv1.Object{{
			ApiVersion: "networking.istio.io/v1", Kind: "DestinationRule", Namespace: "bookinfo", Name: "reviews",
			Spec: []byte(`{"host":"reviews.bookinfo.svc.cluster.local"}`),
		}},
		Statuses: []*snapshotv1.ResourceStatus{{
			ApiVersion: "networking.meshplane.dev/v1", Kind: "TrafficPolicy", Namespace: "bookinfo", Name: "retries",
			ObservedGeneration: 3, Status: []byte(`{"state":"ACCEPTED"}`),
		}},
	}
	snapshots.SealOutput(o)
	e.put(t, o)

	get := func(path string) (int, []byte) {
		resp, err := http.Get("http://" + e.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body := get("/debug/snapshots/east")
	if code != http.StatusOK {
		t.Fatalf("GET /debug/snapshots/east: %d %s", code, body)
	}
	var got struct {
		Cluster string `json:"cluster"`
		Version string `json:"version"`
		Objects []struct {
			Name string `json:"name"`
			Spec struct {
				Host string `json:"host"`
			} `json:"spec"`
		} `json:"objects"`
		Statuses []struct {
			ObservedGeneration string `json:"observedGeneration"`
			Status             struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"statuses"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if got.Cluster != "east" || got.Version != o.GetVersion() || len(got.Objects) != 1 || got.Objects[0].Spec.Host != "reviews.bookinfo.svc.cluster.local" ||
		len(got.Statuses) != 1 || got.Statuses[0].Status.State != "ACCEPTED" || got.Statuses[0].ObservedGeneration != "3" {
		t.Fatalf("debug snapshot = %s", body)
	}
	if code, body := get("/debug/snapshots/west"); code != http.StatusNotFound {
		t.Fatalf("GET a cluster without output: %d %s, want 404", code, body)
	}
}

// encodings records the Content-Encoding / Grpc-Encoding of responses.
type encodings struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (e *encodings) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := e.next.RoundTrip(r)
	if err == nil {
		e.mu.Lock()
		e.seen = append(e.seen, resp.Header.Get("Grpc-Encoding")+resp.Header.Get("Connect-Content-Encoding"))
		e.mu.Unlock()
	}
	return resp, err
}

// bigOutput returns a snapshot of about n bytes that compresses well.
func bigOutput(cluster string, n int) *snapshotv1.OutputSnapshot {
	o := &snapshotv1.OutputSnapshot{Cluster: cluster}
	spec := []byte(fmt.Sprintf(`{"host":"%s"}`, strings.Repeat("a", 1000)))
	for i := 0; proto.Size(o) < n; i++ {
		o.Objects = append(o.Objects, &snapshotv1.Object{ApiVersion: "networking.istio.io/v1", Kind: "DestinationRule", Namespace: "default", Name: fmt.Sprintf("dr-%06d", i), Spec: spec})
	}
	snapshots.SealOutput(o)
	return o
}

// A large snapshot goes out gzipped; one over --max-send-bytes is refused
// and counted while the stream stays up, and the next one within the limit
// flows.
func TestLargeSnapshots(t *testing.T) {
	outputs := snapstore.NewMemory(func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	cfg := service.DefaultConfig()
	cfg.MaxSendBytes = 6 << 20
	e := newEnvWith(t, cfg, service.WithOutputs(outputs))
	e.outputs = outputs
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			enc := &encodings{}
			e.wrap = func(rt http.RoundTripper) http.RoundTripper { enc.next = rt; return enc }
			defer func() { e.wrap = nil }()
			cluster := "east-" + p.name
			big := bigOutput(cluster, 5<<20)
			e.put(t, big)
			stream := watchStream(t, e.client(t, "spiffe://"+td+"/cluster/"+cluster, p.opts), "")
			start := time.Now()
			if got := next(t, stream); !proto.Equal(got, big) {
				t.Fatalf("sent %s, want %s", got.GetVersion(), big.GetVersion())
			}
			t.Logf("%s: %d-byte snapshot received in %v", p.name, proto.Size(big), time.Since(start))
			enc.mu.Lock()
			seen := strings.Join(enc.seen, ",")
			enc.mu.Unlock()
			if !strings.Contains(seen, "gzip") {
				t.Errorf("response encodings %q, want gzip", seen)
			}

			tooBig := bigOutput(cluster, 7<<20)
			e.put(t, tooBig)
			platformtest.Eventually(t, 10*time.Second, "the refused snapshot counted", func() bool {
				return scrape(t, e.admin, "meshplane_distribution_snapshots_refused")[fmt.Sprintf(`meshplane_distribution_snapshots_refused_total{cluster=%q}`, cluster)] == "1"
			})
			small := output(cluster, "reviews")
			e.put(t, small)
			if got := next(t, stream); !proto.Equal(got, small) {
				t.Fatalf("after a refused snapshot, sent %s, want %s", got.GetVersion(), small.GetVersion())
			}
		})
	}
}
