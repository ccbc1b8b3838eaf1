package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/test/e2e/harness"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	accessPolicies        = schema.GroupVersionResource{Group: "networking.meshplane.dev", Version: "v1", Resource: "accesspolicies"}
	virtualMeshes         = schema.GroupVersionResource{Group: "networking.meshplane.dev", Version: "v1", Resource: "virtualmeshes"}
	authorizationPolicies = schema.GroupVersionResource{Group: "security.istio.io", Version: "v1", Resource: "authorizationpolicies"}
)

// The fault-sequence test's knobs. The seed replays a sequence: the steps
// and every random choice in them (which policy, which edit, which agent,
// how long a pause) are drawn from it in order and depend on nothing else,
// so the same seed gives the same sequence; how far it gets within the
// duration depends on the machine's speed.
const (
	// envFaultSeqSeed is the seed, a decimal uint64. Unset, it is taken
	// from the clock, so that every run explores another sequence; the
	// seed is logged first and named in every failure.
	envFaultSeqSeed = "MESHPLANE_FAULTSEQ_SEED"
	// envFaultSeqDuration is how long steps are started, e.g. 20m for a
	// soak (give go test a -timeout to match). Default 150 s.
	envFaultSeqDuration = "MESHPLANE_FAULTSEQ_DURATION"
	// envFaultSeqSteps is the most steps run. Default 80.
	envFaultSeqSteps = "MESHPLANE_FAULTSEQ_STEPS"
)

// fsSettle bounds every wait for the estate to settle after a step: a
// restart with an agent down spends the safe-start window (10 s) before
// anything is published, and the machine is shared.
const fsSettle = 120 * time.Second

// TestFaultSequenceNeverDeletesWorkingConfig is issue 13's fault-sequence
// test. A real estate (management, east and west API servers, Redis, the
// all-in-one plane with last valid versions kept in the management
// cluster, an agent per workload cluster, bookinfo and an istiod in each)
// holds TrafficPolicies and AccessPolicies in east, west and the
// management cluster, and a VirtualMesh that enables global access. A
// seeded random sequence of steps then edits them (valid edits, dangling
// references, durations that do not decode, values out of range), creates
// policies that were never valid, deletes policies, and restarts things:
// the plane (crash or stop), the plane with Redis flushed, an agent, an
// agent down for a while, the plane with Redis flushed while an agent is
// down. An edit is sometimes overlapped by a fault before it settled.
//
// Meanwhile a goroutine reads both workload clusters' API servers every
// 200 ms, and the test after every step: every Istio object made by a
// policy that was once ACCEPTED and not deleted since is there, with the
// UID it had when recorded (so it was not deleted and made again). Each
// step also waits for its own outcome: a valid edit ACCEPTED for its
// generation with its objects showing it; an invalid one INVALID for its
// generation, naming the field, with lastKnownGood exactly when the policy
// was accepted before, and its objects still showing the last valid
// version; a policy that was never valid has no objects; a deleted one's
// objects go. At the end, with every fault over, everything has converged.
func TestFaultSequenceNeverDeletesWorkingConfig(t *testing.T) {
	harness.RequireE2E(t)
	cfg := faultSeqConfigFromEnv(t)
	t.Logf("fault sequence: seed %d, up to %d steps for %s; replay with %s=%d", cfg.seed, cfg.steps, cfg.duration, envFaultSeqSeed, cfg.seed)

	d := startDurablePlane(t)
	ctx := t.Context()
	for _, c := range []*kubetest.Cluster{d.east, d.west} {
		if err := c.ApplyYAML(ctx, harness.IstioControlPlane("", "1.24.0", "cluster.local")); err != nil {
			t.Fatalf("apply istiod to %s: %v", c.Name, err)
		}
	}
	// East's and west's policies select both clusters' services.
	grantScope(t, d.mgmt, d.procs(), "east", "west")
	if err := d.mgmt.ApplyYAML(ctx, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: bookinfo}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: meshplane-config}\n")); err != nil {
		t.Fatal(err)
	}

	f := newFaultSeq(t, d, cfg.seed)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	f.ctx = runCtx
	f.inv.cancel = stop

	// The starting estate: every policy but tp-productpage holds a valid
	// version.
	for _, s := range f.slots {
		if s.name == "tp-productpage" {
			continue
		}
		st := f.planEdit(s, editValid, "setup: ")
		f.run(0, st)
		f.settle(0, st)
	}
	clear(f.taken)

	checker := make(chan struct{})
	go func() {
		defer close(checker)
		f.inv.watch(runCtx, 200*time.Millisecond)
	}()
	// Also when a step fails the test: the checker reads no cluster after
	// it ended.
	defer func() {
		stop()
		<-checker
	}()

	end := time.Now().Add(cfg.duration)
	if dl, ok := t.Deadline(); ok && dl.Add(-4*time.Minute).Before(end) {
		// Leave the final convergence its time, and say so.
		end = dl.Add(-4 * time.Minute)
		t.Logf("fault sequence: the test's deadline %s cuts the fault period to end at %s", dl.Format(time.TimeOnly), end.Format(time.TimeOnly))
	}
	n := 0
	for n < cfg.steps && time.Now().Before(end) {
		n++
		first := f.plan(f.drawStep())
		f.run(n, first)
		if first.edit && f.rng.Float64() < 0.3 {
			// The edit is still on its way through ingest, translation
			// and the agents when a fault lands.
			after := time.Duration(f.rng.IntN(400)) * time.Millisecond
			fault := f.plan(f.drawFault())
			fault.desc = fmt.Sprintf("%s later, before it settled: %s", after, fault.desc)
			if err := f.pause(after); err != nil {
				f.fail(n, err)
			}
			f.run(n, fault)
			f.overlaps++
			f.settle(n, first)
			f.settle(n, fault)
		} else {
			f.settle(n, first)
		}
		if err := f.checkNow(); err != nil {
			f.fail(n, err)
		}
		// A short random pause between steps varies where the next one
		// lands relative to the plane's and agents' debounce (50 ms),
		// resyncs and reconnect backoff; the invariant is read meanwhile.
		if err := f.pause(time.Duration(f.rng.IntN(1000)) * time.Millisecond); err != nil {
			f.fail(n, err)
		}
	}

	// Every fault is over and every agent is up: everything converges.
	if err := f.converged(); err != nil {
		f.fail(n+1, fmt.Errorf("after the last step: %w", err))
	}
	stop()
	<-checker
	if v := f.inv.failure(); v != "" {
		t.Fatal(v)
	}
	f.ctx = ctx
	if err := f.checkNow(); err != nil {
		f.fail(n+1, err)
	}
	t.Logf("fault sequence: seed %d, %d steps in %s (%s; %d edits overlapped by a fault), the invariant read %d times (%d reads failed and were retried); steps:\n%s",
		cfg.seed, n, time.Since(f.start).Round(time.Second), f.counts(), f.overlaps, f.inv.reads, f.inv.readErrors, f.inv.steps())
}

