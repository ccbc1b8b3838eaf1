package app_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/distribution/internal/adapters/memory"
	"github.com/meshplane/meshplane/services/distribution/internal/app"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const timeout = 10 * time.Second

func output(cluster string, names ...string) *snapshotv1.OutputSnapshot {
	o := &snapshotv1.OutputSnapshot{Cluster: cluster}
	for _, n := range names {
		o.Objects = append(o.Objects, &snapshotv1.Object{ApiVersion: "networking.istio.io/v1", Kind: "DestinationRule", Namespace: "default", Name: n})
	}
	snapshots.SealOutput(o)
	return o
}

// source is the memory store with hooks that let tests know when the
// distributor has subscribed and how often it has read a version.
type source struct {
	*snapstore.Memory[*snapshotv1.OutputSnapshot]
	subscribed chan struct{}

	mu       sync.Mutex
	versions map[string]int
	read     chan struct{}
}

func newSource() *source {
	return &source{
		Memory:     snapstore.NewMemory(func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} }),
		subscribed: make(chan struct{}, 16),
		versions:   map[string]int{},
		read:       make(chan struct{}, 1),
	}
}

func (s *source) Subscribe(ctx context.Context) (<-chan snapshots.Change, error) {
	ch, err := s.Memory.Subscribe(ctx)
	if err == nil {
		s.subscribed <- struct{}{}
	}
	return ch, err
}

func (s *source) Version(ctx context.Context, cluster string) (string, error) {
	v, err := s.Memory.Version(ctx, cluster)
	s.mu.Lock()
	s.versions[cluster]++
	s.mu.Unlock()
	select {
	case s.read <- struct{}{}:
	default:
	}
	return v, err
}

func (s *source) versionReads(cluster string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versions[cluster]
}

// waitVersionReads waits until the cluster's version has been read n times.
func (s *source) waitVersionReads(t *testing.T, cluster string, n int) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		got := s.versions[cluster]
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-s.read:
		case <-deadline:
			t.Fatalf("version of %s read %d times, want %d", cluster, got, n)
		}
	}
}

func (s *source) put(t *testing.T, o *snapshotv1.OutputSnapshot) {
	t.Helper()
	if err := s.Put(t.Context(), o.GetCluster(), o.GetVersion(), o); err != nil {
		t.Fatal(err)
	}
}

// newDistributor runs a distributor over src until the test ends, and
// returns once it follows the store.
func newDistributor(t *testing.T, src *source) *app.Distributor {
	t.Helper()
	return newDistributorWith(t, src, memory.NewAcks(nil))
}

