package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	ingest "github.com/meshplane/meshplane/services/ingest/service"
	registration "github.com/meshplane/meshplane/services/registration/service"
	"github.com/prometheus/client_golang/prometheus"
)

// bigInput is cluster's input with n destinations, and a TrafficPolicy
// with attempts retries for each of the first policies of them, as an
// agent seals it.
func bigInput(cluster string, n, policies int, attempts int32) *snapshotv1.InputSnapshot {
	s := &snapshotv1.InputSnapshot{Cluster: cluster, Agent: &snapshotv1.AgentInfo{Version: "test", Namespace: "meshplane"}}
	s.Meshes = []*discoveryv1.Mesh{{Metadata: &commonv1.ObjectMeta{Name: "istiod-istio-system-" + cluster, Namespace: "istio-system", Cluster: cluster}}}
	for i := range n {
		name := fmt.Sprintf("svc-%06d", i)
		s.Destinations = append(s.Destinations, &discoveryv1.Destination{
			Metadata: &commonv1.ObjectMeta{Name: name + "-default-" + cluster, Namespace: "default", Cluster: cluster},
			Spec: &discoveryv1.DestinationSpec{
				Mesh: &commonv1.ObjectRef{Name: s.Meshes[0].GetMetadata().GetName(), Namespace: "istio-system"},
				Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
					Ref:    &commonv1.ClusterObjectRef{Name: name, Namespace: "default", Cluster: cluster},
					Labels: map[string]string{"app": name},
					Ports:  []*discoveryv1.DestinationSpec_KubeService_KubeServicePort{{Port: 9080, Name: "http", Protocol: "TCP"}},
				}},
			},
		})
	}
	for i := range policies {
		s.TrafficPolicies = append(s.TrafficPolicies, &networkingv1.TrafficPolicy{
			Metadata: &commonv1.ObjectMeta{Name: fmt.Sprintf("policy-%06d", i), Namespace: "default", Cluster: cluster, Generation: int64(attempts)},
			Spec: &networkingv1.TrafficPolicySpec{
				DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
					KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{
						Name: fmt.Sprintf("svc-%06d", i), Namespace: "default", Cluster: cluster,
					}}},
				}}},
				Policy: &networkingv1.TrafficPolicySpec_Policy{Retries: &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: attempts}},
			},
		})
	}
	snapshots.SealInput(s)
	return s
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestHeapReturnsAfterClusterShrinks: the whole plane in one process, as
// the demo runs it (all-in-one, Redis). A cluster pushes a large input,
// which is translated, published and sent to its agent; then it shrinks
// to a small one. Once the small output is sent, the live heap is back
// near what it was before the large input: nothing holds the large
// input, its translation or its output.
func TestHeapReturnsAfterClusterShrinks(t *testing.T) {
	const (
		big   = 10_000
		small = 10
		// policies select the first of the big input's destinations.
		policies = 5_000
		// measurable is the least the large input must add to the heap
		// for the test to measure anything.
		measurable = 32 << 20
	)
	r := redistest.Start(t)
	ca := platformtest.NewCA(t, "test CA")
	log := slog.New(slog.DiscardHandler)
	s := settings{
		install: snapshots.DefaultInstall, trustDomain: "test.local", clusterDomain: "cluster.local",
		debounce: 10 * time.Millisecond, redis: snapshots.NewRedisOptions(), reg: registration.DefaultConfig(), ing: ingest.DefaultConfig(),
	}
	s.redis.Addrs = r.Addr()
	s.reg.CADir = t.TempDir()
	s.ing.WatchManagement = "false"
	s.ing.Limits.Destinations = big
	s.ing.Limits.Policies = policies
	a, err := buildAll(s, registration.NewRevocationChecker(), log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	so := platform.NewServerOptions()
	so.Addr, so.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	so.TrustDomain = s.trustDomain
	so.TLS = ca.ServerTLS(t, platform.ClientAuthRequire)
	srv, err := platform.NewServer(so, log, platform.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	a.Mount(srv)
	srv.SetReady(true)
	addr, _ := platformtest.Serve(t, srv)

	cert := ca.ClientCert(t, "spiffe://"+s.trustDomain+"/cluster/east")
	o := ca.ClientOptions(t, addr, &cert)
	o.Timeout = 5 * time.Minute
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	ing := ingestv1connect.NewIngestServiceClient(hc, platform.BaseURL(o), platform.DefaultClientOptions(o)...)
	dist := distributionv1connect.NewDistributionServiceClient(hc, platform.BaseURL(o), platform.DefaultClientOptions(o)...)

	// An agent: it watches, and acks each output with a result per object.
	// received carries the number of objects of each output sent, and
	// whether one says attempts: 3.
	type sent struct {
		objects  int
		attempts bool
	}
	received := make(chan sent, 4)
	watchCtx, stopWatch := context.WithCancel(ctx)
	t.Cleanup(stopWatch)
	stream, err := dist.Watch(watchCtx, connect.NewRequest(&distributionv1.WatchRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for stream.Receive() {
			out := stream.Msg().GetSnapshot()
			if out == nil {
				continue
			}
			results := make([]*snapshotv1.ApplyResult, len(out.GetObjects()))
			for i, obj := range out.GetObjects() {
				results[i] = &snapshotv1.ApplyResult{Ref: &snapshotv1.ObjectRef{ApiVersion: obj.GetApiVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}, Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED}
			}
			_, _ = dist.Ack(watchCtx, connect.NewRequest(&distributionv1.AckRequest{Version: out.GetVersion(), Results: results}))
			// Only the size is kept: the test must not hold the output.
			three := false
			for _, obj := range out.GetObjects() {
				three = three || bytes.Contains(obj.GetSpec(), []byte(`"attempts":3`))
			}
			received <- sent{len(out.GetObjects()), three}
		}
	}()
	// pushAndWait pushes in and waits for its output: the first one sent
	// whose object count moved from last as the input did.
	last := 0
	pushAndWait := func(in *snapshotv1.InputSnapshot, done func(sent) bool) int {
		t.Helper()
		push := ing.Push(ctx)
		if err := push.Send(&ingestv1.PushRequest{Snapshot: in}); err != nil {
			t.Fatal(err)
		}
		if _, err := push.Receive(); err != nil {
			t.Fatalf("push of %d destinations: %v", len(in.GetDestinations()), err)
		}
		_ = push.CloseRequest()
		_ = push.CloseResponse()
		deadline := time.After(5 * time.Minute)
		for {
			select {
			case o := <-received:
				if done(o) {
					last = o.objects
					return o.objects
				}
			case <-deadline:
				t.Fatalf("no output for the input of %d destinations", len(in.GetDestinations()))
			}
		}
	}

	grew := func(o sent) bool { return o.objects > last }
	nSmall := pushAndWait(bigInput("east", small, 0, 0), grew)
	baseline := heapInUse()
	nBig := pushAndWait(bigInput("east", big, policies, 2), grew)
	// A policy edit: an incremental translation, whose sealer keeps the
	// bodies of both versions.
	pushAndWait(bigInput("east", big, policies, 3), func(o sent) bool { return o.attempts })
	withBig := heapInUse()
	nAfter := pushAndWait(bigInput("east", small+1, 0, 0), func(o sent) bool { return o.objects < last })
	after := heapInUse()
	t.Logf("heap in use: %d MiB with %d destinations (%d objects out), %d MiB with %d (%d objects), %d MiB after shrinking to %d (%d objects)",
		baseline>>20, small, nSmall, withBig>>20, big, nBig, after>>20, small+1, nAfter)
	if withBig < baseline+measurable {
		t.Fatalf("the large input added only %d MiB: the test measures nothing", (withBig-baseline)>>20)
	}
	// What may stay is a twentieth of what the large input added:
	// buffers and pools sized by the largest message. The previous
	// policies' specs, which translation's state kept until the next
	// translation, were a thirteenth at this size (6 of 78 MiB).
	if allowed := baseline + (withBig-baseline)/20; after > allowed {
		t.Fatalf("heap in use after shrinking is %d KiB, %d KiB over the baseline of %d KiB (at most %d KiB may stay): something holds the large input, translation or output",
			after>>10, (after-baseline)>>10, baseline>>10, (allowed-baseline)>>10)
	}
}