type faultSeqConfig struct {
	seed     uint64
	duration time.Duration
	steps    int
}

func faultSeqConfigFromEnv(t *testing.T) faultSeqConfig {
	t.Helper()
	cfg := faultSeqConfig{seed: uint64(time.Now().UnixNano()), duration: 150 * time.Second, steps: 80}
	if v := os.Getenv(envFaultSeqSeed); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a decimal uint64: %v", envFaultSeqSeed, v, err)
		}
		cfg.seed = seed
	}
	if v := os.Getenv(envFaultSeqDuration); v != "" {
		dur, err := time.ParseDuration(v)
		if err != nil || dur <= 0 {
			t.Fatalf("%s=%q: want a positive duration such as 10m", envFaultSeqDuration, v)
		}
		cfg.duration = dur
	}
	if v := os.Getenv(envFaultSeqSteps); v != "" {
		steps, err := strconv.Atoi(v)
		if err != nil || steps <= 0 {
			t.Fatalf("%s=%q: want a positive number of steps", envFaultSeqSteps, v)
		}
		cfg.steps = steps
	}
	return cfg
}

// editKind is a kind of edit to a policy.
type editKind int

const (
	editValid editKind = iota
	editDangling
	editUndecodable
	editOutOfRange
)

var editNames = map[editKind]string{editValid: "valid", editDangling: "dangling-reference", editUndecodable: "undecodable", editOutOfRange: "out-of-range"}

// fsSlot is one policy of the estate and what the test did to it.
type fsSlot struct {
	kind      string // TrafficPolicy, AccessPolicy or VirtualMesh
	gvr       schema.GroupVersionResource
	home      *kubetest.Cluster // the API server it is applied to
	namespace string
	name      string
	// makes is the Istio kind it makes, in each of targets.
	makes   schema.GroupVersionResource
	targets []*kubetest.Cluster
	// fixed are the spec lines every version shares: what it selects, so
	// that a valid edit changes its objects' content but never which
	// objects it has.
	fixed string
	// version returns the spec lines of an edit of kind k and what it
	// must show: for a valid edit a marker its objects' specs hold while
	// it is in force, for an invalid one a part of the errors its status
	// must name. ok is false when that edit does not apply to the slot.
	version func(r *rand.Rand, k editKind, s *fsSlot) (lines, want string, ok bool)
	// deletable is false for the VirtualMesh: the AccessPolicies take
	// effect only in its meshes, so deleting it removes their objects.
	deletable bool

	// The model.
	exists   bool
	valid    bool // the current version is valid
	accepted bool // a version was ACCEPTED since the slot was created
	marker   string
}

// can reports whether an edit of kind k applies to s. It draws from a
// generator of its own, so that asking leaves the sequence as it is.
func (s *fsSlot) can(k editKind) bool {
	_, _, ok := s.version(rand.New(rand.NewPCG(0, 0)), k, s)
	return ok
}

func (s *fsSlot) String() string {
	return fmt.Sprintf("%s %s/%s in %s", s.kind, s.namespace, s.name, s.home.Name)
}

func (s *fsSlot) manifest(lines string) []byte {
	return []byte(fmt.Sprintf("apiVersion: networking.meshplane.dev/v1\nkind: %s\nmetadata: {name: %s, namespace: %s}\nspec:\n%s%s", s.kind, s.name, s.namespace, s.fixed, lines))
}

