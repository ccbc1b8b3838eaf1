package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
)

// Hand-written fakes of the ports. Each is safe for concurrent use, since
// the use cases call them from their own goroutines.

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	platformtest.Eventually(t, timeout, fmt.Sprintf(format, args...), cond)
}

// receive returns the next value from ch, failing the test after timeout.
func receive[T any](t *testing.T, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
		panic("unreachable")
	}
}

// fakeApplier is the cluster's objects of the output kinds in memory: the
// owned ones, and users' (owned false).
type fakeApplier struct {
	mu sync.Mutex
	// owned holds the owned objects; Apply adds and Delete removes.
	owned map[domain.ObjectKey]domain.LiveObject
	// users holds objects without Meshplane's labels.
	users map[domain.ObjectKey]bool
	// applyErr and deleteErr fail calls for a key.
	applyErr  map[domain.ObjectKey]error
	deleteErr map[domain.ObjectKey]error
	// calls records "apply <key>" and "delete <key>" in order.
	calls   []string
	uids    int
	changes []ObjectChange
	changed chan struct{}
}

func newFakeApplier(owned ...domain.ObjectKey) *fakeApplier {
	f := &fakeApplier{
		owned: map[domain.ObjectKey]domain.LiveObject{}, users: map[domain.ObjectKey]bool{},
		applyErr: map[domain.ObjectKey]error{}, deleteErr: map[domain.ObjectKey]error{}, changed: make(chan struct{}, 1),
	}
	for _, k := range owned {
		f.uids++
		f.owned[k] = domain.LiveObject{Key: k, UID: fmt.Sprint("uid-", f.uids), Generation: 1, Owned: true}
	}
	return f
}

func (f *fakeApplier) Sync(context.Context) error { return nil }

func (f *fakeApplier) Get(k domain.ObjectKey) (domain.LiveObject, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.users[k] {
		return domain.LiveObject{Key: k, UID: "user"}, true
	}
	l, ok := f.owned[k]
	return l, ok
}

func (f *fakeApplier) Owned() []domain.LiveObject {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []domain.LiveObject
	for _, l := range f.owned {
		out = append(out, l)
	}
	return out
}

func (f *fakeApplier) Changed() <-chan struct{} { return f.changed }

func (f *fakeApplier) TakeChanges() []ObjectChange {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.changes
	f.changes = nil
	return out
}

// change records a change made by someone else and signals it.
func (f *fakeApplier) change(c ObjectChange) {
	f.mu.Lock()
	if c.Gone {
		delete(f.owned, c.Object.Key)
	} else {
		f.owned[c.Object.Key] = c.Object
	}
	f.changes = append(f.changes, c)
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeApplier) Apply(_ context.Context, d domain.DesiredObject, live *domain.LiveObject) (domain.LiveObject, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := d.Key
	if live != nil && !live.Owned {
		// As the adapter: a user's object costs no call.
		return domain.LiveObject{}, fmt.Errorf("%w: %s", ErrConflict, k)
	}
	f.calls = append(f.calls, "apply "+k.String())
	if err := f.applyErr[k]; err != nil {
		return domain.LiveObject{}, err
	}
	if f.users[k] {
		return domain.LiveObject{}, fmt.Errorf("%w: %s", ErrConflict, k)
	}
	l, ok := f.owned[k]
	if !ok {
		f.uids++
		l = domain.LiveObject{Key: k, UID: fmt.Sprint("uid-", f.uids), Owned: true}
	}
	l.Generation++
	l.Labels = d.Object.GetLabels()
	l.Annotations = map[string]string{snapshots.AnnotationDigest: d.Digest}
	for k, v := range d.Object.GetAnnotations() {
		l.Annotations[k] = v
	}
	f.owned[k] = l
	return l, nil
}

func (f *fakeApplier) Delete(_ context.Context, l domain.LiveObject) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := l.Key
	f.calls = append(f.calls, "delete "+k.String())
	if err := f.deleteErr[k]; err != nil {
		return err
	}
	delete(f.owned, k)
	return nil
}

func (f *fakeApplier) setApplyErr(k domain.ObjectKey, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.applyErr, k)
	} else {
		f.applyErr[k] = err
	}
}

func (f *fakeApplier) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeApplier) count(prefix string) int {
	n := 0
	for _, c := range f.callLog() {
		if len(c) >= len(prefix) && c[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

func (f *fakeApplier) ownedKeys() map[domain.ObjectKey]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[domain.ObjectKey]bool, len(f.owned))
	for k := range f.owned {
		out[k] = true
	}
	return out
}

type ack struct {
	version string
	results []*snapshotv1.ApplyResult
}

// fakeRelay is the management plane. Each Watch or OpenPush takes the next
// stream the test queued, or fails when none is queued and down is set.
type fakeRelay struct {
	mu       sync.Mutex
	watchErr error
	watches  []string // the version passed to each Watch
	pushes   int
	pushErr  error
	acks     chan ack
	ackErr   error

	watchStreams chan *fakeWatchStream
	pushStreams  chan *fakePushStream
}

func newFakeRelay() *fakeRelay {
	return &fakeRelay{
		acks:         make(chan ack, 100),
		watchStreams: make(chan *fakeWatchStream, 10),
		pushStreams:  make(chan *fakePushStream, 10),
	}
}

func (r *fakeRelay) Watch(ctx context.Context, have string) (WatchStream, error) {
	r.mu.Lock()
	r.watches = append(r.watches, have)
	err := r.watchErr
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case s := <-r.watchStreams:
		s.bind(ctx)
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *fakeRelay) OpenPush(ctx context.Context) (PushStream, error) {
	r.mu.Lock()
	r.pushes++
	err := r.pushErr
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case s := <-r.pushStreams:
		s.bind(ctx)
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *fakeRelay) Ack(_ context.Context, version string, results []*snapshotv1.ApplyResult) error {
	r.acks <- ack{version: version, results: results}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ackErr
}

func (r *fakeRelay) watchCalls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.watches...)
}

