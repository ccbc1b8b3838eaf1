package app_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func destination(cluster, namespace, name string) *discoveryv1.Destination {
	return &discoveryv1.Destination{
		Metadata: &commonv1.ObjectMeta{Name: name + "-" + namespace + "-" + cluster, Namespace: namespace, Cluster: cluster},
		Spec: &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
			Ref: &commonv1.ClusterObjectRef{Name: name, Namespace: namespace, Cluster: cluster},
		}}},
	}
}

// sealed builds a sealed snapshot of cluster with one destination per
// service; edit runs before sealing.
func sealed(cluster string, services []string, edit func(*snapshotv1.InputSnapshot)) *snapshotv1.InputSnapshot {
	s := &snapshotv1.InputSnapshot{Cluster: cluster, Agent: &snapshotv1.AgentInfo{Version: "v1.2.3", Replica: "agent-0", Namespace: "meshplane"}}
	for _, svc := range services {
		s.Destinations = append(s.Destinations, destination(cluster, "default", svc))
	}
	if edit != nil {
		edit(s)
	}
	snapshots.SealInput(s)
	return s
}

type validateCase struct {
	name string
	snap *snapshotv1.InputSnapshot
	ok   bool
}

// validateCases are snapshots pushed by cluster east, and whether they may
// replace its last good one.
func validateCases() []validateCase {
	return []validateCase{
		{name: "sealed snapshot of the caller's cluster", snap: sealed("east", []string{"a", "b"}, nil), ok: true},
		{name: "empty sealed snapshot", snap: sealed("east", nil, nil), ok: true},
		{name: "no snapshot", snap: nil},
		{name: "snapshot naming another cluster", snap: sealed("west", []string{"a"}, nil)},
		{name: "snapshot naming no cluster", snap: sealed("", nil, nil)},
		{name: "wrong version", snap: func() *snapshotv1.InputSnapshot {
			s := sealed("east", []string{"a"}, nil)
			s.Version = snapshots.VersionPrefix + "0000"
			return s
		}()},
		{name: "no version", snap: func() *snapshotv1.InputSnapshot {
			s := sealed("east", []string{"a"}, nil)
			s.Version = ""
			return s
		}()},
		{name: "content changed after sealing", snap: func() *snapshotv1.InputSnapshot {
			s := sealed("east", []string{"a"}, nil)
			s.Destinations = append(s.Destinations, destination("east", "default", "z"))
			return s
		}()},
		{name: "destination naming another cluster", snap: sealed("east", []string{"a"}, func(s *snapshotv1.InputSnapshot) {
			s.Destinations = append(s.Destinations, destination("west", "default", "b"))
		})},
		{name: "destination referring to a Service of another cluster", snap: sealed("east", nil, func(s *snapshotv1.InputSnapshot) {
			d := destination("east", "default", "b")
			d.GetSpec().GetKubeService().GetRef().Cluster = "west"
			s.Destinations = append(s.Destinations, d)
		})},
		{name: "workload naming another cluster", snap: sealed("east", nil, func(s *snapshotv1.InputSnapshot) {
			s.Workloads = []*discoveryv1.Workload{{Metadata: &commonv1.ObjectMeta{Name: "w", Namespace: "default", Cluster: "west"}}}
		})},
		{name: "workload of the caller's cluster", ok: true, snap: sealed("east", nil, func(s *snapshotv1.InputSnapshot) {
			s.Workloads = []*discoveryv1.Workload{{Metadata: &commonv1.ObjectMeta{Name: "w", Namespace: "default", Cluster: "east"}}}
		})},
		{name: "mesh naming another cluster", snap: sealed("east", nil, func(s *snapshotv1.InputSnapshot) {
			s.Meshes = []*discoveryv1.Mesh{{Metadata: &commonv1.ObjectMeta{Name: "istiod", Namespace: "istio-system", Cluster: "west"}}}
		})},
		{name: "mesh naming no cluster", snap: sealed("east", nil, func(s *snapshotv1.InputSnapshot) {
			s.Meshes = []*discoveryv1.Mesh{{Metadata: &commonv1.ObjectMeta{Name: "istiod", Namespace: "istio-system"}}}
		})},
		{name: "workload without metadata", snap: sealed("east", nil, func(s *snapshotv1.InputSnapshot) {
			s.Workloads = []*discoveryv1.Workload{{}}
		})},
		{name: "destination with a Service ref naming no cluster", ok: true, snap: sealed("east", nil, func(s *snapshotv1.InputSnapshot) {
			d := destination("east", "default", "b")
			d.GetSpec().GetKubeService().GetRef().Cluster = ""
			s.Destinations = append(s.Destinations, d)
		})},
		{name: "labels", ok: true, snap: sealed("east", []string{"a"}, func(s *snapshotv1.InputSnapshot) {
			s.Destinations[0].Metadata.Labels = map[string]string{"app": "a", "b": "1", "c": "2", "d": "3", "e": "4"}
		})},
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range validateCases() {
		t.Run(tc.name, func(t *testing.T) {
			err := app.Validate("east", tc.snap)
			if tc.ok && err != nil {
				t.Fatalf("Validate: %v, want success", err)
			}
			if !tc.ok && !errors.Is(err, app.ErrInvalidSnapshot) {
				t.Fatalf("Validate: %v, want ErrInvalidSnapshot", err)
			}
		})
	}
}

// countingStore is a SnapshotStore in memory that counts Puts and can be
// made to fail them.
type countingStore struct {
	*snapstore.Memory[*snapshotv1.InputSnapshot]
	mu      sync.Mutex
	puts    int
	failPut error
}

func newCountingStore() *countingStore {
	return &countingStore{Memory: snapstore.NewMemory(func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} })}
}

