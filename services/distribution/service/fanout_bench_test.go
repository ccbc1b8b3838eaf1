package service_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/distribution/service"
)

// BenchmarkFanOut: 100 agents (gRPC clients with their own mTLS
// certificates) watch one replica backed by Redis. Each iteration
// publishes a new output for every cluster, as one policy change would, and
// waits until every agent has received and acknowledged it. It reports the
// p50 and p99 from the start of the publish to each ack. The agents' own
// apply time is not included.
func BenchmarkFanOut(b *testing.B) {
	const agents = 100
	r := redistest.Start(b)
	cfg := service.DefaultConfig()
	cfg.Redis.Addrs = r.Addr()
	e := newEnvCA(b, platformtest.NewCA(b, "test CA"), cfg)
	store := snapstore.NewRedis(r.Client(b), cfg.Install, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })

	type agent struct {
		cluster string
		client  distributionv1connect.DistributionServiceClient
		got     chan string
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	list := make([]*agent, agents)
	for i := range list {
		a := &agent{cluster: fmt.Sprintf("c%03d", i), got: make(chan string, 16)}
		a.client = e.client(b, "spiffe://"+td+"/cluster/"+a.cluster, []connect.ClientOption{connect.WithGRPC()})
		list[i] = a
		stream, err := a.client.Watch(ctx, connect.NewRequest(&distributionv1.WatchRequest{}))
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			defer stream.Close()
			for stream.Receive() {
				s := stream.Msg().GetSnapshot()
				if s == nil {
					continue
				}
				_, err := a.client.Ack(ctx, connect.NewRequest(&distributionv1.AckRequest{Version: s.GetVersion()}))
				if err == nil {
					a.got <- s.GetVersion()
				}
			}
		})
	}
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		want := make([]string, agents)
		for j, a := range list {
			o := output(a.cluster, "reviews", fmt.Sprintf("policy-%d", i))
			want[j] = o.GetVersion()
			if err := store.Put(ctx, a.cluster, o.GetVersion(), o); err != nil {
				b.Fatal(err)
			}
		}
		for j, a := range list {
			deadline := time.After(30 * time.Second)
			for done := false; !done; {
				select {
				case v := <-a.got:
					if v == want[j] {
						lat = append(lat, time.Since(start))
						done = true
					}
				case <-deadline:
					b.Fatalf("agent %s did not ack %s", a.cluster, want[j])
				}
			}
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
