package kube

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
)

// The agent's budget in these benchmarks: the defaults of its flags
// (services/agent/service: --kube-qps, --kube-burst, --apply-workers).
const (
	benchQPS     = 500
	benchBurst   = 1000
	benchWorkers = app.DefaultApplyWorkers
	benchEdits   = 100
	benchDeletes = 100
)

// referenceOutputs returns cluster-000's output of the reference estate at
// C=100 before and after one TrafficPolicy edit, as the real translator
// makes them (services/translation TestWriteReferenceOutput). Set
// MESHPLANE_REFERENCE_OUTPUT to a directory that holds them already to
// skip making them.
func referenceOutputs(b *testing.B) (base, edited []byte) {
	dir := os.Getenv("MESHPLANE_REFERENCE_OUTPUT")
	if dir == "" {
		dir = b.TempDir()
		translation, err := filepath.Abs("../../../../translation")
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("go", "test", "-run", "^TestWriteReferenceOutput$", "-count=1", "./internal/domain", "-args", "-reference-output="+dir)
		cmd.Dir = translation
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("making the reference output: %v\n%s", err, out)
		}
	}
	var err error
	if base, err = os.ReadFile(filepath.Join(dir, "base.pb")); err != nil {
		b.Fatal(err)
	}
	if edited, err = os.ReadFile(filepath.Join(dir, "edited.pb")); err != nil {
		b.Fatal(err)
	}
	return base, edited
}