func (s *countingStore) PutEncoded(ctx context.Context, cluster string, e snapshots.Encoded[*snapshotv1.InputSnapshot]) error {
	if err := s.count(); err != nil {
		return err
	}
	return s.Memory.PutEncoded(ctx, cluster, e)
}

func (s *countingStore) Put(ctx context.Context, cluster, version string, v *snapshotv1.InputSnapshot) error {
	if err := s.count(); err != nil {
		return err
	}
	return s.Memory.Put(ctx, cluster, version, v)
}

func (s *countingStore) count() error {
	s.mu.Lock()
	fail := s.failPut
	if fail == nil {
		s.puts++
	}
	s.mu.Unlock()
	return fail
}

func (s *countingStore) putCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts
}

type notice struct {
	cluster, version string
	data             []byte
	snap             *snapshotv1.InputSnapshot
}

// recordingNotifier records notices and returns err.
type recordingNotifier struct {
	mu      sync.Mutex
	notices []notice
	err     error
}

func (n *recordingNotifier) Notify(_ context.Context, cluster, version string, data []byte) error {
	s := &snapshotv1.InputSnapshot{}
	if err := proto.Unmarshal(data, s); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notices = append(n.notices, notice{cluster, version, data, s})
	return n.err
}

func (n *recordingNotifier) all() []notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]notice(nil), n.notices...)
}

