package app_test

import (
	"context"
	"errors"
	"github.com/meshplane/meshplane/libs/revocation"
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

// fakeMirror is a ClusterMirror and ClusterArchive in memory.
type fakeMirror struct {
	mu      sync.Mutex
	mirrors map[string]domain.Cluster
	fail    error
}

func (f *fakeMirror) MirrorCluster(_ context.Context, c domain.Cluster) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	// The mirror keeps the newest certificate only.
	if latest, ok := c.Latest(); ok {
		c.Certs = []domain.IssuedCert{latest}
	}
	f.mirrors[c.Name] = c
	return nil
}

func (f *fakeMirror) ArchivedClusters(context.Context) ([]domain.Cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	var out []domain.Cluster
	for _, c := range f.mirrors {
		out = append(out, c)
	}
	return out, nil
}

func (f *fakeMirror) ArchivedCluster(_ context.Context, name string) (domain.Cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return domain.Cluster{}, f.fail
	}
	c, ok := f.mirrors[name]
	if !ok {
		return domain.Cluster{}, app.ErrNotFound
	}
	return c, nil
}

func (f *fakeMirror) status(name string) domain.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mirrors[name].Status
}

// brokenClusters fails every read.
type brokenClusters struct{ app.ClusterStore }

func (brokenClusters) Clusters(context.Context) ([]domain.Cluster, error) {
	return nil, errors.New("store down")
}

func (brokenClusters) Cluster(context.Context, string) (domain.Cluster, error) {
	return domain.Cluster{}, errors.New("store down")
}

func registered(name, serial string, now time.Time) domain.Cluster {
	c := domain.NewCluster(name, false, now)
	c.RecordIssued(domain.IssuedCert{Serial: serial, NotAfter: now.Add(time.Hour)}, "v1", now)
	return c
}