// encodeDelta returns the wire encoding of the delta distribution sends
// an agent that holds from for the version to.
func encodeDelta(b *testing.B, from, to *snapshotv1.OutputSnapshot) []byte {
	d, _, err := snapshots.Diff(from.GetVersion(), snapshots.IndexOutput(from), to)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := proto.Marshal(d)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// decode decodes an output as the agent gets it off the wire: a new
// message each time.
func decode(b *testing.B, raw []byte) *snapshotv1.OutputSnapshot {
	out := &snapshotv1.OutputSnapshot{}
	if err := proto.Unmarshal(raw, out); err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkApplyReference applies the real translator's output for one
// cluster of the reference estate at C=100 (about 21,000 objects) to a
// real kube-apiserver and etcd, with the agent's default budget, and
// reports:
//
//   - first-apply-objects/s: (a) the first apply to an empty cluster,
//     from the whole output's bytes; first-apply-{agent,apiserver,etcd}-cpu-s:
//     the CPU time each process used meanwhile;
//   - edit-p50-ms, edit-p99-ms: (b) one TrafficPolicy edit, from the
//     delta's bytes (as distribution sends it by default) to the changed
//     objects readable in the API server (a GET that returns the new
//     digest), over 100 edits: decoding, making and checking the new
//     version (snapshots.DeltaReceiver, as the relay does), and the apply;
//   - restart-writes, restart-to-ack-s: (c) a new agent with nothing
//     changed: writes the API server served (must be 0), and the time from
//     its start to its acknowledgement;
//   - restore-100-deleted-s: (d) the time from a user deleting 100 owned
//     objects until all are back;
//   - agent-VmHWM-B: (e) the peak resident set of the agent of (a) and
//     (b), which runs in a process of its own (applyChild), and
//     agent-first-apply-peak-heap-B and agent-edits-peak-heap-B its largest
//     heap in use (sampled every 5 ms) during the first apply and the
//     edits, agent-edits-gc-cycles the collections during the edits;
//     peak-heap-B and live-heap-B are this process's, for comparison.
//
// Each phase runs once per benchmark run; report medians over -count:
//
//	go test -run '^$' -bench ApplyReference -benchtime 1x -count 3 ./internal/adapters/kube/
func BenchmarkApplyReference(b *testing.B) {
	baseRaw, editedRaw := referenceOutputs(b)
	for b.Loop() {
		benchApplyReference(b, baseRaw, editedRaw)
	}
}

func benchApplyReference(b *testing.B, baseRaw, editedRaw []byte) {
	b.StopTimer()
	c := kubetest.Start(b, kubetest.Options{Name: "ref"})
	ctx := b.Context()
	base := decode(b, baseRaw)
	nss := map[string]bool{}
	for _, o := range base.GetObjects() {
		nss[o.GetNamespace()] = true
	}
	for n := range nss {
		if _, err := c.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = benchQPS, benchBurst
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	newAgent := func(relay app.Relay) *app.Syncer {
		// A new mapper, as a new agent process has: the cluster's own was
		// filled before the CRDs were served.
		mapper, err := newMapper(cfg)
		if err != nil {
			b.Fatal(err)
		}
		s := app.NewSyncer(relay, NewApplier(md, mapper, install, base.GetCluster()), nil, nopLog, app.WithApplyOptions(app.ApplyOptions{Install: install, Cluster: base.GetCluster(), Workers: benchWorkers}))
		return s
	}

	// (a), (b) and (e): the agent in a child process (applyChild).
	edited := decode(b, editedRaw)
	if len(changedObjects(base, edited)) == 0 {
		b.Fatal("the edit changes no object")
	}
	dir := b.TempDir()
	kubeconfig, err := os.ReadFile(c.Kubeconfig())
	if err != nil {
		b.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"kubeconfig": kubeconfig, "cluster": []byte(base.GetCluster()), "base.pb": baseRaw,
		"delta0.pb": encodeDelta(b, base, edited), "delta1.pb": encodeDelta(b, edited, base),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	edited = nil
	etcdPID, apiserverPID := c.PIDs()
	cpu := func() (etcd, apiserver float64) {
		var err1, err2 error
		etcd, err1 = procCPUSeconds(etcdPID)
		apiserver, err2 = procCPUSeconds(apiserverPID)
		if err := errors.Join(err1, err2); err != nil {
			b.Fatal(err)
		}
		return etcd, apiserver
	}
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), applyChildEnv+"="+dir)
	if limit := os.Getenv("MESHPLANE_APPLY_AGENT_GOMEMLIMIT"); limit != "" {
		// The agent's soft memory limit, as its chart sets it.
		child.Env = append(child.Env, "GOMEMLIMIT="+limit)
	}
	child.Stderr = os.Stderr
	stdout, err := child.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	etcd0, apiserver0 := cpu()
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	var etcd1, apiserver1 float64
	got, err := childMetrics(stdout, func(name string) {
		if name == "first-apply-cpu-s" {
			etcd1, apiserver1 = cpu()
		}
	})
	if werr := child.Wait(); werr != nil || err != nil {
		b.Fatalf("the agent's process: %v %v", werr, err)
	}
	for _, name := range []string{"first-apply-s", "first-apply-cpu-s", "edit-p50-ms", "edit-p99-ms", "VmHWM-B", "first-apply-peak-heap-B", "edits-peak-heap-B", "edits-gc-cycles"} {
		if _, ok := got[name]; !ok {
			b.Fatalf("the agent's process reported no %s", name)
		}
	}
	b.ReportMetric(float64(len(base.GetObjects()))/got["first-apply-s"], "first-apply-objects/s")
	b.ReportMetric(got["first-apply-cpu-s"], "first-apply-agent-cpu-s")
	b.ReportMetric(apiserver1-apiserver0, "first-apply-apiserver-cpu-s")
	b.ReportMetric(etcd1-etcd0, "first-apply-etcd-cpu-s")
	b.ReportMetric(got["edit-p50-ms"], "edit-p50-ms")
	b.ReportMetric(got["edit-p99-ms"], "edit-p99-ms")
	b.ReportMetric(got["VmHWM-B"], "agent-VmHWM-B")
	b.ReportMetric(got["first-apply-peak-heap-B"], "agent-first-apply-peak-heap-B")
	b.ReportMetric(got["edits-peak-heap-B"], "agent-edits-peak-heap-B")
	b.ReportMetric(got["edits-gc-cycles"], "agent-edits-gc-cycles")
	peak := samplePeakHeap()

	// (c) A restart with nothing changed (the last edit left the base).
	before := outputWrites(b, c)
	relay := &streamRelay{snap: decode(b, baseRaw), acks: make(chan []*snapshotv1.ApplyResult, 4)}
	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	start := time.Now()
	s := newAgent(relay)
	done := make(chan error, 1)
	go func() { done <- s.Run(agentCtx) }()
	defer func() { stopAgent(); <-done }()
	select {
	case <-relay.acks:
	case <-time.After(2 * time.Minute):
		b.Fatal("the restarted agent did not acknowledge")
	}
	b.ReportMetric(time.Since(start).Seconds(), "restart-to-ack-s")
	w := total(diff(outputWrites(b, c), before))
	b.ReportMetric(float64(w), "restart-writes")
	if w != 0 {
		b.Errorf("the restarted agent wrote %d times", w)
	}

	// (d) A user deletes 100 owned objects.
	var victims []string
	for _, o := range base.GetObjects() {
		if o.GetKind() == "DestinationRule" && len(victims) < benchDeletes {
			victims = append(victims, o.GetNamespace()+"/"+o.GetName())
		}
	}
	start = time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(victims); i = int(next.Add(1) - 1) {
				ns, name, _ := strings.Cut(victims[i], "/")
				if err := c.Dynamic().Resource(drGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					b.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := kubetest.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		for _, v := range victims {
			ns, name, _ := strings.Cut(v, "/")
			if _, err := md.Resource(drGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		b.Fatalf("the deleted objects did not come back: %v", err)
	}
	b.ReportMetric(time.Since(start).Seconds(), "restore-100-deleted-s")

	// This process's memory, for comparison with the agent's own
	// (agent-VmHWM-B): it holds the encoded outputs, and the phases (c)
	// and (d) agent's state.
	b.ReportMetric(float64(peak()), "peak-heap-B")
	runtime.GC()
	live := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(live)
	b.ReportMetric(float64(live[0].Value.Uint64()), "live-heap-B")
	b.ReportMetric(float64(len(base.GetObjects())), "objects")
	b.StartTimer()
}

var nopLog = slog.New(slog.DiscardHandler)

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// changedObjects returns the keys of the objects whose content differs
// between two outputs.
func changedObjects(a, b *snapshotv1.OutputSnapshot) []domain.ObjectKey {
	digests := map[domain.ObjectKey]string{}
	for _, o := range a.GetObjects() {
		digests[domain.KeyOf(o)] = snapshots.ObjectDigest(o)
	}
	var out []domain.ObjectKey
	for _, o := range b.GetObjects() {
		if digests[domain.KeyOf(o)] != snapshots.ObjectDigest(o) {
			out = append(out, domain.KeyOf(o))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// samplePeakHeap samples the heap in use every 5 ms until the returned
// function is called, which returns the largest seen.
func samplePeakHeap() func() uint64 {
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				metrics.Read(sample)
				if v := sample[0].Value.Uint64(); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	return func() uint64 { close(stop); <-done; return peak.Load() }
}

// procVmHWM is this process's peak resident set, from /proc.
func procVmHWM() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
