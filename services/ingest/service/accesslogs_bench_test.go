package service_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BenchmarkPushAccessLogs measures the entries one ingest replica accepts
// per second from one agent stream over mTLS (gRPC, batches of 500, as
// the agent sends them), with one follower watching every entry. Without
// Redis: the pub/sub publish is one more round trip per batch.
func BenchmarkPushAccessLogs(b *testing.B) {
	e := newEnv(b, memoryConfig())
	ctx := b.Context()
	agent := e.client(b, eastID, []connect.ClientOption{connect.WithGRPC()})
	tools := e.client(b, translation, nil)
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	watch, err := tools.WatchAccessLogs(watchCtx, connect.NewRequest(&ingestv1.WatchAccessLogsRequest{Follow: true}))
	if err != nil {
		b.Fatal(err)
	}
	var received atomic.Int64
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watch.Receive() {
			received.Add(int64(len(watch.Msg().GetEntries())))
		}
	}()
	const batch = 500
	entries := make([]*observabilityv1.AccessLogEntry, batch)
	for i := range entries {
		entries[i] = &observabilityv1.AccessLogEntry{
			Cluster:   "east",
			Workload:  &commonv1.ClusterObjectRef{Name: fmt.Sprintf("reviews-v1-%05d", i), Namespace: "bookinfo", Cluster: "east"},
			StartTime: timestamppb.New(time.Unix(1_700_000_000, 0)), Duration: durationpb.New(3 * time.Millisecond),
			Direction: "inbound", Method: "GET", Authority: "reviews:9080", Path: "/reviews/0", Protocol: "HTTP/1.1",
			ResponseCode: 200, RequestBytes: 120, ResponseBytes: 2300, RequestId: "3f2a9c4e-1b7d-4d55-9a59-6f0c8e1d2b3a",
			Policies: []*commonv1.ObjectRef{{Namespace: "ops", Name: "all"}},
		}
	}
	stream := agent.PushAccessLogs(ctx)
	b.ResetTimer()
	for b.Loop() {
		if err := stream.Send(&ingestv1.PushAccessLogsRequest{Entries: entries}); err != nil {
			b.Fatal(err)
		}
	}
	res, err := stream.CloseAndReceive()
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(res.Msg.GetAccepted())/b.Elapsed().Seconds(), "entries/s")
	stop()
	<-watched
	if received.Load() == 0 {
		b.Fatal("the follower saw no entries")
	}
}
