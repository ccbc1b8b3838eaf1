package app_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/translation/internal/app"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
)

func newInput() *snapshotv1.InputSnapshot   { return &snapshotv1.InputSnapshot{} }
func newOutput() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} }

func input(cluster string, services ...string) *snapshotv1.InputSnapshot {
	in := &snapshotv1.InputSnapshot{Cluster: cluster}
	for _, s := range services {
		in.Destinations = append(in.Destinations, &discoveryv1.Destination{
			Metadata: &commonv1.ObjectMeta{Name: s + "-default-" + cluster, Namespace: "default", Cluster: cluster},
			Spec: &discoveryv1.DestinationSpec{Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
				Ref: &commonv1.ClusterObjectRef{Name: s, Namespace: "default", Cluster: cluster},
			}}},
		})
	}
	snapshots.SealInput(in)
	return in
}

// expected is the output that translation must publish for in.
func expected(t *testing.T, in *snapshotv1.InputSnapshot) *snapshotv1.OutputSnapshot {
	t.Helper()
	out, err := domain.Translate(map[string]*snapshotv1.InputSnapshot{in.GetCluster(): in}, domain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return out[in.GetCluster()]
}

// run starts tr until the test ends.
func run(t *testing.T, tr *app.Translator) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// waitVersion waits until store holds version for cluster.
func waitVersion(t *testing.T, store interface {
	Version(context.Context, string) (string, error)
}, cluster, version string) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("the output of %s at %s", cluster, version), func() bool {
		got, _ := store.Version(t.Context(), cluster)
		return got == version
	})
}

func newTranslator(t *testing.T, source app.InputSource, publish app.OutputPublisher) *app.Translator {
	return app.NewTranslator(app.Config{Debounce: 5 * time.Millisecond, RetryInterval: 10 * time.Millisecond},
		source, publish, nil, slog.New(slog.NewTextHandler(t.Output(), nil)))
}

func TestSubmitPublishes(t *testing.T) {
	inputs, outputs := snapstore.NewMemory(newInput), snapstore.NewMemory(newOutput)
	tr := newTranslator(t, inputs, outputs)
	run(t, tr)

	steps := []*snapshotv1.InputSnapshot{
		input("east", "reviews", "ratings"),
		input("east", "reviews"), // ratings removed
		input("east"),            // everything removed
	}
	for _, in := range steps {
		if err := tr.Submit("east", in); err != nil {
			t.Fatalf("Submit: %v", err)
		}
		want := expected(t, in)
		waitVersion(t, outputs, "east", want.GetVersion())
		e, err := outputs.Get(t.Context(), "east")
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Value.GetObjects()) != len(in.GetDestinations()) {
			t.Fatalf("published %d objects for %d destinations", len(e.Value.GetObjects()), len(in.GetDestinations()))
		}
		if got, ok := tr.Output("east"); !ok || got.GetVersion() != want.GetVersion() {
			t.Fatalf("Output(east) = %s, %v; want %s", got.GetVersion(), ok, want.GetVersion())
		}
		if v := tr.OutputVersions()["east"]; v != want.GetVersion() {
			t.Fatalf("OutputVersions()[east] = %s, want %s", v, want.GetVersion())
		}
	}
}

// Translation follows the input store too, so a lost notice from ingest
// only delays a change.
func TestFollowsInputStore(t *testing.T) {
	inputs, outputs := snapstore.NewMemory(newInput), snapstore.NewMemory(newOutput)
	before := input("west", "details")
	if err := inputs.Put(t.Context(), "west", before.GetVersion(), before); err != nil {
		t.Fatal(err)
	}
	tr := newTranslator(t, inputs, outputs)
	run(t, tr)
	waitVersion(t, outputs, "west", expected(t, before).GetVersion())

	after := input("west", "details", "ratings")
	if err := inputs.Put(t.Context(), "west", after.GetVersion(), after); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, outputs, "west", expected(t, after).GetVersion())
}

func TestSubmitInvalid(t *testing.T) {
	tr := newTranslator(t, snapstore.NewMemory(newInput), snapstore.NewMemory(newOutput))
	for _, tc := range []struct {
		name    string
		cluster string
		in      *snapshotv1.InputSnapshot
	}{
		{"snapshot of another cluster", "east", input("west", "a")},
		{"no cluster", "", input("east", "a")},
		{"no snapshot", "east", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tr.Submit(tc.cluster, tc.in); !errors.Is(err, app.ErrInvalidInput) {
				t.Fatalf("Submit: %v, want ErrInvalidInput", err)
			}
		})
	}
	if _, ok := tr.Output("west"); ok {
		t.Fatal("an invalid input produced an output")
	}
}

// flakySource fails Subscribe until it is told to work.
type flakySource struct {
	*snapstore.Memory[*snapshotv1.InputSnapshot]
	mu   sync.Mutex
	down bool
}

func (f *flakySource) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *flakySource) isDown() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down
}

var errDown = errors.New("store down")

