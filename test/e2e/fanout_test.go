package e2e

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/test/e2e/harness"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fanOut is a management plane (four processes on one Redis) with n
// simulated agents, each pushing its own input and watching distribution.
type fanOut struct {
	plane  *harness.Plane
	agents []*harness.SimAgent
	procs  []*harness.Process
	// have is each agent's last acked snapshot.
	have []*snapshotv1.OutputSnapshot
	// newAgent makes the i-th agent; nil: plane.NewSimAgent.
	newAgent func(i int, cluster string) (*harness.SimAgent, error)
}

func startFanOut(tb testing.TB, n int) *fanOut {
	tb.Helper()
	harness.RequireE2E(tb)
	ctx := context.Background()
	redis := redistest.Start(tb)
	dir := testDir(tb)
	clusters := make([]string, n)
	for i := range clusters {
		clusters[i] = fmt.Sprintf("c%03d", i)
	}
	// c000's policy selects every cluster: the management cluster grants
	// it that scope.
	mgmt := kubetest.Start(tb, kubetest.Options{Name: "mgmt", SkipIstioCRDs: true})
	if _, err := mgmt.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "meshplane"}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	plane, _, err := harness.StartPlane(ctx, harness.PlaneOptions{BinDir: binDir, Dir: dir, RedisAddr: redis.Addr(), Clusters: clusters, ManagementKubeconfig: mgmt.Kubeconfig()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(plane.Stop)
	f := &fanOut{plane: plane, procs: plane.Procs}
	grantScope(tb, mgmt, f.procs, "c000")
	f.follow(tb, clusters, func(c string) *snapshotv1.InputSnapshot { return fanOutInput(c, 0) })
	// Every agent holds the first output of its cluster: one
	// DestinationRule and no VirtualService.
	f.awaitAll(tb, func(s *snapshotv1.OutputSnapshot) bool { return len(s.GetObjects()) == 1 })
	return f
}

// follow starts a SimAgent per cluster, each watching distribution (and
// redialling, as the agent does), and pushes each one's first input.
func (f *fanOut) follow(tb testing.TB, clusters []string, input func(cluster string) *snapshotv1.InputSnapshot) {
	tb.Helper()
	ctx := context.Background()
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	tb.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, a := range f.agents {
			a.Close()
		}
	})
	for i, c := range clusters {
		newAgent := f.newAgent
		if newAgent == nil {
			newAgent = func(_ int, c string) (*harness.SimAgent, error) { return f.plane.NewSimAgent(c) }
		}
		a, err := newAgent(i, c)
		if err != nil {
			tb.Fatal(err)
		}
		f.agents = append(f.agents, a)
		f.have = append(f.have, nil)
		wg.Go(func() {
			// A watch that fails before the plane is up is redialled, as
			// the agent does.
			for wctx.Err() == nil {
				if err := a.Watch(wctx); err != nil {
					select {
					case <-wctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
		})
	}
	f.pushAll(tb, input)
}

// pushAll pushes every agent's input, retrying each until ingest accepts
// it.
func (f *fanOut) pushAll(tb testing.TB, input func(cluster string) *snapshotv1.InputSnapshot) {
	tb.Helper()
	pushed := make([]bool, len(f.agents))
	if err := harness.Wait(context.Background(), 60*time.Second, "every agent's push", func(ctx context.Context) (bool, error) {
		for i, a := range f.agents {
			if pushed[i] {
				continue
			}
			// Until ingest listens, the push fails and is retried.
			if err := a.Push(input(a.Cluster)); err != nil {
				return false, err
			}
			pushed[i] = true
		}
		return true, nil
	}, f.procs...); err != nil {
		tb.Fatal(err)
	}
}

// fanOutInput is one cluster's input: a Service "reviews" in its own mesh.
// A timeout > 0 adds, to c000's input only, a TrafficPolicy without a
// destination selector: it selects every destination of every cluster, so
// one edit changes the output of all of them.
func fanOutInput(cluster string, timeout time.Duration) *snapshotv1.InputSnapshot {
	in := &snapshotv1.InputSnapshot{
		Cluster: cluster,
		Agent:   &snapshotv1.AgentInfo{Version: "sim", Replica: "sim-" + cluster, Namespace: "meshplane"},
		Destinations: []*discoveryv1.Destination{{
			Metadata: &commonv1.ObjectMeta{Name: "reviews-default-" + cluster, Namespace: "default", Cluster: cluster},
			Spec: &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
				Ref: &commonv1.ClusterObjectRef{Name: "reviews", Namespace: "default", Cluster: cluster},
			}}},
		}},
	}
	if timeout > 0 && cluster == "c000" {
		in.TrafficPolicies = []*networkingv1.TrafficPolicy{{
			Metadata: &commonv1.ObjectMeta{Name: "everywhere", Namespace: "default", Cluster: cluster, Generation: 1},
			Spec:     &networkingv1.TrafficPolicySpec{Policy: &networkingv1.TrafficPolicySpec_Policy{RequestTimeout: durationpb.New(timeout)}},
		}}
	}
	snapshots.SealInput(in)
	return in
}

