package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
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
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	ingest "github.com/meshplane/meshplane/services/ingest/service"
	registration "github.com/meshplane/meshplane/services/registration/service"
	translation "github.com/meshplane/meshplane/services/translation/service"
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

// heapPlane is the whole plane in one process, as the demo runs it
// (all-in-one, Redis), with an agent for cluster east that watches and
// acks each output with a result per object.
type heapPlane struct {
	t        *testing.T
	ctx      context.Context
	ing      ingestv1connect.IngestServiceClient
	received chan heapSent
	// last is the object count of the last output waited for.
	last int
	// redis is the plane's Redis, install its install name.
	redis   *redistest.Server
	install string
}

// heapSent is what the test keeps of an output sent: its size, and
// whether it says attempts: 3. It must not hold the output itself.
type heapSent struct {
	objects  int
	attempts bool
}

func startHeapPlane(t *testing.T, limits ingest.Limits) *heapPlane {
	r := redistest.Start(t)
	ca := platformtest.NewCA(t, "test CA")
	log := slog.New(slog.DiscardHandler)
	s := settings{
		store: snapstore.DefaultConfig(), trustDomain: "test.local", clusterDomain: "cluster.local",
		debounce: 10 * time.Millisecond, reg: registration.DefaultConfig(), ing: ingest.DefaultConfig(),
		tr: translation.DefaultConfig(),
	}
	s.store.Redis.Addrs = r.Addr()
	s.reg.CADir = t.TempDir()
	s.ing.WatchManagement = "false"
	s.ing.Limits = limits
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
	// Without gzip: a decompressor keeps a buffer as large as the largest
	// message it read, which is the test's, not the plane's.
	newDist := func() distributionv1connect.DistributionServiceClient {
		return distributionv1connect.NewDistributionServiceClient(hc, platform.BaseURL(o),
			append(platform.DefaultClientOptions(o), connect.WithAcceptCompression("gzip", nil, nil))...)
	}
	dist := newDist()
	p := &heapPlane{
		t: t, ctx: ctx, ing: ingestv1connect.NewIngestServiceClient(hc, platform.BaseURL(o), platform.DefaultClientOptions(o)...),
		received: make(chan heapSent, 4), redis: r, install: s.store.Install,
	}
	// Each output is received on a new watch stream of a new client, from
	// the version held: a stream keeps a read buffer as large as its
	// largest message, and a client keeps the buffers of its streams in a
	// pool for the next stream to read into (a heap profile found the
	// waiting stream holding the 8 MB one), which are the test's, not the
	// plane's.
	receive := func(have string) (*snapshotv1.OutputSnapshot, error) {
		stream, err := newDist().Watch(ctx, connect.NewRequest(&distributionv1.WatchRequest{Version: have}))
		if err != nil {
			return nil, err
		}
		defer stream.Close()
		for stream.Receive() {
			if out := stream.Msg().GetSnapshot(); out != nil {
				return out, nil
			}
		}
		return nil, stream.Err()
	}
	go func() {
		have := ""
		for ctx.Err() == nil {
			out, err := receive(have)
			if err != nil {
				continue // the plane is stopping, or the stream broke: watch again
			}
			have = out.GetVersion()
			results := make([]*snapshotv1.ApplyResult, len(out.GetObjects()))
			three := false
			for i, obj := range out.GetObjects() {
				results[i] = &snapshotv1.ApplyResult{Ref: &snapshotv1.ObjectRef{ApiVersion: obj.GetApiVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}, Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED}
				three = three || bytes.Contains(obj.GetSpec(), []byte(`"attempts":3`))
			}
			_, _ = dist.Ack(ctx, connect.NewRequest(&distributionv1.AckRequest{Version: out.GetVersion(), Results: results}))
			select {
			case p.received <- heapSent{len(out.GetObjects()), three}:
			case <-ctx.Done():
			}
		}
	}()
	return p
}

// push pushes in and waits for the first output sent for which done
// holds; it returns that output's object count.
func (p *heapPlane) push(in *snapshotv1.InputSnapshot, done func(heapSent) bool) int {
	p.t.Helper()
	push := p.ing.Push(p.ctx)
	if err := push.Send(&ingestv1.PushRequest{Snapshot: in}); err != nil {
		p.t.Fatal(err)
	}
	if _, err := push.Receive(); err != nil {
		p.t.Fatalf("push of %d destinations: %v", len(in.GetDestinations()), err)
	}
	_ = push.CloseRequest()
	_ = push.CloseResponse()
	deadline := time.After(5 * time.Minute)
	for {
		select {
		case o := <-p.received:
			if done(o) {
				p.last = o.objects
				return o.objects
			}
		case <-deadline:
			p.t.Fatalf("no output for the input of %d destinations and %d policies", len(in.GetDestinations()), len(in.GetTrafficPolicies()))
		}
	}
}