func TestIngestorPush(t *testing.T) {
	ctx := t.Context()
	store := newCountingStore()
	notifier := &recordingNotifier{}
	in := app.NewIngestor(store, notifier, nil, slog.New(slog.DiscardHandler), "replica-1")

	s1 := sealed("east", []string{"a"}, nil)
	s2 := sealed("east", []string{"a", "b"}, nil)
	type want struct {
		err     error
		version string
		puts    int
		notices int
		stored  *snapshotv1.InputSnapshot
	}
	steps := []struct {
		name string
		snap *snapshotv1.InputSnapshot
		want want
	}{
		{"first snapshot is stored and announced", s1, want{version: s1.GetVersion(), puts: 1, notices: 1, stored: s1}},
		{"unchanged version is neither stored nor announced", proto.Clone(s1).(*snapshotv1.InputSnapshot), want{version: s1.GetVersion(), puts: 1, notices: 1, stored: s1}},
		{"snapshot naming another cluster is refused", sealed("west", []string{"a"}, nil), want{err: app.ErrInvalidSnapshot, puts: 1, notices: 1, stored: s1}},
		{"wrong version is refused", func() *snapshotv1.InputSnapshot {
			s := proto.Clone(s2).(*snapshotv1.InputSnapshot)
			s.Version = s1.GetVersion()
			return s
		}(), want{err: app.ErrInvalidSnapshot, puts: 1, notices: 1, stored: s1}},
		{"changed version is stored and announced", s2, want{version: s2.GetVersion(), puts: 2, notices: 2, stored: s2}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			version, err := in.Push(ctx, "east", st.snap)
			if st.want.err != nil {
				if !errors.Is(err, st.want.err) {
					t.Fatalf("Push: %v, want %v", err, st.want.err)
				}
			} else if err != nil || version != st.want.version {
				t.Fatalf("Push = %q, %v; want %q", version, err, st.want.version)
			}
			if got := store.putCount(); got != st.want.puts {
				t.Errorf("store Puts = %d, want %d", got, st.want.puts)
			}
			notices := notifier.all()
			if len(notices) != st.want.notices {
				t.Fatalf("notices = %d, want %d", len(notices), st.want.notices)
			}
			last := notices[len(notices)-1]
			if last.cluster != "east" || last.version != last.snap.GetVersion() {
				t.Errorf("last notice is for %s at %s, snapshot version %s", last.cluster, last.version, last.snap.GetVersion())
			}
			got, err := in.Snapshot(ctx, "east")
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, st.want.stored) {
				t.Errorf("stored snapshot is version %s, want %s", got.GetVersion(), st.want.stored.GetVersion())
			}
		})
	}
	clusters := in.Clusters()
	if len(clusters) != 1 || clusters[0].Cluster != "east" || clusters[0].Version != s2.GetVersion() ||
		clusters[0].AgentVersion != "v1.2.3" || clusters[0].Replica != "replica-1" || clusters[0].LastPush.IsZero() {
		t.Fatalf("Clusters() = %+v, want east at %s", clusters, s2.GetVersion())
	}
}

func TestIngestorPushStoreFailure(t *testing.T) {
	store := newCountingStore()
	store.failPut = errors.New("store down")
	notifier := &recordingNotifier{}
	in := app.NewIngestor(store, notifier, nil, slog.New(slog.DiscardHandler), "r")
	s := sealed("east", []string{"a"}, nil)
	if _, err := in.Push(t.Context(), "east", s); !errors.Is(err, store.failPut) {
		t.Fatalf("Push: %v, want the store's error", err)
	}
	if n := len(notifier.all()); n != 0 {
		t.Fatalf("translation was told about a snapshot that was not stored (%d notices)", n)
	}
	for _, c := range in.Clusters() {
		if c.Version != "" {
			t.Fatalf("cluster %s reports version %s, which was never stored", c.Cluster, c.Version)
		}
	}
}

// A failed notice does not fail the push: translation also follows the
// store.
func TestIngestorPushNotifyFailure(t *testing.T) {
	store := newCountingStore()
	in := app.NewIngestor(store, &recordingNotifier{err: errors.New("translation down")}, nil, slog.New(slog.DiscardHandler), "r")
	s := sealed("east", []string{"a"}, nil)
	version, err := in.Push(t.Context(), "east", s)
	if err != nil || version != s.GetVersion() {
		t.Fatalf("Push = %q, %v; want %q", version, err, s.GetVersion())
	}
	if store.putCount() != 1 {
		t.Fatal("snapshot not stored")
	}
}

func TestIngestorConnect(t *testing.T) {
	in := app.NewIngestor(newCountingStore(), &recordingNotifier{}, nil, slog.New(slog.DiscardHandler), "r")
	connections := func() int {
		for _, c := range in.Clusters() {
			if c.Cluster == "east" {
				return c.Connections
			}
		}
		return -1
	}
	d1 := in.Connect("east")
	d2 := in.Connect("east")
	if got := connections(); got != 2 {
		t.Fatalf("connections = %d, want 2", got)
	}
	d1()
	d1() // disconnecting twice counts once
	if got := connections(); got != 1 {
		t.Fatalf("connections = %d, want 1", got)
	}
	d2()
	if got := connections(); got != 0 {
		t.Fatalf("connections = %d, want 0", got)
	}
}

