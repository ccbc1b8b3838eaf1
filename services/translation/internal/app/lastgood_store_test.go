package app_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/translation/internal/app"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
)

// recordStore is a LastGoodStore in memory whose Load fails while down is
// set.
type recordStore struct {
	mu    sync.Mutex
	down  bool
	loads int // Load calls
	m     map[string]domain.KeptVersion
}

func newRecordStore() *recordStore { return &recordStore{m: map[string]domain.KeptVersion{}} }

func (s *recordStore) Load(context.Context) ([]domain.KeptVersion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads++
	if s.down {
		return nil, errors.New("the management cluster is unreachable")
	}
	var out []domain.KeptVersion
	for _, v := range s.m {
		v.Spec = proto.Clone(v.Spec)
		out = append(out, v)
	}
	return out, nil
}

func (s *recordStore) Put(_ context.Context, v domain.KeptVersion) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v.Spec = proto.Clone(v.Spec)
	s.m[v.Kind+" "+v.Key.String()] = v
	return nil
}

func (s *recordStore) Delete(_ context.Context, kind string, key domain.ObjectKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, kind+" "+key.String())
	return nil
}

func (s *recordStore) generation(kind string, key domain.ObjectKey) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[kind+" "+key.String()]
	return v.Generation, ok
}

func (s *recordStore) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

var retriesKey = domain.ObjectKey{Cluster: "east", Namespace: "default", Name: "retries"}

// startWithStore runs a translator with store until the returned stop is
// called.
func startWithStore(t *testing.T, store app.LastGoodStore, outputs *snapstore.Memory[*snapshotv1.OutputSnapshot], window time.Duration) (*app.Translator, func()) {
	tr := app.NewTranslator(app.Config{Debounce: 5 * time.Millisecond, RetryInterval: 10 * time.Millisecond, SafeStartWindow: window},
		snapstore.NewMemory(newInput), outputs, nil, slog.New(slog.NewTextHandler(t.Output(), nil)), app.WithLastGoodStore(store))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return tr, stop
}

func submitAndWait(t *testing.T, tr *app.Translator, outputs *snapstore.Memory[*snapshotv1.OutputSnapshot], in *snapshotv1.InputSnapshot) *snapshotv1.OutputSnapshot {
	t.Helper()
	if err := tr.Submit(in.GetCluster(), in); err != nil {
		t.Fatal(err)
	}
	var o *snapshotv1.OutputSnapshot
	waitUntil(t, "the input to be translated", func() bool {
		got, ok := tr.Output(in.GetCluster())
		if ok && got.GetInputVersions()[in.GetCluster()] == in.GetVersion() {
			o = got
			return true
		}
		return false
	})
	waitVersion(t, outputs, in.GetCluster(), o.GetVersion())
	return o
}

func virtualServiceOf(o *snapshotv1.OutputSnapshot) string {
	for _, obj := range o.GetObjects() {
		if obj.GetKind() == domain.KindVirtualService {
			return string(obj.GetSpec())
		}
	}
	return ""
}

// A restart of the plane with a policy INVALID keeps its last valid
// version: the new translator reads it from the store before it
// publishes.
func TestLastGoodSurvivesRestart(t *testing.T) {
	store := newRecordStore()
	outputs := snapstore.NewMemory(newOutput)
	tr, stop := startWithStore(t, store, outputs, time.Minute)
	v1 := submitAndWait(t, tr, outputs, withRetries(1, 3))
	waitUntil(t, "generation 1 to be stored", func() bool { g, ok := store.generation(domain.KindTrafficPolicy, retriesKey); return ok && g == 1 })
	v2 := submitAndWait(t, tr, outputs, withRetries(2, -1))
	if virtualServiceOf(v2) != virtualServiceOf(v1) {
		t.Fatalf("invalid edit changed the VirtualService to %q", virtualServiceOf(v2))
	}
	stop()

	// A new plane, with nothing in memory and an empty output store (Redis
	// was lost too).
	outputs2 := snapstore.NewMemory(newOutput)
	tr2, _ := startWithStore(t, store, outputs2, time.Minute)
	o := submitAndWait(t, tr2, outputs2, withRetries(2, -1))
	if got := virtualServiceOf(o); got != virtualServiceOf(v1) || !strings.Contains(got, `"attempts":3`) {
		t.Fatalf("after a restart the invalid policy's VirtualService is %q, want the last valid one %q", got, virtualServiceOf(v1))
	}
	var st string
	for _, s := range o.GetStatuses() {
		if s.GetKind() == domain.KindTrafficPolicy {
			st = string(s.GetStatus())
		}
	}
	if !strings.Contains(st, `"lastKnownGood":true`) || !strings.Contains(st, "generation 1") {
		t.Errorf("status after a restart %s, want lastKnownGood with generation 1", st)
	}
	if g, _ := store.generation(domain.KindTrafficPolicy, retriesKey); g != 1 {
		t.Errorf("stored generation %d, want 1 (the invalid edit is not a valid version)", g)
	}

	// A valid edit is stored; deleting the policy deletes its record.
	submitAndWait(t, tr2, outputs2, withRetries(3, 5))
	waitUntil(t, "generation 3 to be stored", func() bool { g, _ := store.generation(domain.KindTrafficPolicy, retriesKey); return g == 3 })
	submitAndWait(t, tr2, outputs2, input("east", "reviews"))
	waitUntil(t, "the deleted policy's record to go", func() bool { _, ok := store.generation(domain.KindTrafficPolicy, retriesKey); return !ok })
}