func (p *heapPlane) grew(o heapSent) bool   { return o.objects > p.last }
func (p *heapPlane) shrank(o heapSent) bool { return o.objects < p.last }

// heapBack fails the test unless the large input added at least
// measurable bytes to the heap (withBig over baseline), and the heap
// returns within 1/part of that growth above baseline once the work the
// shrink started (acks, statuses) has settled: it is measured until it
// does, for at most 45 seconds, and the lowest figure is returned.
// What may stay: buffers and pools sized by the largest message (the
// test's own client's too), and the buckets of maps that lost their
// entries.
func heapBack(t *testing.T, baseline, withBig, measurable, part uint64) (after uint64) {
	t.Helper()
	if withBig < baseline+measurable {
		t.Fatalf("the large input added only %d MiB: the test measures nothing", (withBig-baseline)>>20)
	}
	allowed := baseline + (withBig-baseline)/part
	after = heapInUse()
	// On a loaded machine (CI runs other packages at once) the shrink's
	// work can take longer to settle than on an idle one.
	deadline := time.Now().Add(45 * time.Second)
	for after > allowed && time.Now().Before(deadline) {
		after = min(after, heapInUse())
	}
	if after > allowed {
		// What holds it, for `go tool pprof -sample_index=inuse_space`.
		prof := filepath.Join(os.TempDir(), fmt.Sprintf("meshplane-%s-heap.pprof", strings.ReplaceAll(t.Name(), "/", "_")))
		if f, err := os.Create(prof); err == nil {
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			_ = f.Close()
		}
		t.Fatalf("heap in use after shrinking is %d KiB, %d KiB over the baseline of %d KiB (at most %d KiB may stay): something holds the large input, translation or output (heap profile: %s)",
			after>>10, (after-baseline)>>10, baseline>>10, (allowed-baseline)>>10, prof)
	}
	return after
}

// TestHeapReturnsAfterClusterShrinks: a cluster pushes a large input with
// policies, which is translated (in full, then incrementally for a policy
// edit), published and sent to its agent; then it shrinks to a small one.
// Once the small output is sent, the live heap is back near what it was
// before the large input: nothing holds the large input, its translation
// or its output.
func TestHeapReturnsAfterClusterShrinks(t *testing.T) {
	const big, small, policies = 10_000, 10, 5_000
	p := startHeapPlane(t, ingest.Limits{Destinations: big, Policies: policies})
	nSmall := p.push(bigInput("east", small, 0, 0), p.grew)
	baseline := heapInUse()
	nBig := p.push(bigInput("east", big, policies, 2), p.grew)
	// A policy edit: an incremental translation, whose sealer keeps the
	// bodies of both versions.
	p.push(bigInput("east", big, policies, 3), func(o heapSent) bool { return o.attempts })
	withBig := heapInUse()
	nAfter := p.push(bigInput("east", small+1, 0, 0), p.shrank)
	// Before translation's state stopped holding the previous LastGood,
	// 6 of 78 MiB stayed.
	after := heapBack(t, baseline, withBig, 32<<20, 20)
	t.Logf("heap in use: %d MiB with %d destinations (%d objects out), %d MiB with %d and %d policies (%d objects), %d MiB after shrinking to %d (%d objects)",
		baseline>>20, small, nSmall, withBig>>20, big, policies, nBig, after>>20, small+1, nAfter)
}

// TestHeapReturnsAfterPoliciesShrink: only the policies change, so every
// translation after the first is incremental and keeps its sealer (the
// digests of every object body it has seen) until the next full one. A
// cluster that adds many policies, edits them and deletes them again must
// not leave the heap holding them.
func TestHeapReturnsAfterPoliciesShrink(t *testing.T) {
	const destinations, policies = 5_000, 5_000
	p := startHeapPlane(t, ingest.Limits{Destinations: destinations, Policies: policies})
	nBase := p.push(bigInput("east", destinations, 0, 0), p.grew)
	baseline := heapInUse()
	nBig := p.push(bigInput("east", destinations, policies, 2), p.grew)
	p.push(bigInput("east", destinations, policies, 3), func(o heapSent) bool { return o.attempts })
	withBig := heapInUse()
	nAfter := p.push(bigInput("east", destinations, 0, 0), p.shrank)
	// Before the sealer dropped the bodies of replaced objects, 30 of
	// 43 MiB stayed; now 5 to 12 of 32 to 34 (at 10,000 of each, 7 to 11
	// of 50 to 54), most of it buffers and map buckets sized by the
	// largest input.
	after := heapBack(t, baseline, withBig, 24<<20, 2)
	t.Logf("heap in use: %d MiB with %d destinations (%d objects out), %d MiB with %d policies too (%d objects), %d MiB after deleting them (%d objects)",
		baseline>>20, destinations, nBase, withBig>>20, policies, nBig, after>>20, nAfter)
}