// trafficVersion makes TrafficPolicy versions: retries, a mirror to a
// service that does not exist, a per-try timeout that passes the CRD's
// pattern but does not decode, negative attempts.
func trafficVersion(r *rand.Rand, k editKind, s *fsSlot) (string, string, bool) {
	n := 1 + r.IntN(9)
	for s.marker == attemptsMarker(n) {
		n = 1 + r.IntN(9)
	}
	switch k {
	case editValid:
		return fmt.Sprintf("  policy:\n    retries: {attempts: %d, perTryTimeout: %ds}\n", n, 1+r.IntN(5)), attemptsMarker(n), true
	case editDangling:
		return fmt.Sprintf("  policy:\n    retries: {attempts: %d, perTryTimeout: 2s}\n    mirror: {kubeService: {name: nosuch-%d}, percentage: 10}\n", n, r.IntN(100)),
			"spec.policy.mirror.kubeService: service nosuch-", true
	case editUndecodable:
		return fmt.Sprintf("  policy:\n    retries: {attempts: %d, perTryTimeout: 99999999999999s}\n", n), "spec.policy.retries.perTryTimeout: does not decode", true
	case editOutOfRange:
		return fmt.Sprintf("  policy:\n    retries: {attempts: -%d, perTryTimeout: 2s}\n", n), "spec.policy.retries.attempts: must be >= 0", true
	}
	return "", "", false
}

func attemptsMarker(n int) string { return fmt.Sprintf(`"attempts":%d`, n) }

// accessMethods are the allowed methods of valid AccessPolicy versions,
// sorted as the AuthorizationPolicy holds them.
var accessMethods = [][]string{{"GET"}, {"GET", "HEAD"}, {"GET", "POST"}, {"HEAD", "PUT"}, {"DELETE", "GET", "POST"}}

// accessVersion makes AccessPolicy versions: allowed methods, a port out
// of range, a method that is not one. An AccessPolicy refers to nothing
// that can dangle and has no field that can fail to decode.
func accessVersion(r *rand.Rand, k editKind, s *fsSlot) (string, string, bool) {
	methods := accessMethods[r.IntN(len(accessMethods))]
	for s.marker == methodsMarker(methods) {
		methods = accessMethods[r.IntN(len(accessMethods))]
	}
	list := "[" + strings.Join(methods, ", ") + "]"
	switch k {
	case editValid:
		return "  allowedMethods: " + list + "\n", methodsMarker(methods), true
	case editOutOfRange:
		if r.IntN(2) == 0 {
			return fmt.Sprintf("  allowedMethods: %s\n  allowedPorts: [%d]\n", list, 65536+r.IntN(10000)), "spec.allowedPorts[0]: must be between 1 and 65535", true
		}
		return "  allowedMethods: [FETCH]\n", `spec.allowedMethods[0]: "FETCH" is not an HTTP method`, true
	}
	return "", "", false
}

func methodsMarker(methods []string) string {
	b, _ := json.Marshal(methods)
	return `"methods":` + string(b)
}

// meshVersion makes VirtualMesh versions: the two meshes, or the two and
// one that does not exist. Its objects (the global AuthorizationPolicy of
// each mesh) do not change between valid versions, so there is one.
func meshVersion(r *rand.Rand, k editKind, s *fsSlot) (string, string, bool) {
	const meshes = "  meshes:\n  - {name: istiod-istio-system-east, namespace: istio-system}\n  - {name: istiod-istio-system-west, namespace: istio-system}\n"
	switch k {
	case editValid:
		return meshes, "", !s.valid
	case editDangling:
		return fmt.Sprintf("%s  - {name: nosuch-%d, namespace: istio-system}\n", meshes, r.IntN(100)), "spec.meshes[2]", true
	}
	return "", "", false
}

// fsStep is one planned step: what it does and how it settles.
type fsStep struct {
	kind   stepKind
	desc   string
	edit   bool // an edit of a policy, which a fault may overlap
	do     func() error
	settle func() error
}

type stepKind int

const (
	stepValidEdit stepKind = iota
	stepDanglingEdit
	stepUndecodableEdit
	stepOutOfRangeEdit
	stepCreateNeverValid
	stepDelete
	stepPlaneRestart
	stepRedisLossRestart
	stepAgentRestart
	stepAgentDown
	stepRedisLossAgentDown
)

var stepNames = map[stepKind]string{
	stepValidEdit: "valid edit", stepDanglingEdit: "dangling-reference edit", stepUndecodableEdit: "undecodable edit",
	stepOutOfRangeEdit: "out-of-range edit", stepCreateNeverValid: "new never-valid policy", stepDelete: "delete",
	stepPlaneRestart: "plane restart", stepRedisLossRestart: "Redis flushed + plane restart", stepAgentRestart: "agent restart",
	stepAgentDown: "agent down a while", stepRedisLossAgentDown: "Redis flushed + plane restart with an agent down",
}