// The records of a cluster that has not reported since the restart are
// kept: its resources are missing from translation, not deleted.
func TestLastGoodKeepsClustersThatHaveNotReported(t *testing.T) {
	store := newRecordStore()
	west := domain.ObjectKey{Cluster: "west", Namespace: "default", Name: "timeouts"}
	if err := store.Put(t.Context(), domain.KeptVersion{Kind: domain.KindTrafficPolicy, Key: west, Generation: 4, Spec: &networkingv1.TrafficPolicySpec{}}); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(t.Context(), domain.KeptVersion{Kind: domain.KindTrafficPolicy, Key: retriesKey, Generation: 1, Spec: &networkingv1.TrafficPolicySpec{}}); err != nil {
		t.Fatal(err)
	}
	outputs := snapstore.NewMemory(newOutput)
	tr, _ := startWithStore(t, store, outputs, time.Minute)
	// East reports without its policy: it was deleted.
	submitAndWait(t, tr, outputs, input("east", "reviews"))
	waitUntil(t, "east's deleted policy's record to go", func() bool { _, ok := store.generation(domain.KindTrafficPolicy, retriesKey); return !ok })
	if _, ok := store.generation(domain.KindTrafficPolicy, west); !ok {
		t.Fatal("the record of a cluster that has not reported was deleted")
	}
}

// Until the stored versions are read, nothing is published: an output
// would leave out every resource that is invalid now. Once the store
// answers, the output keeps them.
func TestPublishingWaitsForLastGood(t *testing.T) {
	store := newRecordStore()
	good := &networkingv1.TrafficPolicySpec{
		DestinationSelector: []*networkingv1.DestinationSelector{{Type: &networkingv1.DestinationSelector_KubeServiceRefs_{
			KubeServiceRefs: &networkingv1.DestinationSelector_KubeServiceRefs{Services: []*commonv1.ClusterObjectRef{{Name: "reviews", Namespace: "default", Cluster: "east"}}},
		}}},
		Policy: &networkingv1.TrafficPolicySpec_Policy{Retries: &networkingv1.TrafficPolicySpec_Policy_RetryPolicy{Attempts: 7}},
	}
	if err := store.Put(t.Context(), domain.KeptVersion{Kind: domain.KindTrafficPolicy, Key: retriesKey, Generation: 1, Spec: good}); err != nil {
		t.Fatal(err)
	}
	store.setDown(true)
	outputs := snapstore.NewMemory(newOutput)
	tr, _ := startWithStore(t, store, outputs, time.Hour)
	in := withRetries(2, -1)
	if err := tr.Submit("east", in); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the input to be translated", func() bool { _, ok := tr.Output("east"); return ok })
	// The translator tries the store again on its retry ticks; after
	// several failed tries, nothing has been published.
	waitUntil(t, "three failed reads of the store", func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		return store.loads >= 3
	})
	if v, _ := outputs.Version(t.Context(), "east"); v != "" {
		t.Fatalf("published %s before the last valid versions were read", v)
	}
	store.setDown(false)
	var o *snapshotv1.OutputSnapshot
	waitUntil(t, "an output with the stored version", func() bool {
		e, err := outputs.Get(t.Context(), "east")
		if err != nil {
			return false
		}
		o = e.Value
		return strings.Contains(virtualServiceOf(o), `"attempts":7`)
	})
}
