package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/test/e2e/harness"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The reference estate's names (services/translation TestWriteReferenceOutput).
const (
	// refRealCluster is the cluster whose agent runs as a process against
	// a real API server: the one whose output the edit changes.
	refRealCluster = "cluster-000"
	// refManagement is the management cluster's input: it holds every
	// policy.
	refManagement = "meshplane"
	// refEdited is the TrafficPolicy each iteration edits: it selects
	// cluster-000's svc-0000.
	refEdited = "policy-00000"
)

// reference is the reference estate as the real translator's test writes
// it: every cluster's input, cluster-000's output before and after the
// edit, and the clusters whose output the edit changes.
type reference struct {
	inputs         map[string]*snapshotv1.InputSnapshot
	base, edited   *snapshotv1.OutputSnapshot
	changedOutputs []string
}

// readReference runs services/translation's TestWriteReferenceOutput for
// the reference estate at C=100 (the one generator of the estate), or
// reads what it wrote before into MESHPLANE_REFERENCE_OUTPUT.
func readReference(tb testing.TB) *reference {
	tb.Helper()
	dir := os.Getenv("MESHPLANE_REFERENCE_OUTPUT")
	if dir == "" {
		dir = tb.TempDir()
		cmd := exec.Command("go", "test", "-run", "^TestWriteReferenceOutput$", "-count=1", "./internal/domain", "-args", "-reference-output="+dir)
		cmd.Dir = filepath.Join(harness.RepoRoot(), "services", "translation")
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("making the reference estate: %v\n%s", err, out)
		}
	}
	read := func(path string, m proto.Message) {
		b, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		if err := proto.Unmarshal(b, m); err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
	}
	r := &reference{inputs: map[string]*snapshotv1.InputSnapshot{}, base: &snapshotv1.OutputSnapshot{}, edited: &snapshotv1.OutputSnapshot{}}
	read(filepath.Join(dir, "base.pb"), r.base)
	read(filepath.Join(dir, "edited.pb"), r.edited)
	files, err := filepath.Glob(filepath.Join(dir, "inputs", "*.pb"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no inputs in %s (%v): write them with a translation test of this commit", dir, err)
	}
	for _, f := range files {
		in := &snapshotv1.InputSnapshot{}
		read(f, in)
		r.inputs[in.GetCluster()] = in
	}
	changed, err := os.ReadFile(filepath.Join(dir, "changed-clusters.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	r.changedOutputs = strings.Fields(string(changed))
	if r.inputs[refRealCluster] == nil || r.inputs[refManagement] == nil || !slices.Contains(r.changedOutputs, refRealCluster) {
		tb.Fatalf("%s holds no reference estate with %s and %s, whose output the edit changes", dir, refRealCluster, refManagement)
	}
	return r
}

// changedVirtualServices are the objects of cluster-000's output that the
// edit changes; each must be a VirtualService (the edit is a retry count).
func (r *reference) changedVirtualServices(tb testing.TB) []*snapshotv1.Object {
	tb.Helper()
	before := map[uint64]*snapshotv1.Object{}
	for _, o := range r.base.GetObjects() {
		before[snapshots.ObjectKeyHash(o)] = o
	}
	var out []*snapshotv1.Object
	for _, o := range r.edited.GetObjects() {
		if b := before[snapshots.ObjectKeyHash(o)]; b == nil || !proto.Equal(b, o) {
			if o.GetKind() != "VirtualService" {
				tb.Fatalf("the edit changes %s %s/%s: only VirtualServices are expected", o.GetKind(), o.GetNamespace(), o.GetName())
			}
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		tb.Fatal("the edit changes no object of " + refRealCluster)
	}
	return out
}

// editedManagementInput is the management cluster's input with the edited
// TrafficPolicy's retries set to attempts at generation gen, sealed.
func editedManagementInput(tb testing.TB, base *snapshotv1.InputSnapshot, attempts int32, gen int64) *snapshotv1.InputSnapshot {
	tb.Helper()
	in := snapshots.ShallowCopy(base)
	in.TrafficPolicies = slices.Clone(base.GetTrafficPolicies())
	i := slices.IndexFunc(in.TrafficPolicies, func(tp *networkingv1.TrafficPolicy) bool { return tp.GetMetadata().GetName() == refEdited })
	if i < 0 || in.TrafficPolicies[i].GetSpec().GetPolicy().GetRetries() == nil {
		tb.Fatalf("the management cluster's input holds no TrafficPolicy %s with retries", refEdited)
	}
	tp := proto.CloneOf(in.TrafficPolicies[i])
	tp.Metadata.Generation = gen
	tp.Spec.Policy.Retries.Attempts = attempts
	in.TrafficPolicies[i] = tp
	in.Version = ""
	snapshots.SealInput(in)
	return in
}

// createClusterObjects makes the Kubernetes objects from which the agent
// discovers in's estate: istiod and the east-west gateway (its
// LoadBalancer address the mesh's), a Service per destination and a
// sidecar-injected Pod per workload (no controllers run in a bare API
// server, so no Deployments). It also creates the namespaces of out's
// objects, which the agent writes into.
func createClusterObjects(tb testing.TB, ctx context.Context, c *kubetest.Cluster, in *snapshotv1.InputSnapshot, out *snapshotv1.OutputSnapshot) {
	tb.Helper()
	cfg := c.RESTConfig()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if len(in.GetMeshes()) != 1 {
		tb.Fatalf("%s's input has %d meshes, want 1", in.GetCluster(), len(in.GetMeshes()))
	}
	mesh := in.GetMeshes()[0].GetSpec().GetIstio()
	if err := c.ApplyYAML(ctx, harness.IstioControlPlane("", "1.24.0", mesh.GetTrustDomain())); err != nil {
		tb.Fatal(err)
	}
	for _, gw := range mesh.GetEastWestGateways() {
		if err := c.ApplyYAML(ctx, harness.EastWestGateway(in.GetCluster())); err != nil {
			tb.Fatal(err)
		}
		svc, err := cs.CoreV1().Services(harness.IstioNamespace).Get(ctx, "istio-eastwestgateway", metav1.GetOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: gw.GetExternalAddress()}}
		if _, err := cs.CoreV1().Services(harness.IstioNamespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	namespaces := map[string]bool{}
	for _, o := range out.GetObjects() {
		namespaces[o.GetNamespace()] = true
	}
	for _, d := range in.GetDestinations() {
		namespaces[d.GetSpec().GetKubeService().GetRef().GetNamespace()] = true
	}
	for ns := range namespaces {
		if ns == "" {
			continue
		}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			tb.Fatal(err)
		}
	}
	var creates []func() error
	for _, d := range in.GetDestinations() {
		ks := d.GetSpec().GetKubeService()
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: ks.GetRef().GetName(), Namespace: ks.GetRef().GetNamespace(), Labels: ks.GetLabels()},
			Spec:       corev1.ServiceSpec{Selector: ks.GetWorkloadSelectorLabels()},
		}
		for _, p := range ks.GetPorts() {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.GetName(), Port: int32(p.GetPort()), TargetPort: intstr.FromInt32(int32(p.GetPort()))})
		}
		creates = append(creates, func() error {
			_, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
			return err
		})
	}
	for _, w := range in.GetWorkloads() {
		k := w.GetSpec().GetKubernetes()
		labels := map[string]string{"security.istio.io/tlsMode": "istio"}
		for key, v := range k.GetPodLabels() {
			labels[key] = v
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: w.GetMetadata().GetName(), Namespace: w.GetMetadata().GetNamespace(), Labels: labels},
			Spec: corev1.PodSpec{ServiceAccountName: k.GetServiceAccountName(), Containers: []corev1.Container{
				{Name: "app", Image: "registry.example/app:1"},
				{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.24.0"},
			}},
		}
		creates = append(creates, func() error {
			_, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
			return err
		})
	}
	work := make(chan func() error)
	errs := make(chan error, len(creates))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for f := range work {
				if err := f(); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, f := range creates {
		work <- f
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

// arrival is a VirtualService as a watch on the real API server delivered
// it, and when.
type arrival struct {
	name string
	spec string
	at   time.Time
}

// watchVirtualServices sends every VirtualService of namespace that the
// API server adds or changes, named in names, timestamped on arrival.
func watchVirtualServices(tb testing.TB, ctx context.Context, c *kubetest.Cluster, namespace string, names []string) <-chan arrival {
	tb.Helper()
	ch := make(chan arrival, 1024)
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.Dynamic(), 0, namespace, nil)
	inf := f.ForResource(virtualServices).Informer()
	send := func(obj any) {
		at := time.Now()
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || !slices.Contains(names, u.GetName()) {
			return
		}
		select {
		case ch <- arrival{name: u.GetName(), spec: specJSON(u), at: at}:
		case <-ctx.Done():
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    send,
		UpdateFunc: func(_, obj any) { send(obj) },
	}); err != nil {
		tb.Fatal(err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		tb.Fatal("the VirtualService informer did not sync")
	}
	return ch
}

// ownedObjects counts the objects of each kind of out that the agent owns
// in c (the Meshplane cluster label).
func ownedObjects(tb testing.TB, ctx context.Context, c *kubetest.Cluster, out *snapshotv1.OutputSnapshot) int {
	tb.Helper()
	kinds := map[schema.GroupVersionKind]bool{}
	for _, o := range out.GetObjects() {
		kinds[schema.FromAPIVersionAndKind(o.GetApiVersion(), o.GetKind())] = true
	}
	// The mapper may have cached discovery from before the API server
	// listed every CRD.
	c.Mapper().Reset()
	var n int
	for gvk := range kinds {
		m, err := c.Mapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			tb.Fatal(err)
		}
		list, err := c.Dynamic().Resource(m.Resource).List(ctx, metav1.ListOptions{LabelSelector: snapshots.LabelCluster + "=" + out.GetCluster()})
		if err != nil {
			tb.Fatal(err)
		}
		n += len(list.Items)
	}
	return n
}

// BenchmarkFanOutReference: one TrafficPolicy edit at the reference estate
// (C=100 clusters, S=1,000 services each, P=10,000 TrafficPolicies and
// 5,000 AccessPolicies, a tenth of the services federated to every other
// mesh: services/translation's one generator, TestWriteReferenceOutput,
// run as a subprocess), from the push of the edited policy until the
// changed VirtualService is readable in a real cluster's API server.
//
//   - The management plane is the four services as processes on one real
//     Redis, translation with its default debounce (100 ms), registration
//     with Redis (it signs the VirtualMesh's istiod intermediate CA).
//   - cluster-000, whose output the edit changes, is a real agent process
//     with its default flags (deltas, 16 apply workers, QPS 500, burst
//     1,000; the harness's 50 ms discovery debounce) against a real
//     kube-apiserver and etcd. Its input is not pushed by the benchmark:
//     the API server holds the Services, sidecar Pods, istiod and
//     east-west gateway of cluster-000's reference input, and the agent
//     discovers them and pushes what it found. It first applies its whole
//     output (about 21,000 objects) before the timed loop.
//   - The other 99 clusters are simulated agents (harness.SimAgent), each
//     pushing its reference input and watching its output with deltas, as
//     agents do; their apply is a no-op.
//   - The management cluster's input (every policy) is pushed by one more
//     simulated agent with the cluster name "meshplane", which also
//     watches that cluster's output: the policies' 15,000 statuses. In an
//     installation ingest reads that input from the management cluster's
//     API server instead (--watch-management-cluster), so the time from a
//     kubectl edit to that push (ingest's watch and --management-debounce)
//     is not included.
//
// Each iteration sets the policy's retries to 4, then 3, then 4, ..., with
// a new generation, pushes the management cluster's input and waits until
// a watch on the real API server delivers each changed VirtualService
// with the new retries. It reports edit-to-apiserver-p50-ms and -p99-ms
// over the iterations; median-cluster-p50-ms and -p99-ms: until half of
// the 101 outputs the edit changes are applied or acked (cluster-000 is
// the first output translation publishes, so the median cluster is the
// fairer figure for the others); fanout-p50-ms and -p99-ms: until every
// other output the edit changes is acked by its simulated agent (the generator
// lists them: the policy selects a federated service, so every workload
// cluster's output changes, each client's VirtualService for the
// federated host, and the management cluster's, for the policy's status),
// and objects: the owned objects in the real cluster after the first
// apply. Run it alone, with a count of edits:
//
//	go test -run '^$' -bench FanOutReference -benchtime 20x -timeout 60m ./test/e2e/
func BenchmarkFanOutReference(b *testing.B) {
	harness.RequireE2E(b)
	ref := readReference(b)
	changedVS := ref.changedVirtualServices(b)
	ctx := b.Context()
	redis := redistest.Start(b)
	dir := testDir(b)
	clusters := slices.Sorted(func(yield func(string) bool) {
		for c := range ref.inputs {
			if !yield(c) {
				return
			}
		}
	})
	plane, tokens, err := harness.StartPlane(ctx, harness.PlaneOptions{BinDir: binDir, Dir: dir, RedisAddr: redis.Addr(), Clusters: clusters, TranslationDebounce: 100 * time.Millisecond,
		// The VirtualMesh's shared trust: registration signs the
		// agent's istiod intermediate CA, which it checks against the
		// inputs in Redis.
		RegistrationRedis: true,
		Pprof:             os.Getenv("MESHPLANE_BENCH_PROFILE_DIR") != ""})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(plane.Stop)
	procs := slices.Clone(plane.Procs)

	// The real cluster, its estate and its agent.
	real := kubetest.Start(b, kubetest.Options{Name: refRealCluster, LogDir: filepath.Join(dir, "logs")})
	createClusterObjects(b, ctx, real, ref.inputs[refRealCluster], ref.base)
	agent, err := plane.StartAgent(harness.AgentOptions{BinDir: binDir, Cluster: refRealCluster, Token: tokens[refRealCluster],
		Kubeconfig: real.Kubeconfig(), LogDir: filepath.Join(dir, "logs"), StateDir: filepath.Join(dir, "agent-"+refRealCluster)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(agent.Stop)
	procs = append(procs, agent)

	// The simulated agents: every other cluster and the management
	// cluster. Each keeps the version it last acked; the agents of the
	// outputs the edit changes also pass on what they acked.
	type simState struct {
		version string
		acked   int
	}
	var (
		mu    sync.Mutex
		state = map[string]*simState{}
	)
	changedAcks := map[string]chan harness.Acked{}
	for _, c := range ref.changedOutputs {
		if c != refRealCluster {
			changedAcks[c] = make(chan harness.Acked, 16)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var sims []*harness.SimAgent
	b.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, a := range sims {
			a.Close()
		}
	})
	for _, c := range clusters {
		if c == refRealCluster {
			continue
		}
		a, err := plane.NewSimAgent(c)
		if err != nil {
			b.Fatal(err)
		}
		// Deltas, as the real agents take them: the edit changes 101
		// outputs of about 21,000 objects each.
		a.Deltas = true
		sims = append(sims, a)
		state[c] = &simState{}
	}
	for _, a := range sims {
		wg.Go(func() {
			for wctx.Err() == nil {
				if err := a.Watch(wctx); err != nil {
					select {
					case <-wctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
		})
		wg.Go(func() {
			for {
				select {
				case got := <-a.Acked:
					mu.Lock()
					s := state[a.Cluster]
					s.version, s.acked = got.Version, s.acked+1
					mu.Unlock()
					if ch := changedAcks[a.Cluster]; ch != nil {
						select {
						case ch <- got:
						case <-wctx.Done():
							return
						}
					}
				case <-wctx.Done():
					return
				}
			}
		})
	}
	pushed := map[string]bool{}
	if err := harness.Wait(ctx, 2*time.Minute, "every simulated agent's first push", func(ctx context.Context) (bool, error) {
		for _, a := range sims {
			if pushed[a.Cluster] {
				continue
			}
			if err := a.Push(ref.inputs[a.Cluster]); err != nil {
				return false, err
			}
			pushed[a.Cluster] = true
		}
		return true, nil
	}, procs...); err != nil {
		b.Fatal(err)
	}

	// Every agent acked its cluster's newest output, the real one having
	// applied all of it, and the VirtualService the edit changes is in
	// the real API server.
	dist := distributionClient(b, plane)
	vsNamespace := changedVS[0].GetNamespace()
	var vsNames []string
	for _, o := range changedVS {
		if o.GetNamespace() != vsNamespace {
			b.Fatalf("the changed VirtualServices are in namespaces %s and %s: one is expected", vsNamespace, o.GetNamespace())
		}
		vsNames = append(vsNames, o.GetName())
	}
	start := time.Now()
	if err := harness.Wait(ctx, 30*time.Minute, "every cluster's newest output acked, the real one applied", func(ctx context.Context) (bool, error) {
		resp, err := dist.ListAcks(ctx, connect.NewRequest(&distributionv1.ListAcksRequest{}))
		if err != nil {
			return false, err
		}
		acked, behind := 0, ""
		for _, c := range resp.Msg.GetClusters() {
			if c.GetAckedVersion() != "" && c.GetAckedVersion() == c.GetLatestVersion() && c.GetApplyErrors() == 0 {
				acked++
			} else if behind == "" {
				behind = fmt.Sprintf("; %s acked %q of %q with %d apply errors", c.GetCluster(), c.GetAckedVersion(), c.GetLatestVersion(), c.GetApplyErrors())
			}
		}
		if acked != len(clusters) {
			return false, fmt.Errorf("%d of %d clusters acked their newest output%s", acked, len(clusters), behind)
		}
		for _, name := range vsNames {
			if _, err := real.Dynamic().Resource(virtualServices).Namespace(vsNamespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return false, err
			}
		}
		return true, nil
	}, procs...); err != nil {
		b.Fatal(err)
	}
	objects := ownedObjects(b, ctx, real, ref.base)
	b.Logf("setup: every output acked %s after the pushes; %d objects owned in %s's API server (the reference output holds %d)",
		time.Since(start).Round(time.Millisecond), objects, refRealCluster, len(ref.base.GetObjects()))
	arrivals := watchVirtualServices(b, ctx, real, vsNamespace, vsNames)
	mu.Lock()
	ackedBefore := map[string]int{}
	for c, s := range state {
		ackedBefore[c] = s.acked
	}
	mu.Unlock()
	var mgmt *harness.SimAgent
	for _, a := range sims {
		if a.Cluster == refManagement {
			mgmt = a
		}
	}

	profiles := profilePlane(b, plane)
	var toAPI, fanOut, median []time.Duration
	for i := 1; b.Loop(); i++ {
		attempts := int32(3 + i%2)
		gen := int64(1 + i)
		in := editedManagementInput(b, ref.inputs[refManagement], attempts, gen)
		want := fmt.Sprintf(`"attempts":%d`, attempts)
		// Acks of versions before this edit (the setup's, which filled
		// the channels) do not count.
		for _, ch := range changedAcks {
			for drained := false; !drained; {
				select {
				case <-ch:
				default:
					drained = true
				}
			}
		}
		start := time.Now()
		if err := mgmt.Push(in); err != nil {
			b.Fatal(err)
		}
		deadline := time.After(60 * time.Second)
		pending := slices.Clone(vsNames)
		var last time.Time
		for len(pending) > 0 {
			select {
			case a := <-arrivals:
				if strings.Contains(a.spec, want) && slices.Contains(pending, a.name) {
					pending = slices.DeleteFunc(pending, func(n string) bool { return n == a.name })
					last = a.at
				}
			case <-deadline:
				b.Fatalf("edit %d: %v not readable with %s in %s's API server after 60 s\n%s", i, pending, want, refRealCluster, agent.LogTail(3000))
			}
		}
		toAPI = append(toAPI, last.Sub(start))
		// The other outputs the edit changes: the policy's status, at the
		// new generation, acked by the management cluster's agent.
		var fan time.Time
		reached := []time.Duration{last.Sub(start)}
		for c, ch := range changedAcks {
			var at time.Time
			for done := false; !done; {
				select {
				case got := <-ch:
					if got.At.Before(start) {
						continue // acked before the edit
					}
					done = c != refManagement || observed(got.Statuses(), refEdited, gen)
					at = maxTime(at, got.At)
				case <-deadline:
					b.Fatalf("edit %d: %s acked no output with the edit after 60 s", i, c)
				}
			}
			fan = maxTime(fan, at)
			reached = append(reached, at.Sub(start))
		}
		fanOut = append(fanOut, maxTime(fan, last).Sub(start))
		// The cluster in the middle: cluster-000 is the first in the
		// order translation publishes in, so its latency is the best of
		// the 101.
		slices.Sort(reached)
		median = append(median, reached[len(reached)/2])
	}
	b.StopTimer()
	profiles()
	// The outputs the generator says the edit leaves alone got nothing.
	mu.Lock()
	for c, s := range state {
		if changedAcks[c] == nil && s.acked != ackedBefore[c] {
			b.Errorf("%s acked %d more outputs during the edits; the edit should not change its output", c, s.acked-ackedBefore[c])
		}
	}
	mu.Unlock()
	b.ReportMetric(float64(objects), "objects")
	reportPercentiles(b, toAPI, "edit-to-apiserver")
	reportPercentiles(b, fanOut, "fanout")
	reportPercentiles(b, median, "median-cluster")
}

// observed reports whether statuses hold the status of the TrafficPolicy
// name at generation gen.
func observed(statuses []*snapshotv1.ResourceStatus, name string, gen int64) bool {
	for _, st := range statuses {
		if st.GetKind() == "TrafficPolicy" && st.GetName() == name && st.GetObservedGeneration() == gen {
			return true
		}
	}
	return false
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// reportPercentiles reports the p50 and p99 of lat, in milliseconds, as
// <name>-p50-ms and <name>-p99-ms.
func reportPercentiles(b *testing.B, lat []time.Duration, name string) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, name+"-p99-ms")
}

// profilePlane takes a CPU profile of ingest, translation and distribution
// while the edits run, when MESHPLANE_BENCH_PROFILE_DIR names a directory
// ($MESHPLANE_BENCH_PROFILE_SECONDS long, 30 s by default), into
// <dir>/<service>.cpu.pprof. The returned function waits for them.
func profilePlane(b *testing.B, plane *harness.Plane) func() {
	dir := os.Getenv("MESHPLANE_BENCH_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	seconds := os.Getenv("MESHPLANE_BENCH_PROFILE_SECONDS")
	if seconds == "" {
		seconds = "30"
	}
	var wg sync.WaitGroup
	for _, svc := range []string{"ingest", "translation", "distribution"} {
		wg.Go(func() {
			url := "http://" + plane.Admins[svc] + "/debug/pprof/profile?seconds=" + seconds
			resp, err := http.Get(url)
			if err != nil {
				b.Errorf("profile of %s: %v", svc, err)
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Errorf("profile of %s: %s %v", svc, resp.Status, err)
				return
			}
			if err := os.WriteFile(filepath.Join(dir, svc+".cpu.pprof"), body, 0o644); err != nil {
				b.Error(err)
			}
		})
	}
	return wg.Wait
}
