package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
)

func entry(cluster, ns, pod string, code uint32, policy string) *observabilityv1.AccessLogEntry {
	e := &observabilityv1.AccessLogEntry{Cluster: cluster, Workload: &commonv1.ClusterObjectRef{Name: pod, Namespace: ns, Cluster: cluster}, Path: fmt.Sprintf("/%s/%d", pod, code), ResponseCode: code}
	if policy != "" {
		pns, name, _ := strings.Cut(policy, "/")
		e.Policies = []*commonv1.ObjectRef{{Namespace: pns, Name: name}}
	}
	return e
}

func newLogs(t *testing.T, opts app.AccessLogOptions) *app.AccessLogs {
	t.Helper()
	a, err := app.NewAccessLogs(opts, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func pathsOf(es []*observabilityv1.AccessLogEntry) string {
	var out []string
	for _, e := range es {
		out = append(out, e.GetPath())
	}
	return strings.Join(out, " ")
}

func TestAccessLogFilterAndTail(t *testing.T) {
	opts := app.DefaultAccessLogOptions()
	opts.BufferSize = 4
	a := newLogs(t, opts)
	ctx := context.Background()
	batch := []*observabilityv1.AccessLogEntry{
		entry("east", "bookinfo", "reviews-v1-x", 200, "ops/all"),
		entry("east", "bookinfo", "ratings-v1-y", 503, "ops/errors"),
		entry("east", "shop", "reviews-v1-z", 500, "ops/errors"),
		entry("east", "bookinfo", "reviews-v2-w", 404, "ops/all"),
		entry("east", "bookinfo", "reviews-v1-q", 502, "ops/errors"),
	}
	if n, err := a.Push(ctx, "east", batch, 0); err != nil || n != 5 {
		t.Fatalf("Push = %d, %v", n, err)
	}
	tests := []struct {
		f    app.AccessLogFilter
		n    int
		want string
	}{
		// The ring holds the last four; the first entry is gone.
		{app.AccessLogFilter{}, 10, "/ratings-v1-y/503 /reviews-v1-z/500 /reviews-v2-w/404 /reviews-v1-q/502"},
		{app.AccessLogFilter{}, 2, "/reviews-v2-w/404 /reviews-v1-q/502"},
		{app.AccessLogFilter{Namespace: "bookinfo", WorkloadPrefix: "reviews-"}, 10, "/reviews-v2-w/404 /reviews-v1-q/502"},
		{app.AccessLogFilter{MinResponseCode: 500}, 10, "/ratings-v1-y/503 /reviews-v1-z/500 /reviews-v1-q/502"},
		{app.AccessLogFilter{Policy: "ops/all"}, 10, "/reviews-v2-w/404"},
		{app.AccessLogFilter{Cluster: "west"}, 10, ""},
		{app.AccessLogFilter{}, 0, ""},
	}
	for _, tt := range tests {
		if got := pathsOf(a.Tail(tt.f, tt.n)); got != tt.want {
			t.Errorf("Tail(%+v, %d) = %q, want %q", tt.f, tt.n, got, tt.want)
		}
	}
	if err := (app.AccessLogFilter{Policy: "errors"}).Validate(); !errors.Is(err, app.ErrInvalidAccessLogs) {
		t.Fatalf("a policy without a namespace: %v", err)
	}
}

func TestAccessLogPushRefusals(t *testing.T) {
	opts := app.DefaultAccessLogOptions()
	opts.MaxBatch = 2
	a := newLogs(t, opts)
	ctx := context.Background()
	_, err := a.Push(ctx, "east", []*observabilityv1.AccessLogEntry{entry("east", "a", "p", 200, ""), entry("", "a", "p", 200, "")}, 0)
	if !errors.Is(err, app.ErrInvalidAccessLogs) || !strings.Contains(err.Error(), "entry 1") {
		t.Fatalf("an entry without the caller's cluster: %v", err)
	}
	_, err = a.Push(ctx, "east", []*observabilityv1.AccessLogEntry{entry("east", "a", "p", 200, ""), entry("east", "a", "p", 200, ""), entry("east", "a", "p", 200, "")}, 0)
	if !errors.Is(err, app.ErrInvalidAccessLogs) || !strings.Contains(err.Error(), "at most 2") {
		t.Fatalf("a batch over the limit: %v", err)
	}
	if got := a.Tail(app.AccessLogFilter{}, 10); len(got) != 0 {
		t.Fatalf("refused batches left %d entries", len(got))
	}
}

// TestSlowWatcherDropsOldest: a watcher that never reads does not hold up
// pushes; when it reads, it gets the newest entries and the count of
// those it lost.
func TestSlowWatcherDropsOldest(t *testing.T) {
	opts := app.DefaultAccessLogOptions()
	opts.WatcherQueue = 3
	a := newLogs(t, opts)
	ctx := context.Background()
	first, w := a.Watch(app.AccessLogFilter{MinResponseCode: 500}, 5)
	defer w.Close()
	if len(first) != 0 {
		t.Fatalf("tail of an empty buffer: %d entries", len(first))
	}
	for i := range 10 {
		if _, err := a.Push(ctx, "east", []*observabilityv1.AccessLogEntry{entry("east", "ns", fmt.Sprint("p", i), 500, ""), entry("east", "ns", "ok", 200, "")}, 0); err != nil {
			t.Fatal(err)
		}
	}
	got, dropped, err := w.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pathsOf(got) != "/p7/500 /p8/500 /p9/500" || dropped != 7 {
		t.Fatalf("Next = %q, dropped %d; want the last three 500s and 7 dropped", pathsOf(got), dropped)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := w.Next(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with nothing queued and a cancelled context: %v", err)
	}
	w.Close()
	if n := a.Watchers(); n != 0 {
		t.Fatalf("%d watchers after Close", n)
	}
}
