package app_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/memory"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/smallstep"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// changes records ClusterChanged calls.
type changes struct {
	mu    sync.Mutex
	names []string
}

func (c *changes) ClusterChanged(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = append(c.names, name)
}

func (c *changes) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.names
	c.names = nil
	return out
}

// TestRegistrarReportsChanges: every call that changes a record tells the
// mirror; reads and refusals do not.
func TestRegistrarReportsChanges(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := smallstep.New(ca)
	if err != nil {
		t.Fatal(err)
	}
	ch := &changes{}
	stores := app.Stores{Tokens: memory.NewBootstrapTokens(), Clusters: memory.NewClusters(), Revocations: memory.NewRevocations()}
	r := app.NewRegistrar(stores, signer, nil, app.Options{TrustDomain: td, CertTTL: time.Hour, TokenTTL: time.Hour, Changes: ch, Log: slog.New(slog.DiscardHandler)})
	ctx := t.Context()
	created, err := r.CreateCluster(ctx, "east", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Register(ctx, "east", created.Token, csrFor(t, "east"), "v1"); !errors.Is(err, domain.ErrPendingApproval) {
		t.Fatalf("Register while pending: %v", err)
	}
	if _, err := r.ApproveCluster(ctx, "east"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Register(ctx, "east", created.Token, csrFor(t, "east"), "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Renew(ctx, "east", csrFor(t, "east"), "v2"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetCluster(ctx, "east"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.DeregisterCluster(ctx, "east"); err != nil {
		t.Fatal(err)
	}
	want := []string{"east", "east", "east", "east", "east"} // create, approve, register, renew, deregister
	if got := ch.take(); !slices.Equal(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
}

// fakeMirror is a ClusterMirror in memory.
type fakeMirror struct {
	mu      sync.Mutex
	mirrors map[string]domain.Status
	fail    error
}

func (f *fakeMirror) MirrorCluster(_ context.Context, c domain.Cluster) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.mirrors[c.Name] = c.Status
	return nil
}

func (f *fakeMirror) MirroredClusters(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.mirrors {
		out = append(out, n)
	}
	return out, nil
}

func (f *fakeMirror) RemoveMirror(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.mirrors, name)
	return nil
}

// brokenClusters fails every read.
type brokenClusters struct{ app.ClusterStore }

func (brokenClusters) Clusters(context.Context) ([]domain.Cluster, error) {
	return nil, errors.New("store down")
}

func TestMirroringReconcile(t *testing.T) {
	store := memory.NewClusters()
	for _, name := range []string{"east", "west"} {
		if _, err := store.UpdateCluster(t.Context(), name, func(c *domain.Cluster, _ bool) error {
			*c = domain.NewCluster(name, name == "west", time.Now())
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	mirror := &fakeMirror{mirrors: map[string]domain.Status{"gone": domain.StatusRegistered}}
	m := app.NewMirroring(store, mirror, time.Hour, nil)
	if err := m.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := map[string]domain.Status{"east": domain.StatusApproved, "west": domain.StatusPendingApproval}
	if len(mirror.mirrors) != 2 || mirror.mirrors["east"] != want["east"] || mirror.mirrors["west"] != want["west"] {
		t.Fatalf("mirrors %v, want %v", mirror.mirrors, want)
	}

	// The store cannot be read: nothing is removed.
	mirror.mirrors["gone"] = domain.StatusRegistered
	if err := app.NewMirroring(brokenClusters{store}, mirror, time.Hour, nil).Reconcile(t.Context()); err == nil {
		t.Fatal("Reconcile over a broken store succeeded")
	}
	if _, ok := mirror.mirrors["gone"]; !ok {
		t.Fatal("a mirror was removed while the records could not be read")
	}

	// A failing mirror is an error of Reconcile, not a panic or a hang.
	mirror.fail = errors.New("API server down")
	if err := m.Reconcile(t.Context()); err == nil {
		t.Fatal("Reconcile hid the mirror's failure")
	}
}
