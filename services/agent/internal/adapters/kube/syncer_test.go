package kube

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The syncer and this adapter against a real API server: what the agent
// writes is counted by the API server itself (apiserver_request_total),
// which no client-side wrapper can miss.

// writeVerbs are the verbs of apiserver_request_total that write.
var writeVerbs = map[string]bool{"APPLY": true, "PATCH": true, "POST": true, "PUT": true, "DELETE": true, "DELETECOLLECTION": true}

// outputWrites returns the write requests the API server served on the
// output kinds' resources so far, by verb.
func outputWrites(t testing.TB, c *kubetest.Cluster) map[string]int {
	t.Helper()
	raw, err := c.Clientset().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("read the API server's metrics: %v", err)
	}
	resources := map[string]bool{}
	for _, k := range outputKinds {
		resources[k.gvr.Resource] = true
	}
	out := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, _ := strings.Cut(strings.TrimPrefix(line, "apiserver_request_total{"), "} ")
		var verb, resource string
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "verb":
				verb = v
			case "resource":
				resource = v
			}
		}
		if !writeVerbs[verb] || !resources[resource] {
			continue
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[verb] += int(n)
	}
	return out
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func diff(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// driftMetrics counts drift corrections.
type driftMetrics struct {
	app.NopMetrics
	mu    sync.Mutex
	drift map[string]int
}

func (m *driftMetrics) DriftCorrected(kind string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drift == nil {
		m.drift = map[string]int{}
	}
	m.drift[kind]++
}

func (m *driftMetrics) count(kind string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.drift[kind]
}

// streamRelay serves one snapshot on every watch and records the acks.
type streamRelay struct {
	snap *snapshotv1.OutputSnapshot
	acks chan []*snapshotv1.ApplyResult
}

func (r *streamRelay) OpenPush(context.Context) (app.PushStream, error) {
	return nil, fmt.Errorf("not used")
}
func (r *streamRelay) Watch(ctx context.Context, _ string) (app.WatchStream, error) {
	return &oneSnapshot{ctx: ctx, snap: r.snap}, nil
}
func (r *streamRelay) Ack(_ context.Context, _ string, results []*snapshotv1.ApplyResult) error {
	r.acks <- results
	return nil
}

type oneSnapshot struct {
	ctx  context.Context
	snap *snapshotv1.OutputSnapshot
	sent bool
}

func (s *oneSnapshot) Receive() (*snapshotv1.OutputSnapshot, error) {
	if !s.sent {
		s.sent = true
		return s.snap, nil
	}
	<-s.ctx.Done()
	return nil, s.ctx.Err()
}
func (s *oneSnapshot) Close() error { return nil }

// logBuffer is a log the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func drs(n int, host string) []*snapshotv1.Object {
	var out []*snapshotv1.Object
	for i := range n {
		out = append(out, dr(fmt.Sprintf("dr-%03d", i), fmt.Sprintf(`{"host":"svc-%03d.%s"}`, i, host)))
	}
	return out
}

func sealed(objs ...*snapshotv1.Object) *snapshotv1.OutputSnapshot {
	s := &snapshotv1.OutputSnapshot{Cluster: "east", Objects: objs}
	snapshots.SealOutput(s)
	return s
}

func newSyncer(t *testing.T, c *kubetest.Cluster, relay app.Relay, m app.Metrics, log io.Writer) (*app.Syncer, *Applier) {
	a := NewApplier(metadataClient(t, c), c.Mapper(), install, "east")
	if log == nil {
		log = io.Discard
	}
	s := app.NewSyncer(relay, a, m, slog.New(slog.NewTextHandler(log, nil)), app.WithApplyOptions(app.ApplyOptions{Install: install, Cluster: "east", Workers: 8}))
	return s, a
}

func outcomeCounts(results []*snapshotv1.ApplyResult) map[string]int {
	out := map[string]int{}
	for _, r := range results {
		out[strings.TrimPrefix(r.GetOutcome().String(), "APPLY_OUTCOME_")]++
	}
	return out
}