// hasTimeout reports whether s holds a VirtualService with the timeout, in
// whole seconds.
func hasTimeout(s *snapshotv1.OutputSnapshot, timeout time.Duration) bool {
	want := []byte(fmt.Sprintf(`"timeout":"%ds"`, int(timeout.Seconds())))
	for _, o := range s.GetObjects() {
		if o.GetKind() == "VirtualService" && bytes.Contains(o.GetSpec(), want) {
			return true
		}
	}
	return false
}

// awaitAll waits until every agent has acked a snapshot that done accepts,
// and returns when each ack returned.
func (f *fanOut) awaitAll(tb testing.TB, done func(*snapshotv1.OutputSnapshot) bool) []time.Time {
	tb.Helper()
	at := make([]time.Time, len(f.agents))
	deadline := time.After(60 * time.Second)
	for i, a := range f.agents {
		for f.have[i] == nil || !done(f.have[i]) {
			select {
			case got := <-a.Acked:
				f.have[i], at[i] = got.Snapshot, got.At
			case <-deadline:
				var tails string
				for _, p := range f.procs {
					tails += fmt.Sprintf("--- %s ---\n%s\n", p.Name, p.LogTail(2000))
				}
				tb.Fatalf("agent %s did not ack the expected output; it holds %d objects, version %s\n%s",
					a.Cluster, len(f.have[i].GetObjects()), f.have[i].GetVersion(), tails)
			}
		}
	}
	return at
}

// change pushes c000's input with the policy set to timeout, and returns
// when ingest accepted it.
func (f *fanOut) change(tb testing.TB, timeout time.Duration) time.Time {
	tb.Helper()
	start := time.Now()
	if err := f.agents[0].Push(fanOutInput("c000", timeout)); err != nil {
		tb.Fatal(err)
	}
	return start
}

// One policy change reaches every cluster: 20 agents, each watching one
// distribution replica, all converge on their cluster's newest output, and
// distribution's ack records agree.
func TestFanOutConverges(t *testing.T) {
	f := startFanOut(t, 20)
	f.change(t, 7*time.Second)
	f.awaitAll(t, func(s *snapshotv1.OutputSnapshot) bool { return hasTimeout(s, 7*time.Second) })

	cert, key, err := f.plane.PKI.ServiceCert("meshctl")
	if err != nil {
		t.Fatal(err)
	}
	o := platform.NewClientOptions()
	o.Addr, o.CAFile, o.CertFile, o.KeyFile, o.ServerName = f.plane.Distribution, f.plane.PKI.RootFile(), cert, key, "localhost"
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	dist := distributionv1connect.NewDistributionServiceClient(hc, platform.BaseURL(o), platform.DefaultClientOptions(o)...)
	err = harness.Wait(t.Context(), 30*time.Second, "every ack recorded at the newest version", func(ctx context.Context) (bool, error) {
		resp, err := dist.ListAcks(ctx, connect.NewRequest(&distributionv1.ListAcksRequest{}))
		if err != nil {
			return false, err
		}
		acks := map[string]*distributionv1.ClusterAck{}
		for _, c := range resp.Msg.GetClusters() {
			acks[c.GetCluster()] = c
		}
		for i, a := range f.agents {
			c := acks[a.Cluster]
			switch {
			case c == nil:
				return false, fmt.Errorf("no ack of %s", a.Cluster)
			case c.GetAckedVersion() != c.GetLatestVersion() || c.GetAckedVersion() != f.have[i].GetVersion():
				return false, fmt.Errorf("%s: acked %s, latest %s, agent holds %s", a.Cluster, c.GetAckedVersion(), c.GetLatestVersion(), f.have[i].GetVersion())
			case c.GetApplyErrors() != 0 || !c.GetConnected():
				return false, fmt.Errorf("%s: apply errors %d, connected %v", a.Cluster, c.GetApplyErrors(), c.GetConnected())
			}
		}
		return true, nil
	}, f.procs...)
	if err != nil {
		t.Fatal(err)
	}
	// Each cluster's output is its own: the VirtualService for its own
	// reviews Service, two objects in all.
	for i, a := range f.agents {
		s := f.have[i]
		if s.GetCluster() != a.Cluster || len(s.GetObjects()) != 2 {
			t.Errorf("%s holds the output of %q with %d objects, want its own with 2", a.Cluster, s.GetCluster(), len(s.GetObjects()))
		}
	}
}

// BenchmarkFanOutEndToEnd: one policy edit, pushed by one agent, reaching
// 100 agents. The four management services run as processes on one Redis
// (translation with the harness's 50 ms debounce); the 100 agents run in
// the benchmark process, each with its own cluster certificate and its own
// mTLS connections to ingest and to one distribution replica. Their apply
// step is a no-op that acks every object as applied at once, so the API
// servers' apply time is not included. Each iteration changes the
// policy's timeout, which changes the output of every cluster, and waits
// until every agent has acked its new output. It reports the p50 and p99
// from the push (before it is sent to ingest) to each agent's ack.
func BenchmarkFanOutEndToEnd(b *testing.B) {
	const agents = 100
	f := startFanOut(b, agents)
	var lat []time.Duration
	for i := 1; b.Loop(); i++ {
		timeout := time.Duration(i) * time.Second
		start := f.change(b, timeout)
		for _, at := range f.awaitAll(b, func(s *snapshotv1.OutputSnapshot) bool { return hasTimeout(s, timeout) }) {
			lat = append(lat, at.Sub(start))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