// stepWeights are the odds of each step; edits are the most common.
var stepWeights = []struct {
	kind   stepKind
	weight int
}{
	{stepValidEdit, 5}, {stepDanglingEdit, 2}, {stepUndecodableEdit, 2}, {stepOutOfRangeEdit, 2},
	{stepCreateNeverValid, 2}, {stepDelete, 2},
	{stepPlaneRestart, 2}, {stepRedisLossRestart, 2}, {stepAgentRestart, 2}, {stepAgentDown, 1}, {stepRedisLossAgentDown, 1},
}

func isFault(k stepKind) bool { return k >= stepPlaneRestart }

type faultSeq struct {
	t     *testing.T
	d     *durablePlane
	seed  uint64
	rng   *rand.Rand
	ctx   context.Context // ends when the invariant breaks
	slots []*fsSlot
	inv   *invariant
	start time.Time
	taken map[stepKind]int
	// overlaps counts the edits a fault overlapped.
	overlaps int
}

func newFaultSeq(t *testing.T, d *durablePlane, seed uint64) *faultSeq {
	f := &faultSeq{t: t, d: d, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), start: time.Now(), taken: map[stepKind]int{}}
	f.inv = &invariant{seed: seed, held: map[*fsSlot][]heldObject{}, clusters: []*kubetest.Cluster{d.east, d.west}}
	both := []*kubetest.Cluster{d.east, d.west}
	ns := harness.BookinfoNamespace
	// The VirtualMesh comes first: AccessPolicies take effect only in
	// the meshes of one that enables global access.
	f.slots = []*fsSlot{
		{kind: "VirtualMesh", gvr: virtualMeshes, home: d.mgmt, namespace: "meshplane-config", name: "vm-global", makes: authorizationPolicies, targets: both,
			fixed: "  globalAccessPolicy: ENABLED\n", version: meshVersion},
		{kind: "TrafficPolicy", gvr: trafficPolicies, home: d.east, namespace: ns, name: "tp-reviews", makes: virtualServices, targets: both, deletable: true,
			fixed: "  destinationSelector:\n  - kubeServiceMatcher: {labels: {app: reviews}, namespaces: [bookinfo]}\n", version: trafficVersion},
		{kind: "TrafficPolicy", gvr: trafficPolicies, home: d.west, namespace: ns, name: "tp-ratings", makes: virtualServices, targets: []*kubetest.Cluster{d.west}, deletable: true,
			fixed: "  destinationSelector:\n  - kubeServiceRefs: {services: [{name: ratings, namespace: bookinfo, cluster: west}]}\n", version: trafficVersion},
		{kind: "TrafficPolicy", gvr: trafficPolicies, home: d.mgmt, namespace: ns, name: "tp-details", makes: virtualServices, targets: both, deletable: true,
			fixed: "  destinationSelector:\n  - kubeServiceMatcher: {labels: {app: details}, namespaces: [bookinfo]}\n", version: trafficVersion},
		{kind: "TrafficPolicy", gvr: trafficPolicies, home: d.east, namespace: ns, name: "tp-productpage", makes: virtualServices, targets: []*kubetest.Cluster{d.east}, deletable: true,
			fixed: "  destinationSelector:\n  - kubeServiceRefs: {services: [{name: productpage, namespace: bookinfo, cluster: east}]}\n", version: trafficVersion},
		{kind: "AccessPolicy", gvr: accessPolicies, home: d.east, namespace: ns, name: "ap-reviews", makes: authorizationPolicies, targets: both, deletable: true,
			fixed: "  sourceSelector:\n  - kubeServiceAccountRefs:\n      serviceAccounts:\n      - {name: bookinfo-productpage, namespace: bookinfo, cluster: east}\n      - {name: bookinfo-productpage, namespace: bookinfo, cluster: west}\n" +
				"  destinationSelector:\n  - kubeServiceMatcher: {labels: {app: reviews}, namespaces: [bookinfo]}\n", version: accessVersion},
		{kind: "AccessPolicy", gvr: accessPolicies, home: d.west, namespace: ns, name: "ap-ratings", makes: authorizationPolicies, targets: []*kubetest.Cluster{d.west}, deletable: true,
			fixed: "  sourceSelector:\n  - kubeServiceAccountRefs:\n      serviceAccounts: [{name: bookinfo-reviews, namespace: bookinfo, cluster: west}]\n" +
				"  destinationSelector:\n  - kubeServiceRefs: {services: [{name: ratings, namespace: bookinfo, cluster: west}]}\n", version: accessVersion},
	}
	return f
}

// drawStep draws a step that applies to the estate as it is.
func (f *faultSeq) drawStep() (stepKind, *fsSlot) {
	total := 0
	for _, w := range stepWeights {
		total += w.weight
	}
	for {
		n := f.rng.IntN(total)
		var kind stepKind
		for _, w := range stepWeights {
			if n < w.weight {
				kind = w.kind
				break
			}
			n -= w.weight
		}
		if isFault(kind) {
			return kind, nil
		}
		var fits []*fsSlot
		for _, s := range f.slots {
			if f.applies(kind, s) {
				fits = append(fits, s)
			}
		}
		if len(fits) > 0 {
			return kind, fits[f.rng.IntN(len(fits))]
		}
	}
}

// drawFault draws a fault step.
func (f *faultSeq) drawFault() (stepKind, *fsSlot) {
	for {
		if k, _ := f.drawStep(); isFault(k) {
			return k, nil
		}
	}
}