// TestSyncerRestartWritesNothing: a new agent that finds the output
// applied already writes nothing, and still reports a user's object of
// the same name as a conflict.
func TestSyncerRestartWritesNothing(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east"})
	createNamespace(t, c.Clientset(), ns)
	if err := c.ApplyYAML(t.Context(), []byte(`
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr-007, namespace: bookinfo}
spec: {host: user.example}
`)); err != nil {
		t.Fatal(err)
	}
	snap := sealed(drs(40, "first")...)

	ctx1, stop1 := context.WithCancel(t.Context())
	s1, _ := newSyncer(t, c, &ackRelay{}, nil, nil)
	if err := s1.Sync(ctx1); err != nil {
		t.Fatal(err)
	}
	s1.Apply(ctx1, snap)
	stop1() // the agent stops

	before := outputWrites(t, c)
	relay := &ackRelay{}
	s2, _ := newSyncer(t, c, relay, nil, nil)
	if err := s2.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	s2.Apply(t.Context(), snap)
	if w := diff(outputWrites(t, c), before); total(w) != 0 {
		t.Errorf("the restarted agent wrote %v, want nothing", w)
	}
	got := outcomeCounts(relay.acks[0])
	if got["APPLIED"] != 39 || got["CONFLICT"] != 1 || len(got) != 2 {
		t.Errorf("ack outcomes %v, want 39 APPLIED and 1 CONFLICT", got)
	}

	// One changed object: one write.
	edited := sealed(append(drs(39, "first"), dr("dr-039", `{"host":"svc-039.second"}`))...)
	before = outputWrites(t, c)
	s2.Apply(t.Context(), edited)
	if w := diff(outputWrites(t, c), before); total(w) != 1 || w["APPLY"] != 1 {
		t.Errorf("one changed object cost %v, want one APPLY", w)
	}
	if h := host(t, get(t, c.Dynamic(), drGVR, "dr-039")); h != "svc-039.second" {
		t.Errorf("dr-039 host %q after the edit", h)
	}
}