func newDistributorWith(t *testing.T, src *source, acks app.AckStore) *app.Distributor {
	t.Helper()
	d := app.NewDistributor(src, acks, nil, slog.New(slog.NewTextHandler(t.Output(), nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-src.subscribed:
	case <-time.After(timeout):
		t.Fatal("distributor did not subscribe to the store")
	}
	return d
}

// watch is one running Watch call whose sends land on got.
type watch struct {
	got    chan *snapshotv1.OutputSnapshot
	done   chan error
	cancel context.CancelFunc
	once   sync.Once
}

// stop cancels the watch and waits for Watch to return.
func (w *watch) stop(t *testing.T) {
	t.Helper()
	w.once.Do(func() {
		w.cancel()
		select {
		case err := <-w.done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Watch: %v", err)
			}
		case <-time.After(timeout):
			t.Error("Watch did not return after its context ended")
		}
	})
}

// startWatch watches cluster from have. With block, send never returns
// until the watch is cancelled: an agent that stopped reading.
func startWatch(t *testing.T, d *app.Distributor, cluster, have string, block bool) *watch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watch{got: make(chan *snapshotv1.OutputSnapshot, 100), done: make(chan error, 1), cancel: cancel}
	go func() {
		w.done <- d.Watch(ctx, cluster, have, func(s *snapshotv1.OutputSnapshot) error {
			w.got <- s
			if block {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

func (w *watch) next(t *testing.T) *snapshotv1.OutputSnapshot {
	t.Helper()
	select {
	case s := <-w.got:
		return s
	case err := <-w.done:
		t.Fatalf("Watch returned %v while a snapshot was expected", err)
	case <-time.After(timeout):
		t.Fatal("no snapshot sent")
	}
	return nil
}

func (w *watch) nothingSent(t *testing.T) {
	t.Helper()
	select {
	case s := <-w.got:
		t.Fatalf("sent version %s, want nothing", s.GetVersion())
	default:
	}
}

func wantVersion(t *testing.T, got, want *snapshotv1.OutputSnapshot) {
	t.Helper()
	if got.GetVersion() != want.GetVersion() || !proto.Equal(got, want) {
		t.Fatalf("sent %s of cluster %s, want %s of cluster %s", got.GetVersion(), got.GetCluster(), want.GetVersion(), want.GetCluster())
	}
}

func TestWatchSendsCurrentWhenVersionDiffers(t *testing.T) {
	v1 := output("east", "reviews")
	for _, tc := range []struct {
		name string
		have string
	}{
		{"agent holds nothing", ""},
		{"agent holds an older version", output("east", "old").GetVersion()},
		{"agent holds a version from another install", "sha256:unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := newSource()
			src.put(t, v1)
			src.put(t, output("west", "details"))
			d := newDistributor(t, src)
			w := startWatch(t, d, "east", tc.have, false)
			wantVersion(t, w.next(t), v1)
		})
	}
}

func TestWatchSendsNothingWhenAgentIsCurrent(t *testing.T) {
	src := newSource()
	v1 := output("east", "reviews")
	src.put(t, v1)
	d := newDistributor(t, src)
	// v1 is sent once; a new watch holding it gets nothing.
	first := startWatch(t, d, "east", "", false)
	wantVersion(t, first.next(t), v1)
	first.stop(t)
	src.waitVersionReads(t, "east", 1)
	w := startWatch(t, d, "east", v1.GetVersion(), false)

	// The first look at the store is over once a second wake-up (a Put of
	// the same version) has read the version again.
	src.waitVersionReads(t, "east", 2)
	src.put(t, v1)
	src.waitVersionReads(t, "east", 3)
	w.nothingSent(t)

	v2 := output("east", "reviews", "ratings")
	src.put(t, v2)
	wantVersion(t, w.next(t), v2)
}

func TestWatchOnlyOwnCluster(t *testing.T) {
	src := newSource()
	d := newDistributor(t, src)
	w := startWatch(t, d, "east", "", false)
	// Nothing to send yet: east has no output.
	src.waitVersionReads(t, "east", 1)
	src.put(t, output("west", "details"))
	east := output("east", "reviews")
	src.put(t, east)
	wantVersion(t, w.next(t), east)
}

func TestSlowWatcherDoesNotBlockOthers(t *testing.T) {
	src := newSource()
	v1 := output("east", "a")
	src.put(t, v1)
	d := newDistributor(t, src)

	stuck := startWatch(t, d, "east", "", true)
	wantVersion(t, stuck.next(t), v1) // and now it never returns from send
	fast := startWatch(t, d, "east", "", false)
	wantVersion(t, fast.next(t), v1)

	for _, names := range [][]string{{"a", "b"}, {"a", "b", "c"}, {"c"}} {
		v := output("east", names...)
		src.put(t, v)
		wantVersion(t, fast.next(t), v)
	}
	// Another cluster is not held up either.
	west := startWatch(t, d, "west", "", false)
	w1 := output("west", "x")
	src.put(t, w1)
	wantVersion(t, west.next(t), w1)

	stuck.stop(t)
	if !d.Connected("east") {
		t.Fatal("east's other watcher is gone too")
	}
	fast.stop(t)
	if d.Connected("east") {
		t.Fatal("east still connected after its watchers ended")
	}
}

func TestWatchReturnsWhenSendFails(t *testing.T) {
	src := newSource()
	src.put(t, output("east", "a"))
	d := newDistributor(t, src)
	broken := errors.New("agent went away")
	err := d.Watch(t.Context(), "east", "", func(*snapshotv1.OutputSnapshot) error { return broken })
	if !errors.Is(err, broken) {
		t.Fatalf("Watch: %v, want the send error", err)
	}
}

func TestAck(t *testing.T) {
	src := newSource()
	v1 := output("east", "a", "b")
	v1.Statuses = []*snapshotv1.ResourceStatus{{Kind: "TrafficPolicy", Name: "p"}}
	snapshots.SealOutput(v1)
	src.put(t, v1)
	d := newDistributor(t, src)
	w := startWatch(t, d, "east", "", false)
	wantVersion(t, w.next(t), v1)
	// v2 drops b: its ack may report b deleted.
	v2 := output("east", "a")
	src.put(t, v2)
	wantVersion(t, w.next(t), v2)

	res := func(o snapshotv1.ApplyOutcome) *snapshotv1.ApplyResult {
		return &snapshotv1.ApplyResult{Ref: &snapshotv1.ObjectRef{Kind: "DestinationRule", Name: "x"}, Outcome: o}
	}
	applied := func(n int) []*snapshotv1.ApplyResult {
		out := make([]*snapshotv1.ApplyResult, n)
		for i := range out {
			out[i] = res(snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED)
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		cluster    string
		version    string
		results    []*snapshotv1.ApplyResult
		counts     app.AckCounts
		wantErr    error
		wantErrors int
	}{
		{name: "counted: the applied outcomes as counts, the errors listed", version: v2.GetVersion(), counts: app.AckCounts{Applied: 1, Deleted: 1}, wantErrors: 1,
			results: []*snapshotv1.ApplyResult{res(snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED)}},
		{name: "counts beyond what the output holds", version: v1.GetVersion(), counts: app.AckCounts{Applied: 100_000}, wantErr: app.ErrInvalidAck},
		{name: "counts and results together beyond it", version: v1.GetVersion(), counts: app.AckCounts{Applied: 3, Deleted: 2}, results: applied(1), wantErr: app.ErrInvalidAck},
		{name: "negative counts", version: v1.GetVersion(), counts: app.AckCounts{Applied: -1}, wantErr: app.ErrInvalidAck},
		{name: "all applied", version: v1.GetVersion(), results: []*snapshotv1.ApplyResult{res(snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED), res(snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED)}},
		{name: "no results", version: v1.GetVersion()},
		{name: "a result per object and status", version: v1.GetVersion(), results: applied(3)},
		{name: "conflicts and rejections are errors", version: v2.GetVersion(), wantErrors: 2, results: []*snapshotv1.ApplyResult{
			res(snapshotv1.ApplyOutcome_APPLY_OUTCOME_CONFLICT),
			res(snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED),
		}},
		{name: "deletions of an earlier output's objects", version: v2.GetVersion(), results: []*snapshotv1.ApplyResult{
			res(snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED), res(snapshotv1.ApplyOutcome_APPLY_OUTCOME_DELETED),
		}},
		{name: "no version", version: "", wantErr: app.ErrInvalidAck},
		{name: "a version never sent", version: output("east", "x").GetVersion(), wantErr: app.ErrAckNotSent},
		{name: "a version sent to another cluster", cluster: "west", version: v1.GetVersion(), wantErr: app.ErrAckNotSent},
		// v1 holds 3 (two objects, one status), and the largest output
		// sent holds 2 objects that a later ack may report deleted.
		{name: "more results than the output holds", version: v1.GetVersion(), results: applied(6), wantErr: app.ErrInvalidAck},
		{name: "the bogus ack of the user test", version: "sha256:never-sent", results: applied(100_000), wantErr: app.ErrAckNotSent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := tc.cluster
			if cluster == "" {
				cluster = "east"
			}
			before := time.Now()
			err := d.AckCounted(t.Context(), cluster, tc.version, tc.results, tc.counts)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Ack: %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Ack: %v", err)
			}
			recs, latestVersions, err := d.ListAcks(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 {
				t.Fatalf("%d ack records, want 1", len(recs))
			}
			r := recs[0]
			if r.Cluster != "east" || r.Version != tc.version || r.ApplyErrors != tc.wantErrors || len(r.Results) != len(tc.results) ||
				r.Applied != tc.counts.Applied || r.Deleted != tc.counts.Deleted {
				t.Fatalf("record %+v, want east at %s with %d errors, %d results and counts %+v", r, tc.version, tc.wantErrors, len(tc.results), tc.counts)
			}
			if r.AckedAt.Before(before) || r.AckedAt.After(time.Now()) {
				t.Fatalf("AckedAt %v is not the time of the ack", r.AckedAt)
			}
			if latestVersions["east"] != v2.GetVersion() {
				t.Fatalf("latest version %q, want %q", latestVersions["east"], v2.GetVersion())
			}
		})
	}
	// A refused ack leaves the last good record.
	recs, _, _ := d.ListAcks(t.Context())
	if len(recs) != 1 || recs[0].Version != v2.GetVersion() || len(recs[0].Results) != 2 {
		t.Fatalf("records after a refused ack: %+v", recs)
	}
	// A too-many-results ack names the counts.
	err := d.Ack(t.Context(), "east", v1.GetVersion(), applied(6))
	if err == nil || !strings.Contains(err.Error(), "6 results") || !strings.Contains(err.Error(), "at most 5") {
		t.Fatalf("Ack with too many results: %v", err)
	}
}

// An agent that starts a watch holding the current version that the store
// does not remember sending (sent before the store was emptied, or by a
// replica that died before recording it) gets it again, so that it
// acknowledges it: the store may have lost the acknowledgement too. One
// the store remembers is not sent again.
func TestHeldVersionTheStoreForgotIsSentAgain(t *testing.T) {
	src := newSource()
	v1 := output("east", "a")
	src.put(t, v1)
	acks := memory.NewAcks(nil)
	d := newDistributorWith(t, src, acks)
	if err := d.Ack(t.Context(), "east", v1.GetVersion(), nil); !errors.Is(err, app.ErrAckNotSent) {
		t.Fatalf("Ack before any watch: %v, want ErrAckNotSent", err)
	}
	w := startWatch(t, d, "east", v1.GetVersion(), false)
	wantVersion(t, w.next(t), v1)
	if err := d.Ack(t.Context(), "east", v1.GetVersion(), nil); err != nil {
		t.Fatalf("Ack of the version sent again: %v", err)
	}
	w.stop(t)

	// Remembered now: a new watch holding it is sent nothing.
	w = startWatch(t, d, "east", v1.GetVersion(), false)
	src.waitVersionReads(t, "east", 2)
	w.nothingSent(t)
	// Not current: the held version is not sent, the current one is.
	v2 := output("east", "b")
	src.put(t, v2)
	wantVersion(t, w.next(t), v2)
}

// Only the last app.KeepSent versions sent are remembered.
func TestAckOfAVersionSentLongAgo(t *testing.T) {
	src := newSource()
	first := output("east", "v0")
	src.put(t, first)
	d := newDistributor(t, src)
	w := startWatch(t, d, "east", "", false)
	wantVersion(t, w.next(t), first)
	for i := range app.KeepSent {
		o := output("east", fmt.Sprint("v", i+1))
		src.put(t, o)
		wantVersion(t, w.next(t), o)
	}
	if err := d.Ack(t.Context(), "east", first.GetVersion(), nil); !errors.Is(err, app.ErrAckNotSent) {
		t.Fatalf("Ack of the version sent %d versions ago: %v, want ErrAckNotSent", app.KeepSent, err)
	}
}

// refusals records the snapshots refused as too large.
type refusals struct {
	app.NopMetrics
	got chan int
}

func (r refusals) SnapshotRefused(_ string, bytes int) { r.got <- bytes }

func TestWatchRefusesSnapshotOverTheLimit(t *testing.T) {
	src := newSource()
	small := output("east", "reviews")
	big := output("east", "reviews", "ratings", "details", "productpage")
	limit := proto.Size(small) + 10
	if proto.Size(big) <= limit {
		t.Fatalf("test snapshot of %d bytes is not over the limit %d", proto.Size(big), limit)
	}
	src.put(t, small)
	m := refusals{got: make(chan int, 10)}
	d := app.NewDistributor(src, memory.NewAcks(nil), m, slog.New(slog.NewTextHandler(t.Output(), nil)), app.WithMaxSendBytes(limit))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-src.subscribed

	w := startWatch(t, d, "east", "", false)
	wantVersion(t, w.next(t), small)

	// The big version is refused once, however often the watcher wakes,
	// and the stream stays open.
	src.put(t, big)
	select {
	case n := <-m.got:
		if n != proto.Size(big) {
			t.Fatalf("refused %d bytes, want %d", n, proto.Size(big))
		}
	case <-time.After(timeout):
		t.Fatal("the big snapshot was not refused")
	}
	reads := src.versionReads("east")
	src.put(t, big)
	src.waitVersionReads(t, "east", reads+1)
	w.nothingSent(t)
	select {
	case <-m.got:
		t.Fatal("the same version was refused twice")
	default:
	}

	// The next version within the limit flows again.
	small2 := output("east", "ratings")
	src.put(t, small2)
	wantVersion(t, w.next(t), small2)
}

// gatedSource holds every read of an output until the test lets it go,
// and counts the reads in flight.
type gatedSource struct {
	*source
	gate    chan struct{}
	entered chan struct{}

	mu            sync.Mutex
	inFlight, max int
}

func (g *gatedSource) GetEncoded(ctx context.Context, cluster string) (snapshots.Encoded[*snapshotv1.OutputSnapshot], error) {
	g.mu.Lock()
	g.inFlight++
	g.max = max(g.max, g.inFlight)
	g.mu.Unlock()
	g.entered <- struct{}{}
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	select {
	case <-g.gate:
	case <-ctx.Done():
	}
	return snapshots.GetEncoded(ctx, snapshots.Store[*snapshotv1.OutputSnapshot](g.Memory), cluster)
}

// When every cluster's output changes at once, at most the bound of
// watches read and scan an output together; the others wait their turn
// and all get theirs.
func TestConcurrentReadsAreBounded(t *testing.T) {
	const clusters, bound = 6, 2
	src := &gatedSource{source: newSource(), gate: make(chan struct{}), entered: make(chan struct{}, clusters)}
	want := map[string]*snapshotv1.OutputSnapshot{}
	for i := range clusters {
		o := output(fmt.Sprintf("c%d", i), "a")
		src.put(t, o)
		want[o.GetCluster()] = o
	}
	d := app.NewDistributor(src, memory.NewAcks(nil), nil, slog.New(slog.NewTextHandler(t.Output(), nil)), app.WithMaxConcurrentReads(bound))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var watches []*watch
	for c := range want {
		watches = append(watches, startWatch(t, d, c, "", false))
	}
	for range bound {
		<-src.entered
	}
	for range clusters {
		src.gate <- struct{}{}
	}
	for _, w := range watches {
		s := w.next(t)
		wantVersion(t, s, want[s.GetCluster()])
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.max != bound {
		t.Fatalf("%d outputs read at once, want the bound, %d", src.max, bound)
	}
}