// FuzzSnapshotDecode pushes arbitrary bytes as an agent's snapshot, as
// the server does with what an agent sends. Nothing may panic; what is
// refused must be refused by decoding and Validate too; and what is
// accepted is the caller's cluster's content, stored at the hash of its
// stored encoding, which for the canonical encoding is InputVersion.
func FuzzSnapshotDecode(f *testing.F) {
	for _, s := range []*snapshotv1.InputSnapshot{
		sealed("east", []string{"a", "b"}, nil),
		sealed("west", []string{"a"}, nil),
		sealed("east", nil, func(s *snapshotv1.InputSnapshot) {
			s.Workloads = []*discoveryv1.Workload{{Metadata: &commonv1.ObjectMeta{Name: "w", Cluster: "east"}}}
		}),
		sealed("east", []string{"a"}, func(s *snapshotv1.InputSnapshot) {
			s.Destinations[0].Metadata.Labels = map[string]string{"app": "a", "b": "1", "c": "2"}
		}),
		{Cluster: "east", Version: "sha256:00"},
	} {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		e, err := snapshots.EncodeInput(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(e.Data)
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x04, 'e', 'a', 's', 't'})
	f.Add([]byte{0x62, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		notifier := &recordingNotifier{}
		in := app.NewIngestor(newCountingStore(), notifier, nil, slog.New(slog.DiscardHandler), "r")
		version, err := in.PushFromAgent(t.Context(), "east", data)
		s := &snapshotv1.InputSnapshot{}
		decodeErr := proto.Unmarshal(data, s)
		if len(data) == 0 {
			decodeErr = errors.New("empty")
		}
		var validateErr error
		if decodeErr == nil {
			validateErr = app.Validate("east", s)
		}
		if err != nil {
			if !errors.Is(err, app.ErrInvalidSnapshot) {
				t.Fatalf("PushFromAgent error %v does not wrap ErrInvalidSnapshot", err)
			}
			if decodeErr == nil && validateErr == nil {
				t.Fatalf("PushFromAgent refused what decodes and validates: %v", err)
			}
			return
		}
		notices := notifier.all()
		if len(notices) != 1 || notices[0].cluster != "east" || notices[0].snap.GetCluster() != "east" {
			t.Fatalf("accepted, but %d notices, or not east's content", len(notices))
		}
		stored, err := snapshots.ReadInput(notices[0].data)
		if err != nil || stored.EncodedVersion != version {
			t.Fatalf("stored encoding hashes to %s (%v), stored as %s", stored.EncodedVersion, err, version)
		}
		canonical, err := snapshots.EncodeInput(notices[0].snap)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(canonical.Data, notices[0].data) && (version != snapshots.InputVersion(notices[0].snap) || validateErr != nil) {
			t.Fatalf("accepted the canonical encoding at %s, InputVersion %s, Validate: %v", version, snapshots.InputVersion(notices[0].snap), validateErr)
		}
	})
}

// failingShared is a shared store that cannot be reached.
type failingShared struct{}

func (failingShared) Version(context.Context, string) (string, error) {
	return "", errors.New("redis down")
}

func (failingShared) Put(context.Context, string, string, *snapshotv1.InputSnapshot) error {
	return errors.New("redis down")
}