func (f *faultSeq) applies(kind stepKind, s *fsSlot) bool {
	switch kind {
	case stepValidEdit:
		return s.can(editValid)
	case stepDanglingEdit, stepUndecodableEdit, stepOutOfRangeEdit:
		return s.exists && s.can(stepEdit(kind))
	case stepCreateNeverValid:
		return !s.exists
	case stepDelete:
		return s.exists && s.deletable
	}
	return false
}

func stepEdit(kind stepKind) editKind {
	switch kind {
	case stepDanglingEdit:
		return editDangling
	case stepUndecodableEdit:
		return editUndecodable
	case stepOutOfRangeEdit:
		return editOutOfRange
	}
	return editValid
}

func (f *faultSeq) plan(kind stepKind, s *fsSlot) *fsStep {
	var st *fsStep
	switch kind {
	case stepValidEdit, stepDanglingEdit, stepUndecodableEdit, stepOutOfRangeEdit:
		st = f.planEdit(s, stepEdit(kind), "")
	case stepCreateNeverValid:
		var kinds []editKind
		for _, k := range []editKind{editDangling, editUndecodable, editOutOfRange} {
			if s.can(k) {
				kinds = append(kinds, k)
			}
		}
		st = f.planEdit(s, kinds[f.rng.IntN(len(kinds))], "new never-valid policy: ")
	case stepDelete:
		st = f.planDelete(s)
	case stepPlaneRestart:
		kill := f.rng.IntN(2) == 0
		st = &fsStep{desc: fmt.Sprintf("plane restart (%s)", map[bool]string{true: "killed", false: "stopped"}[kill]), do: func() error {
			return f.d.plane.Restart(f.ctx, kill, nil)
		}}
	case stepRedisLossRestart:
		st = &fsStep{desc: "Redis FLUSHALL while the plane is down (killed)", do: func() error {
			return f.d.plane.Restart(f.ctx, true, f.flushRedis)
		}}
	case stepAgentRestart:
		c, kill := f.drawCluster(), f.rng.IntN(2) == 0
		st = &fsStep{desc: fmt.Sprintf("agent restart in %s (%s)", c.Name, map[bool]string{true: "killed", false: "stopped"}[kill]), do: func() error {
			f.stopAgent(c, kill)
			f.d.startAgent(c)
			return nil
		}}
	case stepAgentDown:
		c, down := f.drawCluster(), time.Second+time.Duration(f.rng.IntN(5000))*time.Millisecond
		st = &fsStep{desc: fmt.Sprintf("agent of %s down for %s", c.Name, down), do: func() error {
			f.stopAgent(c, true)
			if err := f.pause(down); err != nil {
				return err
			}
			f.d.startAgent(c)
			return nil
		}}
	case stepRedisLossAgentDown:
		// Down for up to 15 s: sometimes longer than the safe-start
		// window (10 s), so that the other cluster gets outputs built
		// without this one's input, and holds their deletions.
		c, down := f.drawCluster(), 2*time.Second+time.Duration(f.rng.IntN(13000))*time.Millisecond
		st = &fsStep{desc: fmt.Sprintf("agent of %s down; Redis FLUSHALL and plane restart; agent back after %s", c.Name, down), do: func() error {
			f.stopAgent(c, true)
			if err := f.d.plane.Restart(f.ctx, true, f.flushRedis); err != nil {
				return err
			}
			if err := f.pause(down); err != nil {
				return err
			}
			f.d.startAgent(c)
			return nil
		}}
	}
	st.kind = kind
	if st.settle == nil {
		st.settle = f.healthy
	}
	return st
}

func (f *faultSeq) drawCluster() *kubetest.Cluster {
	return []*kubetest.Cluster{f.d.east, f.d.west}[f.rng.IntN(2)]
}

func (f *faultSeq) stopAgent(c *kubetest.Cluster, kill bool) {
	if kill {
		f.d.agents[c.Name].Kill()
	} else {
		f.d.agents[c.Name].Stop()
	}
}

func (f *faultSeq) flushRedis() error {
	return f.d.redis.Client(f.t).FlushAll(f.ctx).Err()
}