func (r *fakeRelay) pushCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pushes
}

// fakeWatchStream delivers what the test sends on snaps; closing end (or
// sending on fail) ends the stream with an error.
type fakeWatchStream struct {
	snaps chan *snapshotv1.OutputSnapshot
	fail  chan error
	ctx   context.Context

	mu     sync.Mutex
	closed bool
}

func newFakeWatchStream() *fakeWatchStream {
	return &fakeWatchStream{snaps: make(chan *snapshotv1.OutputSnapshot), fail: make(chan error, 1)}
}

func (s *fakeWatchStream) bind(ctx context.Context) { s.ctx = ctx }

func (s *fakeWatchStream) Receive() (*snapshotv1.OutputSnapshot, error) {
	select {
	case snap := <-s.snaps:
		return snap, nil
	case err := <-s.fail:
		return nil, err
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func (s *fakeWatchStream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *fakeWatchStream) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// fakePushStream records what is sent and answers with what the test puts
// on stored.
type fakePushStream struct {
	sent   chan *snapshotv1.InputSnapshot
	stored chan string
	fail   chan error
	ctx    context.Context

	mu      sync.Mutex
	closed  bool
	all     []*snapshotv1.InputSnapshot
	sendErr error
	// inFlight is an acknowledgement that arrived just as the stream was
	// closed: Receive returns it once after Close.
	inFlight string
	closedC  chan struct{}
}

func newFakePushStream() *fakePushStream {
	return &fakePushStream{sent: make(chan *snapshotv1.InputSnapshot, 100), stored: make(chan string), fail: make(chan error, 1), closedC: make(chan struct{})}
}

func (s *fakePushStream) bind(ctx context.Context) { s.ctx = ctx }

func (s *fakePushStream) Send(snap *snapshotv1.InputSnapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return io.ErrClosedPipe
	}
	if s.sendErr != nil {
		return s.sendErr
	}
	s.all = append(s.all, snap)
	s.sent <- snap
	return nil
}

func (s *fakePushStream) Receive() (string, error) {
	select {
	case v := <-s.stored:
		return v, nil
	case err := <-s.fail:
		return "", err
	case <-s.ctx.Done():
		return "", s.ctx.Err()
	case <-s.closedC:
		s.mu.Lock()
		defer s.mu.Unlock()
		if v := s.inFlight; v != "" {
			s.inFlight = ""
			return v, nil
		}
		return "", io.ErrClosedPipe
	}
}

func (s *fakePushStream) CloseSend() error { return s.Close() }

func (s *fakePushStream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.closedC)
	}
	return nil
}

func (s *fakePushStream) sends() []*snapshotv1.InputSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*snapshotv1.InputSnapshot(nil), s.all...)
}

// fakeReader is discovery over a list of services the test edits.
type fakeReader struct {
	mu        sync.Mutex
	services  []domain.Service
	err       error
	discovers int
	changed   chan struct{}
	synced    chan struct{}
}

func newFakeReader(svcs ...domain.Service) *fakeReader {
	r := &fakeReader{services: svcs, changed: make(chan struct{}), synced: make(chan struct{})}
	close(r.synced)
	return r
}

func (r *fakeReader) WaitForSync(ctx context.Context) error {
	select {
	case <-r.synced:
		return nil
	case <-ctx.Done():
		return errors.New("not synced")
	}
}

func (r *fakeReader) Changed() <-chan struct{} { return r.changed }

func (r *fakeReader) Discover() (domain.Discovered, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.discovers++
	if r.err != nil {
		return domain.Discovered{}, r.err
	}
	return domain.Discovered{Services: append([]domain.Service(nil), r.services...)}, nil
}

func (r *fakeReader) set(svcs ...domain.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.services = svcs
}

func (r *fakeReader) discoverCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.discovers
}

// recordingMetrics counts what the use cases report.
type recordingMetrics struct {
	mu        sync.Mutex
	applied   []string
	held      int
	connected map[string]bool
	drift     []string
}

func (m *recordingMetrics) Pushed(int, error) {}
func (m *recordingMetrics) Applied(version string, applied, failed, deleted int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applied = append(m.applied, fmt.Sprintf("%s applied=%d failed=%d deleted=%d", version, applied, failed, deleted))
}
func (m *recordingMetrics) HeldDeletions(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held = n
}
func (m *recordingMetrics) Connected(stream string, up bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.connected == nil {
		m.connected = map[string]bool{}
	}
	m.connected[stream] = up
}
func (m *recordingMetrics) DriftCorrected(kind string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drift = append(m.drift, kind)
}

// fakeStatuses records status writes and fails those named in fail.
type fakeStatuses struct {
	mu      sync.Mutex
	fail    map[string]error
	outcome StatusOutcome
	calls   []string
}

func (f *fakeStatuses) WriteStatus(_ context.Context, st *snapshotv1.ResourceStatus) (StatusOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, st.GetName())
	if err := f.fail[st.GetName()]; err != nil {
		return 0, err
	}
	if f.outcome != 0 {
		return f.outcome, nil
	}
	return StatusWritten, nil
}

func (f *fakeStatuses) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}