func TestIngestorRestore(t *testing.T) {
	ctx := t.Context()
	local := newCountingStore()
	in := app.NewIngestor(local, &recordingNotifier{}, nil, slog.New(slog.DiscardHandler), "r")
	east, west := sealed("east", []string{"a"}, nil), sealed("west", []string{"b"}, nil)
	disconnectEast := in.Connect("east")
	for _, s := range []*snapshotv1.InputSnapshot{east, west} {
		if _, err := in.Push(ctx, s.GetCluster(), s); err != nil {
			t.Fatal(err)
		}
	}
	// north is connected but has pushed nothing yet.
	defer in.Connect("north")()

	t.Run("store unreachable", func(t *testing.T) {
		restored, err := in.Restore(ctx, failingShared{})
		if err == nil || len(restored) != 0 {
			t.Fatalf("Restore = %v, %v; want an error and nothing restored", restored, err)
		}
	})

	// An empty shared store, as Redis after a restart.
	shared := newCountingStore()
	steps := []struct {
		name string
		want []string
	}{
		{"connected cluster is restored, disconnected one is left to its replica", []string{"east"}},
		{"nothing to do once the store holds it", nil},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			restored, err := in.Restore(ctx, shared)
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if len(restored) != len(st.want) || (len(st.want) > 0 && restored[0] != st.want[0]) {
				t.Fatalf("restored %v, want %v", restored, st.want)
			}
		})
	}
	e, err := shared.Get(ctx, "east")
	if err != nil || !proto.Equal(e.Value, east) || e.Version != east.GetVersion() {
		t.Fatalf("shared store holds %v (%v), want east's snapshot", e.Version, err)
	}
	if _, err := shared.Get(ctx, "west"); !errors.Is(err, snapshots.ErrNotFound) {
		t.Fatalf("west was restored by a replica it is not connected to (err %v)", err)
	}
	if shared.putCount() != 1 {
		t.Fatalf("shared store got %d writes, want 1", shared.putCount())
	}

	disconnectEast()
	// A shared store that lost everything (Redis back empty) after east
	// disconnected: this replica no longer holds east's input to restore.
	if restored, err := in.Restore(ctx, newCountingStore()); err != nil || len(restored) != 0 {
		t.Fatalf("Restore after east disconnected = %v, %v; want nothing", restored, err)
	}
}