func (f *flakySource) Subscribe(ctx context.Context) (<-chan snapshots.Change, error) {
	if f.isDown() {
		return nil, errDown
	}
	return f.Memory.Subscribe(ctx)
}

func (f *flakySource) List(ctx context.Context) ([]snapshots.Entry[*snapshotv1.InputSnapshot], error) {
	if f.isDown() {
		return nil, errDown
	}
	return f.Memory.List(ctx)
}

// A store that is down when translation starts is followed once it is back:
// inputs written meanwhile are picked up without a notice from ingest.
func TestStoreDownAtStart(t *testing.T) {
	source := &flakySource{Memory: snapstore.NewMemory(newInput), down: true}
	outputs := snapstore.NewMemory(newOutput)
	tr := newTranslator(t, source, outputs)
	run(t, tr)

	// Notices from ingest work while the store is down.
	east := input("east", "reviews")
	if err := tr.Submit("east", east); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, outputs, "east", expected(t, east).GetVersion())

	// Written while the subscription was failing, no notice.
	west := input("west", "details")
	if err := source.Memory.Put(t.Context(), "west", west.GetVersion(), west); err != nil {
		t.Fatal(err)
	}
	source.setDown(false)
	waitVersion(t, outputs, "west", expected(t, west).GetVersion())

	// And changes after that arrive through the subscription.
	west2 := input("west", "details", "ratings")
	if err := source.Memory.Put(t.Context(), "west", west2.GetVersion(), west2); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, outputs, "west", expected(t, west2).GetVersion())
}

// flakyPublisher fails the first fails puts.
type flakyPublisher struct {
	*snapstore.Memory[*snapshotv1.OutputSnapshot]
	mu    sync.Mutex
	fails int
}

func (p *flakyPublisher) PutEncoded(ctx context.Context, cluster string, e snapshots.Encoded[*snapshotv1.OutputSnapshot]) error {
	p.mu.Lock()
	if p.fails > 0 {
		p.fails--
		p.mu.Unlock()
		return errDown
	}
	p.mu.Unlock()
	return p.Memory.PutEncoded(ctx, cluster, e)
}

func TestPublishRetried(t *testing.T) {
	publisher := &flakyPublisher{Memory: snapstore.NewMemory(newOutput), fails: 3}
	tr := newTranslator(t, snapstore.NewMemory(newInput), publisher)
	run(t, tr)
	in := input("east", "reviews")
	if err := tr.Submit("east", in); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, publisher, "east", expected(t, in).GetVersion())
}

// resyncSource is a memory store whose change feed the test drives.
type resyncSource struct {
	*snapstore.Memory[*snapshotv1.InputSnapshot]
	changes chan snapshots.Change
}

func (r *resyncSource) Subscribe(ctx context.Context) (<-chan snapshots.Change, error) {
	out := make(chan snapshots.Change)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-r.changes:
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// A store that comes back empty (Redis restarted without persistence) gets
// every output again on the resync that follows, not only the ones that
// change later.
func TestResyncRepublishesLostOutputs(t *testing.T) {
	source := &resyncSource{Memory: snapstore.NewMemory(newInput), changes: make(chan snapshots.Change)}
	outputs := &losingOutputs{store: snapstore.NewMemory(newOutput)}
	tr := newTranslator(t, source, outputs)
	run(t, tr)

	east := input("east", "reviews")
	if err := tr.Submit("east", east); err != nil {
		t.Fatal(err)
	}
	want := expected(t, east).GetVersion()
	waitVersion(t, outputs, "east", want)

	outputs.loseAll()
	if _, err := outputs.Version(t.Context(), "east"); !errors.Is(err, snapshots.ErrNotFound) {
		t.Fatalf("east's output is still there after the loss (%v)", err)
	}
	select {
	case source.changes <- snapshots.Change{Resync: true}:
	case <-time.After(10 * time.Second):
		t.Fatal("translator is not reading changes")
	}
	waitVersion(t, outputs, "east", want)
}

// losingOutputs publishes to a memory store that loseAll replaces with an
// empty one, as Redis restarted without persistence comes back.
type losingOutputs struct {
	mu    sync.Mutex
	store *snapstore.Memory[*snapshotv1.OutputSnapshot]
}

func (l *losingOutputs) current() *snapstore.Memory[*snapshotv1.OutputSnapshot] {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.store
}

func (l *losingOutputs) PutEncoded(ctx context.Context, cluster string, e snapshots.Encoded[*snapshotv1.OutputSnapshot]) error {
	return l.current().PutEncoded(ctx, cluster, e)
}

func (l *losingOutputs) List(ctx context.Context) ([]snapshots.Entry[*snapshotv1.OutputSnapshot], error) {
	return l.current().List(ctx)
}

func (l *losingOutputs) Version(ctx context.Context, cluster string) (string, error) {
	return l.current().Version(ctx, cluster)
}

func (l *losingOutputs) loseAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.store = snapstore.NewMemory(newOutput)
}
