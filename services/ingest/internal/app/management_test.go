package app_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
)

// fakeResources stands in for the management cluster's informers: change
// sets what Snapshot returns and calls changed.
type fakeResources struct {
	mu       sync.Mutex
	policies []string
	changed  func()
	ready    chan struct{}
}

func newFakeResources() *fakeResources { return &fakeResources{ready: make(chan struct{})} }

func (f *fakeResources) Watch(ctx context.Context, changed func()) error {
	f.mu.Lock()
	f.changed = changed
	f.mu.Unlock()
	close(f.ready)
	changed()
	<-ctx.Done()
	return nil
}

func (f *fakeResources) change(policies ...string) {
	f.mu.Lock()
	f.policies = policies
	changed := f.changed
	f.mu.Unlock()
	changed()
}

func (f *fakeResources) Snapshot(cluster string) (*snapshotv1.InputSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &snapshotv1.InputSnapshot{}
	for _, p := range f.policies {
		s.TrafficPolicies = append(s.TrafficPolicies, &networkingv1.TrafficPolicy{Metadata: &commonv1.ObjectMeta{Name: p, Namespace: "bookinfo", Cluster: cluster}})
	}
	return s, nil
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	platformtest.Eventually(t, 10*time.Second, what, cond)
}

func TestManagementPushesThroughTheIngestPath(t *testing.T) {
	store := newCountingStore()
	notifier := &recordingNotifier{}
	in := app.NewIngestor(store, notifier, nil, slog.New(slog.DiscardHandler), "replica-1")
	res := newFakeResources()
	m := app.NewManagement(in, res, "mgmt", time.Millisecond, time.Millisecond, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	<-res.ready

	policies := func() int {
		e, err := store.Get(t.Context(), "mgmt")
		if err != nil {
			return -1
		}
		return len(e.Value.GetTrafficPolicies())
	}
	waitUntil(t, "the first, empty snapshot", func() bool { return policies() == 0 })
	res.change("a", "b")
	waitUntil(t, "the snapshot with two policies", func() bool { return policies() == 2 })
	e, err := store.Get(t.Context(), "mgmt")
	if err != nil {
		t.Fatal(err)
	}
	if e.Version != snapshots.InputVersion(e.Value) || e.Value.GetCluster() != "mgmt" {
		t.Fatalf("stored %s for cluster %q, want a sealed snapshot of mgmt", e.Version, e.Value.GetCluster())
	}
	// The same content again is not stored or announced again.
	puts, notices := store.putCount(), len(notifier.all())
	res.change("b", "a")
	res.change("a", "b")
	waitUntil(t, "the cluster to be reported at the version", func() bool {
		for _, st := range in.Clusters() {
			if st.Cluster == "mgmt" {
				return st.Version == e.Version && st.Connections == 1
			}
		}
		return false
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if store.putCount() != puts || len(notifier.all()) != notices {
		t.Fatalf("unchanged content was stored (%d -> %d puts) or announced (%d -> %d)", puts, store.putCount(), notices, len(notifier.all()))
	}
	for _, st := range in.Clusters() {
		if st.Cluster == "mgmt" && st.Connections != 0 {
			t.Fatalf("the management cluster is still connected after Run returned")
		}
	}
}

// recordingWriter records statuses; it fails the first failures writes.
type recordingWriter struct {
	mu       sync.Mutex
	failures int
	written  []string
}

func (w *recordingWriter) WriteStatus(_ context.Context, st *snapshotv1.ResourceStatus) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failures > 0 {
		w.failures--
		return errors.New("conflict")
	}
	w.written = append(w.written, st.GetName())
	return nil
}

func (w *recordingWriter) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.written...)
}

func TestManagementWritesStatusesAndRetries(t *testing.T) {
	in := app.NewIngestor(newCountingStore(), &recordingNotifier{}, nil, slog.New(slog.DiscardHandler), "r")
	m := app.NewManagement(in, newFakeResources(), "mgmt", time.Millisecond, time.Millisecond, slog.New(slog.DiscardHandler))
	outputs := snapstore.NewMemory(func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	put := func(cluster string, names ...string) {
		t.Helper()
		out := &snapshotv1.OutputSnapshot{Cluster: cluster}
		for _, n := range names {
			out.Statuses = append(out.Statuses, &snapshotv1.ResourceStatus{ApiVersion: "networking.meshplane.dev/v1", Kind: "TrafficPolicy", Namespace: "bookinfo", Name: n, Status: []byte(`{}`)})
		}
		if err := outputs.Put(t.Context(), cluster, snapshots.SealOutput(out), out); err != nil {
			t.Fatal(err)
		}
	}
	put("mgmt", "a")
	w := &recordingWriter{failures: 2}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.RunStatuses(ctx, outputs, w) }()

	// Two failed writes, then it lands.
	waitUntil(t, "the status after two failures", func() bool { return len(w.all()) == 1 })
	// Another cluster's output is not written here.
	put("east", "x")
	put("mgmt", "a", "b")
	waitUntil(t, "the statuses of the new output", func() bool { return len(w.all()) == 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunStatuses = %v", err)
	}
	got := w.all()
	if got[0] != "a" || got[1] != "a" || got[2] != "b" {
		t.Fatalf("written %v, want [a a b]", got)
	}
}