func TestClustersStale(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	in := app.NewIngestor(newCountingStore(), &recordingNotifier{}, nil, slog.New(slog.DiscardHandler), "replica-1",
		app.WithStaleAfter(5*time.Minute), app.WithClock(clock))
	stale := func() map[string]bool {
		out := map[string]bool{}
		for _, st := range in.Clusters() {
			out[st.Cluster] = st.Stale
		}
		return out
	}
	ctx := t.Context()
	disconnectEast := in.Connect("east")
	if _, err := in.Push(ctx, "east", sealed("east", []string{"a"}, nil)); err != nil {
		t.Fatal(err)
	}
	disconnectWest := in.Connect("west")
	if _, err := in.Push(ctx, "west", sealed("west", []string{"a"}, nil)); err != nil {
		t.Fatal(err)
	}
	disconnectWest()
	_ = in.Connect("north") // connected, never pushed

	now = now.Add(5 * time.Minute)
	if got := stale(); got["east"] || got["west"] || got["north"] {
		t.Fatalf("at the window: %v, want none stale", got)
	}
	now = now.Add(time.Nanosecond)
	if got := stale(); got["east"] || !got["west"] || got["north"] {
		t.Fatalf("past the window: %v, want only west stale", got)
	}
	disconnectEast()
	if got := stale(); !got["east"] || !got["west"] {
		t.Fatalf("east disconnected past the window: %v, want east and west stale", got)
	}
	if _, err := in.Snapshot(ctx, "west"); err != nil {
		t.Fatalf("stale cluster's snapshot: %v, want it kept", err)
	}

	// Without a window nothing is ever stale.
	never := app.NewIngestor(newCountingStore(), &recordingNotifier{}, nil, slog.New(slog.DiscardHandler), "replica-1", app.WithClock(clock))
	if _, err := never.Push(ctx, "east", sealed("east", nil, nil)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(24 * time.Hour)
	if st := never.Clusters(); len(st) != 1 || st[0].Stale {
		t.Fatalf("no window: %v, want east not stale", st)
	}
}

// PushFromAgent, which checks the encoding in place, accepts and refuses
// what Validate does, with the same messages.
func TestPushFromAgentAgreesWithValidate(t *testing.T) {
	for _, tc := range validateCases() {
		t.Run(tc.name, func(t *testing.T) {
			notifier := &recordingNotifier{}
			in := app.NewIngestor(newCountingStore(), notifier, nil, slog.New(slog.DiscardHandler), "r")
			var data []byte
			if tc.snap != nil {
				e, err := snapshots.EncodeInput(tc.snap)
				if err != nil {
					t.Fatal(err)
				}
				data = e.Data
			}
			want := app.Validate("east", tc.snap)
			version, err := in.PushFromAgent(t.Context(), "east", data)
			if (err == nil) != (want == nil) || err != nil && err.Error() != want.Error() {
				t.Fatalf("PushFromAgent: %v; Validate: %v", err, want)
			}
			if err != nil {
				if !errors.Is(err, app.ErrInvalidSnapshot) {
					t.Fatalf("PushFromAgent: %v, want ErrInvalidSnapshot", err)
				}
				if n := len(notifier.all()); n != 0 {
					t.Fatalf("a refused snapshot was announced (%d notices)", n)
				}
				return
			}
			if version != tc.snap.GetVersion() {
				t.Fatalf("PushFromAgent stored %s, want %s", version, tc.snap.GetVersion())
			}
			// The canonical encoding is forwarded as it came.
			notices := notifier.all()
			if len(notices) != 1 || !bytes.Equal(notices[0].data, data) || notices[0].version != version {
				t.Fatalf("notices %d; want the pushed bytes at %s", len(notices), version)
			}
		})
	}
}

func TestPushFromAgentEncodings(t *testing.T) {
	s := sealed("east", []string{"a", "b"}, func(s *snapshotv1.InputSnapshot) {
		s.Destinations[0].Metadata.Labels = map[string]string{"app": "a", "b": "1", "c": "2", "d": "3", "e": "4"}
	})
	e, err := snapshots.EncodeInput(s)
	if err != nil {
		t.Fatal(err)
	}
	// The same content with the cluster field sent twice: decoding takes
	// the last, so it is the same snapshot, but not its canonical encoding.
	twice := protowire.AppendString(protowire.AppendTag(bytes.Clone(e.Data), 1, protowire.BytesType), "east")
	for _, tc := range []struct {
		name string
		data []byte
		// canonical: the bytes are forwarded as they came.
		canonical bool
		err       string
	}{
		{name: "canonical", data: e.Data, canonical: true},
		{name: "another valid encoding", data: twice},
		{name: "truncated", data: e.Data[:len(e.Data)-5], err: "malformed snapshot encoding"},
		{name: "garbage", data: []byte("GET / HTTP/1.1\r\n"), err: "malformed snapshot encoding"},
		{name: "invalid UTF-8", data: append(bytes.Clone(e.Data), 0x0a, 0x01, 0xff), err: "invalid UTF-8"},
		{name: "empty", data: nil, err: "no snapshot in the request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notifier := &recordingNotifier{}
			store := newCountingStore()
			in := app.NewIngestor(store, notifier, nil, slog.New(slog.DiscardHandler), "r")
			version, err := in.PushFromAgent(t.Context(), "east", tc.data)
			if tc.err != "" {
				if !errors.Is(err, app.ErrInvalidSnapshot) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("PushFromAgent: %v, want ErrInvalidSnapshot saying %q", err, tc.err)
				}
				if store.putCount() != 0 {
					t.Fatal("a refused snapshot was stored")
				}
				return
			}
			if err != nil || version != s.GetVersion() {
				t.Fatalf("PushFromAgent = %q, %v; want %q", version, err, s.GetVersion())
			}
			notices := notifier.all()
			if len(notices) != 1 || !proto.Equal(notices[0].snap, s) {
				t.Fatalf("notices %d; want one of the snapshot", len(notices))
			}
			if forwarded := bytes.Equal(notices[0].data, tc.data); forwarded != tc.canonical {
				t.Fatalf("forwarded the bytes as sent: %v, want %v", forwarded, tc.canonical)
			}
			got, err := in.Snapshot(t.Context(), "east")
			if err != nil || !proto.Equal(got, s) {
				t.Fatalf("stored snapshot differs (%v)", err)
			}
			clusters := in.Clusters()
			if len(clusters) != 1 || clusters[0].AgentVersion != "v1.2.3" || clusters[0].Version != s.GetVersion() {
				t.Fatalf("Clusters() = %+v", clusters)
			}
		})
	}
}

func TestPushFromAgentRefusesReservedCluster(t *testing.T) {
	in := app.NewIngestor(newCountingStore(), &recordingNotifier{}, nil, slog.New(slog.DiscardHandler), "r")
	in.Reserve("mgmt")
	e, err := snapshots.EncodeInput(sealed("mgmt", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.PushFromAgent(t.Context(), "mgmt", e.Data); !errors.Is(err, app.ErrReservedCluster) {
		t.Fatalf("PushFromAgent: %v, want ErrReservedCluster", err)
	}
}