// TestSyncerPutsBackDrift: an owned object that someone edits or deletes
// is put back, counted and logged with who changed it; a user's object of
// the same name as a desired one is never touched.
func TestSyncerPutsBackDrift(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east"})
	createNamespace(t, c.Clientset(), ns)
	if err := c.ApplyYAML(t.Context(), []byte(`
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr-009, namespace: bookinfo}
spec: {host: user.example}
`)); err != nil {
		t.Fatal(err)
	}
	dyn := c.Dynamic()
	userRV := get(t, dyn, drGVR, "dr-009").GetResourceVersion()
	relay := &streamRelay{snap: sealed(drs(10, "mesh")...), acks: make(chan []*snapshotv1.ApplyResult, 10)}
	m := &driftMetrics{}
	logs := &logBuffer{}
	s, _ := newSyncer(t, c, relay, m, logs)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-relay.acks:
	case <-time.After(30 * time.Second):
		t.Fatal("no ack of the first apply")
	}

	// Someone edits the spec of an owned object with another manager.
	u := get(t, dyn, drGVR, "dr-001")
	if err := unstructured.SetNestedField(u.Object, "hijacked.example", "spec", "host"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(drGVR).Namespace(ns).Update(t.Context(), u, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 10*time.Second, func(context.Context) (bool, error) {
		return host(t, get(t, dyn, drGVR, "dr-001")) == "svc-001.mesh", nil
	}, "the edited DestinationRule was not put back")

	// Someone deletes owned objects.
	for _, n := range []string{"dr-002", "dr-003"} {
		if err := dyn.Resource(drGVR).Namespace(ns).Delete(t.Context(), n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubetest.Eventually(t, 10*time.Second, func(context.Context) (bool, error) {
		return exists(t, dyn, drGVR, "dr-002") && exists(t, dyn, drGVR, "dr-003"), nil
	}, "the deleted DestinationRules were not put back")

	// Someone removes the digest annotation.
	u = get(t, dyn, drGVR, "dr-004")
	ann := u.GetAnnotations()
	delete(ann, snapshots.AnnotationDigest)
	u.SetAnnotations(ann)
	if _, err := dyn.Resource(drGVR).Namespace(ns).Update(t.Context(), u, metav1.UpdateOptions{FieldManager: "kubectl-annotate"}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 10*time.Second, func(context.Context) (bool, error) {
		return get(t, dyn, drGVR, "dr-004").GetAnnotations()[snapshots.AnnotationDigest] != "", nil
	}, "the digest annotation was not put back")

	kubetest.Eventually(t, 10*time.Second, func(context.Context) (bool, error) {
		return m.count("DestinationRule") == 4, nil
	}, "drift corrections counted %d, want 4", m.count("DestinationRule"))
	if l := logs.String(); !strings.Contains(l, "kubectl-edit") || !strings.Contains(l, "dr-001") {
		t.Errorf("the correction's log does not name the object and the manager that changed it:\n%s", l)
	}
	// The user's object of a desired name: left alone throughout.
	if rv := get(t, dyn, drGVR, "dr-009").GetResourceVersion(); rv != userRV {
		t.Errorf("the user's DestinationRule changed: resourceVersion %s -> %s", userRV, rv)
	}
	if h := host(t, get(t, dyn, drGVR, "dr-009")); h != "user.example" {
		t.Errorf("the user's DestinationRule host %q", h)
	}
}

// cancellingApplier cancels the apply after n writes, as a killed agent
// stops.
type cancellingApplier struct {
	*Applier
	n      atomic.Int64
	cancel func()
}

func (a *cancellingApplier) Apply(ctx context.Context, d domain.DesiredObject, live *domain.LiveObject) (domain.LiveObject, error) {
	if a.n.Add(-1) < 0 {
		a.cancel()
		return domain.LiveObject{}, ctx.Err()
	}
	return a.Applier.Apply(ctx, d, live)
}

// TestSyncerConvergesAfterAnInterruptedApply: an agent killed in the middle
// of an apply leaves some objects at the old version, some at the new; the
// next agent writes only the rest and deletes nothing the output holds.
func TestSyncerConvergesAfterAnInterruptedApply(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east"})
	createNamespace(t, c.Clientset(), ns)
	dyn := c.Dynamic()

	s0, _ := newSyncer(t, c, &ackRelay{}, nil, nil)
	if err := s0.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	s0.Apply(t.Context(), sealed(drs(30, "old")...))

	next := sealed(drs(60, "new")...)
	ctx, cancel := context.WithCancel(t.Context())
	_, a1 := newSyncer(t, c, &ackRelay{}, nil, nil)
	killed := &cancellingApplier{Applier: a1, cancel: cancel}
	killed.n.Store(25)
	s1 := app.NewSyncer(&ackRelay{}, killed, nil, slog.New(slog.DiscardHandler), app.WithApplyOptions(app.ApplyOptions{Install: install, Cluster: "east", Workers: 4}))
	if err := s1.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if s1.Apply(ctx, next) {
		t.Fatal("the interrupted apply reported success")
	}

	before := outputWrites(t, c)
	relay := &ackRelay{}
	s2, _ := newSyncer(t, c, relay, nil, nil)
	if err := s2.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !s2.Apply(t.Context(), next) {
		t.Fatalf("the next agent's apply failed: %v", relay.acks)
	}
	w := diff(outputWrites(t, c), before)
	if w["DELETE"] != 0 {
		t.Errorf("the next agent deleted %d objects the output holds", w["DELETE"])
	}
	// The killed agent's four workers may each have had a write in
	// flight, which the API server may or may not have finished: finished
	// before the next agent's view, it is one write fewer for that agent;
	// finished after, it is one more, and the API server may count the
	// killed agent's write itself after the count above was taken.
	if left := 60 - 25; w["APPLY"] < left-4 || w["APPLY"] > left+2*4 {
		t.Errorf("the next agent wrote %d objects, want about the %d the killed one had not", w["APPLY"], left)
	}
	for i := range 60 {
		name := fmt.Sprintf("dr-%03d", i)
		if h := host(t, get(t, dyn, drGVR, name)); h != fmt.Sprintf("svc-%03d.new", i) {
			t.Errorf("%s host %q", name, h)
		}
	}
}

// TestSyncerLeadershipLostMidApply: a leader that loses leadership in the
// middle of an apply stops writing between objects and deletes nothing;
// the next leader rebuilds the applied set from the cluster, finishes,
// and deletes each obsolete object once.
func TestSyncerLeadershipLostMidApply(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east"})
	createNamespace(t, c.Clientset(), ns)

	s0, _ := newSyncer(t, c, &ackRelay{}, nil, nil)
	if err := s0.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	s0.Apply(t.Context(), sealed(append(drs(20, "old"), dr("obsolete-a", `{"host":"a"}`), dr("obsolete-b", `{"host":"b"}`))...))

	next := sealed(drs(40, "new")...)
	lead := &flagLeadership{}
	lead.leading.Store(true)
	_, a1 := newSyncer(t, c, &ackRelay{}, nil, nil)
	s1 := app.NewSyncer(&ackRelay{}, &losingLeadership{Applier: a1, after: 10, l: lead}, nil, slog.New(slog.DiscardHandler),
		app.WithApplyOptions(app.ApplyOptions{Install: install, Cluster: "east", Workers: 4}), app.WithLeadership(lead))
	if err := s1.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := outputWrites(t, c)
	if s1.Apply(t.Context(), next) {
		t.Fatal("the apply reported success after leadership was lost")
	}
	w := diff(outputWrites(t, c), before)
	// Each worker finishes the object it was writing, and no more.
	if w["APPLY"] > 10+4 || w["DELETE"] != 0 {
		t.Errorf("after losing leadership the old leader wrote %v; want at most %d applies and no delete", w, 10+4)
	}

	before = outputWrites(t, c)
	relay := &ackRelay{}
	s2, _ := newSyncer(t, c, relay, nil, nil)
	if err := s2.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !s2.Apply(t.Context(), next) {
		t.Fatalf("the new leader's apply failed: %v", relay.acks)
	}
	w2 := diff(outputWrites(t, c), before)
	if w2["DELETE"] != 2 {
		t.Errorf("the new leader deleted %d objects, want the 2 obsolete ones once each", w2["DELETE"])
	}
	if w["APPLY"]+w2["APPLY"] < 40 || w2["APPLY"] > 40-w["APPLY"]+4 {
		t.Errorf("applies: %d by the old leader, %d by the new; want the new one to write only what is left", w["APPLY"], w2["APPLY"])
	}
	for _, n := range []string{"obsolete-a", "obsolete-b"} {
		if _, err := c.Dynamic().Resource(drGVR).Namespace(ns).Get(t.Context(), n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: %v, want it deleted", n, err)
		}
	}
}

type flagLeadership struct{ leading atomic.Bool }

func (l *flagLeadership) LeaderCh() <-chan bool                  { return nil }
func (l *flagLeadership) IsLeader() bool                         { return l.leading.Load() }
func (l *flagLeadership) VerifyLeader(ctx context.Context) error { return nil }

// losingLeadership loses leadership after n writes.
type losingLeadership struct {
	*Applier
	after int64
	n     atomic.Int64
	l     *flagLeadership
}

func (a *losingLeadership) Apply(ctx context.Context, d domain.DesiredObject, live *domain.LiveObject) (domain.LiveObject, error) {
	got, err := a.Applier.Apply(ctx, d, live)
	if a.n.Add(1) >= a.after {
		a.l.leading.Store(false)
	}
	return got, err
}
