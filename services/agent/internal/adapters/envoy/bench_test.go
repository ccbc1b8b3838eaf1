package envoy_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"github.com/meshplane/meshplane/services/agent/internal/adapters/envoy"
	"github.com/meshplane/meshplane/services/agent/internal/app"
)

// countingMetrics counts the entries the sink has filtered.
type countingMetrics struct{ received, kept, sent atomic.Int64 }

func (c *countingMetrics) AccessLogsReceived(r, k int) {
	c.received.Add(int64(r))
	c.kept.Add(int64(k))
}
func (c *countingMetrics) AccessLogsDropped(int) {}
func (c *countingMetrics) AccessLogsSent(n int, err error) {
	if err == nil {
		c.sent.Add(int64(n))
	}
}

// discardSender takes every batch at once: the benchmark measures the
// replica, not the management plane.
type discardSender struct{}

type discardStream struct{}

func (discardSender) OpenAccessLogs(context.Context) (app.AccessLogStream, error) {
	return discardStream{}, nil
}
func (discardStream) Send([]*observabilityv1.AccessLogEntry, uint64) error { return nil }
func (discardStream) Close() error                                         { return nil }

// BenchmarkAccessLogIngest measures the entries one replica takes in over
// one real gRPC stream on loopback, in batches of 100 as Envoy buffers
// them, through conversion, both policies' filters (half the entries are
// kept), the ring buffer and the queue to a forwarder.
func BenchmarkAccessLogIngest(b *testing.B) {
	m := &countingMetrics{}
	sink := app.NewAccessLogs(app.AccessLogsOptions{Cluster: "east", QueueSize: 100000, Metrics: m})
	sink.SetEnvoyConfig(alsPolicies())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sink.Run(ctx, discardSender{})
	conn := serve(b, envoy.ServerOptions{AccessLogs: sink})
	stream, err := accesslogv3.NewAccessLogServiceClient(conn).StreamAccessLogs(ctx)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 100
	entries := make([]*accesslogdatav3.HTTPAccessLogEntry, batch)
	for i := range entries {
		code := uint32(200)
		if i%2 == 0 {
			code = 503
		}
		entries[i] = httpEntry(code, fmt.Sprintf("/reviews/%d", i), "inbound|9080||", map[string]string{"x-debug": "no", "user-agent": "curl/8"})
	}
	first := &accesslogv3.StreamAccessLogsMessage{
		Identifier: &accesslogv3.StreamAccessLogsMessage_Identifier{Node: node("reviews-v1-abc", "bookinfo", map[string]any{"app": "reviews"}), LogName: "als"},
		LogEntries: &accesslogv3.StreamAccessLogsMessage_HttpLogs{HttpLogs: &accesslogv3.StreamAccessLogsMessage_HTTPAccessLogEntries{LogEntry: entries}},
	}
	rest := &accesslogv3.StreamAccessLogsMessage{LogEntries: first.LogEntries}
	if err := stream.Send(first); err != nil {
		b.Fatal(err)
	}
	waitReceived(b, &m.received, int64(batch))
	msgs := (b.N + batch - 1) / batch
	b.ResetTimer()
	start := time.Now()
	for range msgs {
		if err := stream.Send(rest); err != nil {
			b.Fatal(err)
		}
	}
	want := int64(msgs*batch + batch)
	waitReceived(b, &m.received, want)
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(msgs*batch)/elapsed.Seconds(), "entries/s")
	if m.kept.Load() != want/2 {
		b.Errorf("kept %d of %d, want half", m.kept.Load(), want)
	}
	stream.CloseAndRecv()
}

// waitReceived waits until the sink has received want entries. It yields
// instead of sleeping, so the measured time ends when the last entry is in,
// and fails the benchmark if that takes longer than a minute.
func waitReceived(b *testing.B, received *atomic.Int64, want int64) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for received.Load() < want {
		if time.Now().After(deadline) {
			b.Fatalf("received %d of %d entries after a minute", received.Load(), want)
		}
		runtime.Gosched()
	}
}
