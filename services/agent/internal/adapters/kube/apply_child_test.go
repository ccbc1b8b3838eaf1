package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// BenchmarkApplyReference runs the agent's part of phases (a) and (b) in
// a child process, the test binary run again with applyChildEnv set to a
// directory that holds the kubeconfig, the whole output and the two
// deltas: so that the child's peak resident set (e) is the agent's own,
// not the benchmark's, and its CPU time can be told from the API
// server's and etcd's. The child writes "<name> <value>" lines.
const applyChildEnv = "MESHPLANE_APPLY_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(applyChildEnv); dir != "" {
		if err := applyChild(dir, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "apply child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// applyChild is the agent of phases (a) and (b): with the agent's client
// budget, it receives the whole output (its bytes decoded, as off the
// wire) and applies it to the empty cluster, then receives each edit as a
// delta (decoded, made into the new version and checked by the relay's
// DeltaReceiver) and applies it, until the changed objects are readable
// with their new digests.
func applyChild(dir string, out io.Writer) error {
	ctx := context.Background()
	cfg, err := kube.RESTConfigFromKubeconfig(filepath.Join(dir, "kubeconfig"), "")
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = benchQPS, benchBurst
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mapper, err := newMapper(cfg)
	if err != nil {
		return err
	}
	cluster, err := os.ReadFile(filepath.Join(dir, "cluster"))
	if err != nil {
		return err
	}
	a := NewApplier(md, mapper, install, string(cluster))
	s := app.NewSyncer(&discardRelay{}, a, nil, nopLog, app.WithApplyOptions(app.ApplyOptions{Install: install, Cluster: string(cluster), Workers: benchWorkers}))
	if err := s.Sync(ctx); err != nil {
		return err
	}
	var recv snapshots.DeltaReceiver
	peak := samplePeakHeap()

	// (a) The first apply, from the whole snapshot's bytes.
	start := time.Now()
	raw, err := os.ReadFile(filepath.Join(dir, "base.pb"))
	if err != nil {
		return err
	}
	base := &snapshotv1.OutputSnapshot{}
	if err := proto.Unmarshal(raw, base); err != nil {
		return err
	}
	raw = nil
	recv.Hold(base)
	if !s.Apply(ctx, base) {
		return errors.New("the first apply failed")
	}
	first := time.Since(start)
	// The agent's loop takes the view's changes after each apply
	// (Syncer.observe): what its own writes changed.
	a.TakeChanges()
	fmt.Fprintf(out, "first-apply-s %f\nfirst-apply-cpu-s %f\nfirst-apply-peak-heap-B %d\n", first.Seconds(), cpuSeconds(), peak())
	// For a look at what the agent holds after the first apply, and (with
	// the suffix .edits) what the edits allocated since.
	heapProfile := func(suffix string) error {
		path := os.Getenv(applyChildEnv + "_HEAP")
		if path == "" {
			return nil
		}
		f, err := os.Create(path + suffix)
		if err != nil {
			return err
		}
		runtime.GC()
		return errors.Join(pprof.WriteHeapProfile(f), f.Close())
	}
	if err := heapProfile(""); err != nil {
		return err
	}
	n := len(base.GetObjects())
	base = nil

	// (b) The edits, as deltas, back and forth.
	var wire [2][]byte
	for i := range wire {
		if wire[i], err = os.ReadFile(filepath.Join(dir, fmt.Sprintf("delta%d.pb", i))); err != nil {
			return err
		}
	}
	if path := os.Getenv(applyChildEnv + "_CPU"); path != "" {
		// Where the edits' CPU goes.
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	var lat []time.Duration
	gcs := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(gcs)
	gc0 := gcs[0].Value.Uint64()
	peak = samplePeakHeap()
	for i := range benchEdits {
		start := time.Now()
		d := &snapshotv1.OutputDelta{}
		if err := proto.Unmarshal(wire[i%2], d); err != nil {
			return err
		}
		snap, err := recv.Apply(d)
		if err != nil {
			return fmt.Errorf("edit %d: %w", i, err)
		}
		if !s.Apply(ctx, snap) {
			return fmt.Errorf("edit %d: the apply failed", i)
		}
		a.TakeChanges()
		for _, want := range domain.Desire(d.GetObjects(), install, string(cluster)) {
			got, err := readDigestOf(ctx, dyn, want.Key)
			if err != nil {
				return err
			}
			if got != want.Digest {
				return fmt.Errorf("edit %d: %s has digest %q, want %q", i, want.Key, got, want.Digest)
			}
		}
		lat = append(lat, time.Since(start))
	}
	editsPeak := peak()
	metrics.Read(gcs)
	if err := heapProfile(".edits"); err != nil {
		return err
	}
	slices.Sort(lat)
	fmt.Fprintf(out, "edits-gc-cycles %d\nedits-peak-heap-B %d\n", gcs[0].Value.Uint64()-gc0, editsPeak)
	fmt.Fprintf(out, "objects %d\nedit-p50-ms %f\nedit-p99-ms %f\nVmHWM-B %d\n", n, ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), procVmHWM())
	return nil
}

// discardRelay acknowledges as the agent's relay does: it keeps nothing
// of the results (connectrpc.Relay sends counts and the non-APPLIED ones).
type discardRelay struct{ ackRelay }

func (*discardRelay) Ack(context.Context, string, []*snapshotv1.ApplyResult) error { return nil }

// newMapper returns a REST mapper that discovers the API server's kinds
// when first asked, as the agent's does at its start.
func newMapper(cfg *rest.Config) (meta.RESTMapper, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), nil
}

func readDigestOf(ctx context.Context, dyn dynamic.Interface, k domain.ObjectKey) (string, error) {
	for _, ok := range outputKinds {
		if ok.kind == k.Kind {
			u, err := dyn.Resource(ok.gvr).Namespace(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return u.GetAnnotations()[snapshots.AnnotationDigest], nil
		}
	}
	return "", fmt.Errorf("no output kind %s", k.Kind)
}

// cpuSeconds is the CPU time this process used so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// procCPUSeconds is the CPU time process pid used so far, from
// /proc/<pid>/stat (utime and stime, in clock ticks of 1/100 s).
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces.
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(utime+stime) / 100, nil
}

// childMetrics reads the child's "<name> <value>" lines, calling at(name)
// as each arrives.
func childMetrics(r io.Reader, at func(name string)) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue // the test binary's own output
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		out[name] = v
		at(name)
	}
	return out, sc.Err()
}