// planEdit plans an edit of s (which creates it when absent).
func (f *faultSeq) planEdit(s *fsSlot, k editKind, prefix string) *fsStep {
	lines, want, _ := s.version(f.rng, k, s)
	verb := "edit"
	if !s.exists {
		verb = "create"
	}
	desc := fmt.Sprintf("%s%s %s of %s", prefix, editNames[k], verb, s)
	if k == editValid && want != "" {
		desc += " (" + want + ")"
	}
	st := &fsStep{desc: desc, edit: true}
	var gen int64
	var lkg bool
	st.do = func() error {
		if err := s.home.ApplyYAML(f.ctx, s.manifest(lines)); err != nil {
			return err
		}
		u, err := s.home.Dynamic().Resource(s.gvr).Namespace(s.namespace).Get(f.ctx, s.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		gen = u.GetGeneration()
		s.exists, s.valid = true, k == editValid
		lkg = s.accepted
		return nil
	}
	if k == editValid {
		st.settle = func() error { return f.settleAccepted(s, gen, want) }
	} else {
		st.settle = func() error { return f.settleInvalid(s, gen, want, lkg) }
	}
	return st
}

func (f *faultSeq) planDelete(s *fsSlot) *fsStep {
	return &fsStep{desc: "delete " + s.String(), edit: true, do: func() error {
		// Its objects may go from here on.
		f.inv.release(s)
		s.exists, s.valid, s.accepted, s.marker = false, false, false, ""
		return s.home.Dynamic().Resource(s.gvr).Namespace(s.namespace).Delete(f.ctx, s.name, metav1.DeleteOptions{})
	}, settle: func() error {
		// Only deleting a policy removes what it made: here it does.
		return f.wait("the objects of deleted "+s.String()+" to go", func(ctx context.Context) (bool, error) {
			objs, err := f.objectsOf(ctx, s, f.inv.clusters)
			return len(objs) == 0, err
		})
	}}
}

// run logs a step and does it.
func (f *faultSeq) run(n int, st *fsStep) {
	f.t.Helper()
	f.inv.log(n, time.Since(f.start), st.desc)
	f.taken[st.kind]++
	if err := st.do(); err != nil {
		f.fail(n, fmt.Errorf("%s: %w", st.desc, err))
	}
}

func (f *faultSeq) settle(n int, st *fsStep) {
	f.t.Helper()
	if err := st.settle(); err != nil {
		f.fail(n, fmt.Errorf("%s: %w", st.desc, err))
	}
}

// fail ends the test with the broken invariant when there is one (the
// step's error is then its consequence), else with err; either way with
// the seed and the steps so far.
func (f *faultSeq) fail(n int, err error) {
	f.t.Helper()
	if v := f.inv.failure(); v != "" {
		f.t.Fatal(v)
	}
	f.t.Fatalf("fault sequence, seed %d, step #%d: %v\nsteps so far:\n%s\n%s", f.seed, n, err, f.inv.steps(), f.inv.replay())
}

// pause waits for d, or until the invariant breaks.
func (f *faultSeq) pause(d time.Duration) error {
	select {
	case <-f.ctx.Done():
		return f.ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// checkNow checks the invariant once more, retrying reads that fail.
func (f *faultSeq) checkNow() error {
	return harness.Wait(f.ctx, 30*time.Second, "a read of both clusters for the invariant", func(ctx context.Context) (bool, error) {
		err := f.inv.check(ctx)
		return err == nil, err
	})
}

func (f *faultSeq) wait(what string, cond func(context.Context) (bool, error)) error {
	return harness.Wait(f.ctx, fsSettle, what, cond, f.d.procs()...)
}

// healthy waits until the plane is out of safe mode with every expected
// input, and both agents push, watch, and are not behind, with no apply
// error and no held deletion.
//
// It reads meshctl check, but not its verdict: after Redis lost the acks,
// an agent that already holds the output the restarted plane publishes
// again is sent nothing and so acks nothing, and check reports it "pull
// disconnected, applied -" (and fails) until its output next changes.
// The watch itself is read from distribution's gauge instead.
func (f *faultSeq) healthy() error {
	var last string
	err := f.wait("the plane and both agents connected and settled", func(ctx context.Context) (bool, error) {
		rep, out, err := f.d.check(ctx)
		last = out
		if rep.SafeMode == nil {
			return false, fmt.Errorf("meshctl check: %v", err)
		}
		if rep.SafeMode.On || len(rep.SafeMode.Missing) > 0 {
			return false, nil
		}
		for _, c := range []*kubetest.Cluster{f.d.east, f.d.west} {
			i := slices.IndexFunc(rep.Clusters, func(cc checkCluster) bool { return cc.Cluster == c.Name })
			if i < 0 {
				return false, nil
			}
			cc := rep.Clusters[i]
			if cc.Push != "connected" || cc.Applied == "behind" || cc.ApplyErrors > 0 || cc.HeldDeletions > 0 {
				return false, nil
			}
			watching, err := metric(ctx, f.d.plane.Admin, fmt.Sprintf(`meshplane_distribution_pull_clients_connected{cluster=%q}`, c.Name))
			if err != nil || watching != "1" {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w; last check:\n%s", err, last)
	}
	return nil
}

// status waits until s's status is for generation gen and ok accepts it.
func (f *faultSeq) status(s *fsSlot, gen int64, what string, ok func(*policyStatus) bool) error {
	var last *policyStatus
	err := f.wait(fmt.Sprintf("%s: %s at generation %d", s, what, gen), func(ctx context.Context) (bool, error) {
		st, err := readStatus(ctx, s.home, s.gvr, s.namespace, s.name)
		if err != nil {
			return false, err
		}
		last = st
		return st.generation == gen && st.ObservedGeneration == fmt.Sprint(gen) && ok(st), nil
	})
	if err != nil {
		return fmt.Errorf("%w; last status %+v", err, last)
	}
	return nil
}

// settleAccepted waits until the valid version gen of s is ACCEPTED and
// its objects show it in every target cluster, then holds them to the
// invariant.
func (f *faultSeq) settleAccepted(s *fsSlot, gen int64, marker string) error {
	err := f.status(s, gen, "ACCEPTED", func(st *policyStatus) bool { return st.State == "ACCEPTED" && !st.LastKnownGood })
	if err != nil {
		return err
	}
	var objs []heldObject
	err = f.wait(fmt.Sprintf("the objects of %s to show generation %d (%s)", s, gen, marker), func(ctx context.Context) (bool, error) {
		var err error
		objs, err = f.showing(ctx, s, marker)
		return err == nil, err
	})
	if err != nil {
		return err
	}
	s.accepted, s.marker = true, marker
	f.inv.hold(s, objs)
	return nil
}

// settleInvalid waits until the invalid version gen of s is reported
// INVALID naming want, with lastKnownGood when s was accepted before; then
// its objects still show the last valid version, or, when there was none,
// it has no objects.
func (f *faultSeq) settleInvalid(s *fsSlot, gen int64, want string, lkg bool) error {
	err := f.status(s, gen, fmt.Sprintf("INVALID naming %q, lastKnownGood %t", want, lkg), func(st *policyStatus) bool {
		return st.State == "INVALID" && st.LastKnownGood == lkg && strings.Contains(strings.Join(st.Errors, "\n"), want)
	})
	if err != nil {
		return err
	}
	return f.inForce(f.ctx, s)
}

// inForce checks, without waiting, that s's objects show the version in
// force: the last valid one's marker in every target cluster, or no
// objects at all when s has never been accepted.
func (f *faultSeq) inForce(ctx context.Context, s *fsSlot) error {
	if !s.accepted {
		objs, err := f.objectsOf(ctx, s, f.inv.clusters)
		if err != nil {
			return err
		}
		if len(objs) > 0 {
			return fmt.Errorf("%s was never valid, yet it has objects: %v", s, objs)
		}
		return nil
	}
	if _, err := f.showing(ctx, s, s.marker); err != nil {
		return fmt.Errorf("the last valid version of %s is not in force: %w", s, err)
	}
	return nil
}

// showing returns the objects of s when every target cluster has at least
// one and each shows marker, else an error saying what is not so.
func (f *faultSeq) showing(ctx context.Context, s *fsSlot, marker string) ([]heldObject, error) {
	objs, err := f.objectsOf(ctx, s, s.targets)
	if err != nil {
		return nil, err
	}
	var held []heldObject
	for _, c := range s.targets {
		n := 0
		for _, o := range objs {
			if o.cluster != c {
				continue
			}
			if !strings.Contains(o.spec, marker) {
				return nil, fmt.Errorf("%s %s/%s in %s does not show %s: %s", s.makes.Resource, o.namespace, o.name, c.Name, marker, o.spec)
			}
			n++
			held = append(held, o)
		}
		if n == 0 {
			return nil, fmt.Errorf("no %s of %s in %s", s.makes.Resource, s, c.Name)
		}
	}
	return held, nil
}

// objectsOf returns the objects of kind s.makes in clusters whose parents
// annotation names s.
func (f *faultSeq) objectsOf(ctx context.Context, s *fsSlot, clusters []*kubetest.Cluster) ([]heldObject, error) {
	var out []heldObject
	for _, c := range clusters {
		list, err := c.Dynamic().Resource(s.makes).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, u := range list.Items {
			if names(&u, s) {
				out = append(out, heldObject{cluster: c, gvr: s.makes, namespace: u.GetNamespace(), name: u.GetName(), uid: string(u.GetUID()), spec: specJSON(&u)})
			}
		}
	}
	return out, nil
}

// names reports whether u's parents annotation names s.
func names(u *unstructured.Unstructured, s *fsSlot) bool {
	var parents map[string][]struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	if err := json.Unmarshal([]byte(u.GetAnnotations()[snapshots.AnnotationParents]), &parents); err != nil {
		return false
	}
	for _, p := range parents["networking.meshplane.dev/v1, Kind="+s.kind] {
		if p.Name == s.name && p.Namespace == s.namespace {
			return true
		}
	}
	return false
}

// converged waits, with every fault over, until every policy is where the
// model says: a valid one ACCEPTED at its generation and its objects
// showing it, an invalid one INVALID with lastKnownGood exactly when it was
// once accepted and its last valid version in force, a deleted one gone
// with its objects.
func (f *faultSeq) converged() error {
	f.inv.log(-1, time.Since(f.start), "faults over: converge")
	if err := f.healthy(); err != nil {
		return err
	}
	for _, s := range f.slots {
		if !s.exists {
			err := f.wait("no objects of deleted "+s.String(), func(ctx context.Context) (bool, error) {
				objs, err := f.objectsOf(ctx, s, f.inv.clusters)
				return len(objs) == 0, err
			})
			if err != nil {
				return err
			}
			continue
		}
		u, err := s.home.Dynamic().Resource(s.gvr).Namespace(s.namespace).Get(f.ctx, s.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		gen := u.GetGeneration()
		if s.valid {
			err = f.status(s, gen, "ACCEPTED", func(st *policyStatus) bool { return st.State == "ACCEPTED" && !st.LastKnownGood })
		} else {
			err = f.status(s, gen, fmt.Sprintf("INVALID, lastKnownGood %t", s.accepted), func(st *policyStatus) bool {
				return st.State == "INVALID" && st.LastKnownGood == s.accepted
			})
		}
		if err != nil {
			return err
		}
		if err := f.inForce(f.ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func (f *faultSeq) counts() string {
	var parts []string
	for k := stepValidEdit; k <= stepRedisLossAgentDown; k++ {
		if f.taken[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", stepNames[k], f.taken[k]))
		}
	}
	return strings.Join(parts, ", ")
}

// heldObject is an Istio object as recorded when its policy was ACCEPTED.
type heldObject struct {
	cluster         *kubetest.Cluster
	gvr             schema.GroupVersionResource
	namespace, name string
	uid             string
	spec            string // when read; not compared by the invariant
}

func (o heldObject) String() string {
	return fmt.Sprintf("%s %s/%s (uid %s) in %s", o.gvr.Resource, o.namespace, o.name, o.uid, o.cluster.Name)
}

// invariant holds, for every policy that was ACCEPTED and not deleted
// since, the objects it had then, and checks that they are all still
// there with the same UIDs. It also keeps the step log its failures name.
type invariant struct {
	seed     uint64
	clusters []*kubetest.Cluster
	cancel   context.CancelFunc // called when the invariant breaks

	mu   sync.Mutex // held across a whole check, so that release is never raced
	held map[*fsSlot][]heldObject

	logMu      sync.Mutex
	lines      []string
	broken     string
	current    int
	reads      int
	readErrors int
}

func (iv *invariant) log(n int, at time.Duration, desc string) {
	iv.logMu.Lock()
	defer iv.logMu.Unlock()
	iv.current = n
	step := fmt.Sprintf("#%02d", n)
	if n < 0 {
		step = "end"
	}
	iv.lines = append(iv.lines, fmt.Sprintf("  %s %7.1fs  %s", step, at.Seconds(), desc))
}

func (iv *invariant) steps() string {
	iv.logMu.Lock()
	defer iv.logMu.Unlock()
	return strings.Join(iv.lines, "\n")
}

func (iv *invariant) replay() string {
	return fmt.Sprintf("replay: %s=%d go test ./test/e2e -run TestFaultSequence -count=1 -v", envFaultSeqSeed, iv.seed)
}

func (iv *invariant) failure() string {
	iv.logMu.Lock()
	defer iv.logMu.Unlock()
	return iv.broken
}

func (iv *invariant) hold(s *fsSlot, objs []heldObject) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	iv.held[s] = objs
}

func (iv *invariant) release(s *fsSlot) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	delete(iv.held, s)
}

// errInvariant marks a broken invariant; the failure message is kept.
var errInvariant = errors.New("the invariant broke")

// check reads every cluster once and compares. A read that fails is not
// a miss: it is counted and returned, and the next check reads again. A
// miss is errInvariant, after the failure is kept and the run's context
// canceled.
func (iv *invariant) check(ctx context.Context) error {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	type list struct {
		cluster *kubetest.Cluster
		gvr     schema.GroupVersionResource
	}
	present := map[list]map[string]string{}
	slots := make([]*fsSlot, 0, len(iv.held))
	for s := range iv.held {
		slots = append(slots, s)
	}
	slices.SortFunc(slots, func(a, b *fsSlot) int { return strings.Compare(a.name, b.name) })
	var misses []string
	for _, s := range slots {
		for _, o := range iv.held[s] {
			k := list{o.cluster, o.gvr}
			objs, ok := present[k]
			if !ok {
				l, err := o.cluster.Dynamic().Resource(o.gvr).List(ctx, metav1.ListOptions{})
				if err != nil {
					iv.logMu.Lock()
					iv.readErrors++
					iv.logMu.Unlock()
					return fmt.Errorf("list %s in %s: %w", o.gvr.Resource, o.cluster.Name, err)
				}
				objs = map[string]string{}
				for _, u := range l.Items {
					objs[u.GetNamespace()+"/"+u.GetName()] = string(u.GetUID())
				}
				present[k] = objs
			}
			switch uid, ok := objs[o.namespace+"/"+o.name]; {
			case !ok:
				misses = append(misses, fmt.Sprintf("%s of %s is missing from %s", o, s, o.cluster.Name))
			case uid != o.uid:
				misses = append(misses, fmt.Sprintf("%s of %s was deleted and made again in %s: its uid is now %s", o, s, o.cluster.Name, uid))
			}
		}
	}
	iv.logMu.Lock()
	defer iv.logMu.Unlock()
	iv.reads++
	if len(misses) == 0 {
		return nil
	}
	if iv.broken == "" {
		iv.broken = fmt.Sprintf("fault sequence, seed %d: during step #%02d, an object whose policy was ACCEPTED and never deleted since is gone:\n  %s\nsteps so far:\n%s\n%s",
			iv.seed, iv.current, strings.Join(misses, "\n  "), strings.Join(iv.lines, "\n"), iv.replay())
		iv.cancel()
	}
	return errInvariant
}

// watch checks every interval until ctx ends or the invariant breaks; a
// failed read is retried at the next tick.
func (iv *invariant) watch(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := iv.check(ctx); errors.Is(err, errInvariant) {
			return
		}
	}
}
