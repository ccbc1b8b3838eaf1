package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	ingest "github.com/meshplane/meshplane/services/ingest/service"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ingestServer is the ingest service in process over real TLS on loopback,
// with meshctl's flags and an agent client of cluster east.
type ingestServer struct {
	flags []string
	agent ingestv1connect.IngestServiceClient
}

func startIngest(t *testing.T) *ingestServer {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := ingest.DefaultConfig()
	cfg.Replica = "ingest-0"
	svc, err := ingest.New(cfg, ingest.WithLogger(log), ingest.WithNotifier(nopNotifier{}))
	if err != nil {
		t.Fatal(err)
	}
	runService(t, svc.Run)
	ca := platformtest.NewCA(t, "test CA")
	so := platform.NewServerOptions()
	so.Addr, so.AdminAddr, so.TrustDomain = "127.0.0.1:0", "127.0.0.1:0", td
	so.TLS = ca.ServerTLS(t, platform.ClientAuthRequire)
	srv, err := platform.NewServer(so, log, platform.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	svc.Mount(srv)
	srv.SetReady(true)
	addr, _ := platformtest.Serve(t, srv)

	dir := t.TempDir()
	certFile, keyFile := platformtest.WriteKeyPair(t, dir, "meshctl", ca.ClientCert(t, "spiffe://"+td+"/service/meshctl"))
	agentCert := ca.ClientCert(t, "spiffe://"+td+"/cluster/east")
	o := ca.ClientOptions(t, addr, &agentCert)
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return &ingestServer{
		flags: []string{"--addr", addr, "--ca-file", ca.WriteCAFile(t, dir), "--cert-file", certFile, "--key-file", keyFile},
		agent: ingestv1connect.NewIngestServiceClient(hc, platform.BaseURL(o), platform.DefaultClientOptions(o)...),
	}
}

type nopNotifier struct{}

func (nopNotifier) Notify(context.Context, string, string, []byte) error {
	return nil
}

func (s *ingestServer) push(t *testing.T, entries ...*observabilityv1.AccessLogEntry) {
	t.Helper()
	stream := s.agent.PushAccessLogs(t.Context())
	if err := stream.Send(&ingestv1.PushAccessLogsRequest{Entries: entries}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	res, err := stream.CloseAndReceive()
	if err != nil {
		t.Fatal(err)
	}
	if int(res.Msg.GetAccepted()) != len(entries) {
		t.Fatalf("ingest accepted %d entries, want %d", res.Msg.GetAccepted(), len(entries))
	}
}

func accessEntry(pod, method, path string, code uint32, policy string) *observabilityv1.AccessLogEntry {
	pns, pname, _ := strings.Cut(policy, "/")
	return &observabilityv1.AccessLogEntry{
		Cluster:   "east",
		Workload:  &commonv1.ClusterObjectRef{Name: pod, Namespace: "bookinfo", Cluster: "east"},
		StartTime: timestamppb.New(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)),
		Duration:  durationpb.New(12 * time.Millisecond),
		Method:    method, Path: path, ResponseCode: code,
		Policies: []*commonv1.ObjectRef{{Namespace: pns, Name: pname}},
	}
}

// TestAccessLogs: tails with filters in every output format, usage errors,
// and --follow printing an entry pushed while it runs.
func TestAccessLogs(t *testing.T) {
	s := startIngest(t)
	// Nothing collected yet: stdout stays empty, stderr says so.
	out, errOut, code := meshctlOffline(t, append([]string{"accesslogs"}, s.flags...)...)
	if code != 0 || out != "" || !strings.Contains(errOut, "no access-log entries") {
		t.Fatalf("accesslogs with no entries: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	s.push(t,
		accessEntry("productpage-v1-aaa", "GET", "/productpage", 200, "ops/all"),
		accessEntry("reviews-v1-bbb", "GET", "/reviews/1", 503, "ops/errors"),
		accessEntry("reviews-v2-ccc", "POST", "/reviews", 500, "ops/errors"),
	)

	out, errOut, code = meshctlOffline(t, append([]string{"accesslogs", "--workload", "nosuch-"}, s.flags...)...)
	if code != 0 || out != "" || !strings.Contains(errOut, "no access-log entries match the filters") {
		t.Fatalf("accesslogs --workload nosuch-: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = meshctlOffline(t, append([]string{"accesslogs", "--workload", "reviews-", "--min-code", "500"}, s.flags...)...)
	if code != 0 {
		t.Fatalf("accesslogs: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "TIME") || !strings.Contains(lines[0], "DURATION") {
		t.Fatalf("accesslogs table:\n%s", out)
	}
	for i, want := range []string{
		"2026-11-21T12:00:00.000Z east bookinfo/reviews-v1-bbb GET /reviews/1 503 12ms",
		"2026-11-21T12:00:00.000Z east bookinfo/reviews-v2-ccc POST /reviews 500 12ms",
	} {
		if got := strings.Join(strings.Fields(lines[i+1]), " "); got != want {
			t.Errorf("line %d = %q, want the columns %q", i+1, lines[i+1], want)
		}
		if strings.Index(lines[i+1], " /reviews")+1 != strings.Index(lines[0], "PATH") {
			t.Errorf("line %d does not line up with the header:\n%s\n%s", i+1, lines[0], lines[i+1])
		}
	}

	out, _, code = meshctlOffline(t, append([]string{"accesslogs", "--policy", "ops/all", "-o", "json"}, s.flags...)...)
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"path":"/productpage"`) {
		t.Fatalf("accesslogs --policy ops/all -o json: exit %d:\n%s", code, out)
	}
	out, _, code = meshctlOffline(t, append([]string{"accesslogs", "--tail", "1", "-o", "yaml"}, s.flags...)...)
	if code != 0 || strings.Count(out, "---") != 1 || !strings.Contains(out, "path: /reviews\n") {
		t.Fatalf("accesslogs --tail 1 -o yaml: exit %d:\n%s", code, out)
	}

	for _, args := range [][]string{{"--policy", "errors"}, {"--min-code", "-1"}, {"--tail", "0"}, {"-o", "wide"}} {
		_, errOut, code := meshctlOffline(t, append(append([]string{"accesslogs"}, args...), s.flags...)...)
		if code != exitUsage {
			t.Errorf("accesslogs %v: exit %d, want %d: %s", args, code, exitUsage, errOut)
		}
	}

	// --follow prints the tail, then what arrives, until interrupted.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var buf syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"accesslogs", "--follow", "--min-code", "500", "--tail", "1", "-o", "json"}, s.flags...), &buf, io.Discard)
	}()
	waitFor(t, "the tail", func() bool { return strings.Contains(buf.String(), `"/reviews"`) })
	s.push(t, accessEntry("reviews-v3-ddd", "GET", "/new", 502, "ops/errors"), accessEntry("reviews-v3-ddd", "GET", "/fine", 200, "ops/all"))
	waitFor(t, "the followed entry", func() bool { return strings.Contains(buf.String(), `"/new"`) })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("accesslogs --follow ended with exit %d after an interrupt", code)
	}
	if strings.Contains(buf.String(), "/fine") {
		t.Fatalf("--min-code 500 printed a 200:\n%s", buf.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