// TestMirroringReconcile: records are mirrored; mirrors whose records the
// store lost are re-seeded into it, never removed; a deregistered
// cluster's certificate is revoked again.
func TestMirroringReconcile(t *testing.T) {
	now := time.Now()
	store := memory.NewClusters()
	for _, name := range []string{"east", "west"} {
		if _, err := store.UpdateCluster(t.Context(), name, func(c *domain.Cluster, _ bool) error {
			*c = domain.NewCluster(name, name == "west", now)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	gone := registered("gone", "111", now)
	old := registered("old", "222", now)
	old.Deregister(now)
	mirror := &fakeMirror{mirrors: map[string]domain.Cluster{"gone": gone, "old": old}}
	revocations := memory.NewRevocations()
	reseed := app.NewReseeder(store, mirror, app.NewRevoker(revocations, nil), func() time.Time { return now }, nil)
	m := app.NewMirroring(store, mirror, reseed, time.Hour, nil)
	if err := m.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := map[string]domain.Status{"east": domain.StatusApproved, "west": domain.StatusPendingApproval, "gone": domain.StatusRegistered, "old": domain.StatusDeregistered}
	for name, st := range want {
		if got := mirror.status(name); got != st {
			t.Errorf("mirror of %s is %v, want %v", name, got, st)
		}
		c, err := store.Cluster(t.Context(), name)
		if err != nil || c.Status != st {
			t.Errorf("record of %s: %v, %v; want %v", name, c.Status, err, st)
		}
	}
	if c, _ := store.Cluster(t.Context(), "gone"); len(c.Certs) != 1 || c.Certs[0].Serial != "111" {
		t.Errorf("re-seeded gone holds certificates %v, want serial 111", c.Certs)
	}
	if serials, err := revocation.Serials(revocations.Revoked(t.Context(), now)); err != nil || !slices.Equal(serials, []string{"222"}) {
		t.Errorf("revoked %v, %v; want the deregistered cluster's serial 222 revoked again", serials, err)
	}

	// The store cannot be read: nothing is re-seeded over it, and the
	// mirrors stay.
	if err := app.NewMirroring(brokenClusters{store}, mirror, app.NewReseeder(brokenClusters{store}, mirror, app.NewRevoker(revocations, nil), nil, nil), time.Hour, nil).Reconcile(t.Context()); err == nil {
		t.Fatal("Reconcile over a broken store succeeded")
	}
	if mirror.status("gone") != domain.StatusRegistered {
		t.Fatal("a mirror changed while the records could not be read")
	}

	// A failing mirror is an error of Reconcile, not a panic or a hang.
	mirror.fail = errors.New("API server down")
	if err := m.Reconcile(t.Context()); err == nil {
		t.Fatal("Reconcile hid the mirror's failure")
	}
}

// TestDeregisterAfterStoreLoss: the store lost east's record (Redis
// restarted empty) while east's agent holds a valid certificate.
// Deregistration re-seeds the record from its mirror and revokes the
// certificate, and a renewal with it is refused.
func TestDeregisterAfterStoreLoss(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := smallstep.New(ca)
	if err != nil {
		t.Fatal(err)
	}
	newStores := func() app.Stores {
		return app.Stores{Tokens: memory.NewBootstrapTokens(), Clusters: memory.NewClusters(), Revocations: memory.NewRevocations()}
	}
	before := newStores()
	mirror := &fakeMirror{mirrors: map[string]domain.Cluster{}}
	opts := app.Options{TrustDomain: td, CertTTL: time.Hour, TokenTTL: time.Hour, Log: slog.New(slog.DiscardHandler)}
	r := app.NewRegistrar(before, signer, nil, opts)
	ctx := t.Context()
	created, err := r.CreateCluster(ctx, "east", false, 0)
	if err != nil {
		t.Fatal(err)
	}
	issued, err := r.Register(ctx, "east", created.Token, csrFor(t, "east"), "v1")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := before.Clusters.Cluster(ctx, "east")
	if err != nil {
		t.Fatal(err)
	}
	if err := mirror.MirrorCluster(ctx, rec); err != nil {
		t.Fatal(err)
	}

	// Without a durable copy, the lost record cannot be deregistered.
	after := newStores()
	if _, _, err := app.NewRegistrar(after, signer, nil, opts).DeregisterCluster(ctx, "east"); !errors.Is(err, domain.ErrClusterNotFound) {
		t.Fatalf("deregistering a lost record without a mirror: %v, want not found", err)
	}

	opts.Reseed = app.NewReseeder(after.Clusters, mirror, app.NewRevoker(after.Revocations, nil), nil, nil)
	r = app.NewRegistrar(after, signer, nil, opts)
	c, n, err := r.DeregisterCluster(ctx, "east")
	if err != nil || n != 1 || c.Status != domain.StatusDeregistered {
		t.Fatalf("DeregisterCluster after the store loss = %v, %d, %v; want deregistered, 1 revoked", c.Status, n, err)
	}
	serials, err := revocation.Serials(after.Revocations.Revoked(ctx, time.Now()))
	if err != nil || !slices.Equal(serials, []string{issued.Serial}) {
		t.Fatalf("revoked %v, %v; want the live certificate %s", serials, err, issued.Serial)
	}
	if _, err := r.Renew(ctx, "east", csrFor(t, "east"), "v1"); !errors.Is(err, domain.ErrDeregistered) {
		t.Fatalf("renewal after deregistration: %v", err)
	}
}

// Preload puts every live certificate of the archive's deregistered
// clusters into the cache, without touching the store: a plane that
// starts with an emptied store refuses them from its first call.
func TestReseederPreloadsArchivedRevocations(t *testing.T) {
	now := time.Now()
	old := registered("old", "222", now)
	old.RecordIssued(domain.IssuedCert{Serial: "223", NotAfter: now.Add(2 * time.Hour)}, "", now)
	old.Deregister(now)
	live := registered("live", "333", now)
	mirror := &fakeMirror{mirrors: map[string]domain.Cluster{"old": old, "live": live}}
	store := memory.NewRevocations()
	cache := app.NewRevocations(store, time.Hour, nil)
	reseed := app.NewReseeder(memory.NewClusters(), mirror, app.NewRevoker(store, cache), func() time.Time { return now }, nil)
	n, err := reseed.Preload(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("Preload = %d, %v; want both of old's certificates", n, err)
	}
	for serial, want := range map[string]bool{"222": true, "223": true, "333": false} {
		if got, _ := cache.IsRevoked(t.Context(), serial); got != want {
			t.Errorf("IsRevoked(%s) = %v, want %v", serial, got, want)
		}
	}
	if got, err := store.Revoked(t.Context(), now); err != nil || len(got) != 0 {
		t.Errorf("the store holds %v, %v: Preload must not write it", got, err)
	}
}
