package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
)

// fakePods is a cluster's pods in memory. Deleted pods are recorded in
// order; replace plays the controllers.
type fakePods struct {
	mu      sync.Mutex
	pods    map[string]domain.BouncePod // by namespace/name
	deleted []string                    // original names, in order
	seq     int
	// onDelete runs after each delete (tests cancel contexts there).
	onDelete func(name string)
}

func newFakePods(pods ...domain.BouncePod) *fakePods {
	f := &fakePods{pods: map[string]domain.BouncePod{}}
	for _, p := range pods {
		p.UID = "uid-" + p.Name
		p.Ready = true
		f.pods[p.Namespace+"/"+p.Name] = p
	}
	return f
}

func (f *fakePods) List(context.Context) ([]domain.BouncePod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Values(f.pods)), nil
}

func (f *fakePods) Delete(_ context.Context, namespace, name, uid string) error {
	f.mu.Lock()
	k := namespace + "/" + name
	p, ok := f.pods[k]
	if ok && p.UID == uid {
		delete(f.pods, k)
		f.deleted = append(f.deleted, k)
	}
	hook := f.onDelete
	f.mu.Unlock()
	if hook != nil {
		hook(k)
	}
	return nil
}

// replace creates a pod for each one deleted since the last call, at now,
// Ready or not, as a controller would.
func (f *fakePods) replace(now time.Time, ready bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range f.deleted[f.seq:] {
		ns, name, _ := strings.Cut(k, "/")
		f.seq++
		p := domain.BouncePod{Namespace: ns, Name: fmt.Sprintf("%s-r%d", name, f.seq), CreatedAt: now, Ready: ready}
		p.UID = "uid-" + p.Name
		p.Controller, p.Sidecar, p.Istiod = f.shape(name)
		p.Labels = f.labels(name)
		f.pods[ns+"/"+p.Name] = p
	}
}

// shape gives a replacement the shape of its original, from the name.
func (f *fakePods) shape(name string) (domain.OwnerRef, bool, bool) {
	switch {
	case strings.HasPrefix(name, "istiod"):
		return domain.OwnerRef{Kind: "ReplicaSet", Name: "istiod"}, false, true
	case strings.HasPrefix(name, "gw"):
		return domain.OwnerRef{Kind: "ReplicaSet", Name: "gw"}, true, false
	}
	return domain.OwnerRef{Kind: "ReplicaSet", Name: "reviews"}, true, false
}

func (f *fakePods) labels(name string) map[string]string {
	if strings.HasPrefix(name, "gw") {
		return map[string]string{"istio": "ingressgateway"}
	}
	return nil
}

func (f *fakePods) setReady() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, p := range f.pods {
		p.Ready = true
		f.pods[k] = p
	}
}

func (f *fakePods) deletions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deleted)
}

type fakeRotationMetrics struct {
	mu       sync.Mutex
	finished map[string]int
	bounced  map[string]int
}

func (m *fakeRotationMetrics) RotationFinished(r string) {
	m.mu.Lock()
	m.finished[r]++
	m.mu.Unlock()
}

func (m *fakeRotationMetrics) PodsBounced(phase string, n int) {
	m.mu.Lock()
	m.bounced[phase] += n
	m.mu.Unlock()
}

// meshPods: istiod, a gateway, three workloads of one Deployment, a
// workload of another revision and a pod without a sidecar.
func meshPods(created time.Time) *fakePods {
	rs := func(n string) domain.OwnerRef { return domain.OwnerRef{Kind: "ReplicaSet", Name: n} }
	return newFakePods(
		domain.BouncePod{Namespace: "istio-system", Name: "istiod-0", Istiod: true, Controller: rs("istiod"), CreatedAt: created},
		domain.BouncePod{Namespace: "istio-ingress", Name: "gw-0", Sidecar: true, Labels: map[string]string{"istio": "ingressgateway"}, Controller: rs("gw"), CreatedAt: created},
		domain.BouncePod{Namespace: "bookinfo", Name: "reviews-0", Sidecar: true, Controller: rs("reviews"), CreatedAt: created},
		domain.BouncePod{Namespace: "bookinfo", Name: "reviews-1", Sidecar: true, Controller: rs("reviews"), CreatedAt: created},
		domain.BouncePod{Namespace: "bookinfo", Name: "reviews-2", Sidecar: true, Controller: rs("reviews"), CreatedAt: created},
		domain.BouncePod{Namespace: "canary", Name: "other-rev", Sidecar: true, SidecarRevision: "canary", CreatedAt: created},
		domain.BouncePod{Namespace: "bookinfo", Name: "no-sidecar", CreatedAt: created},
	)
}

type rotFixture struct {
	*caFixture
	pods *fakePods
	rm   *fakeRotationMetrics
}

func newRotFixture(t *testing.T) *rotFixture {
	f := &rotFixture{caFixture: newCAFixture(t), rm: &fakeRotationMetrics{finished: map[string]int{}, bounced: map[string]int{}}}
	f.pods = meshPods(f.start.Add(-24 * time.Hour))
	f.m = f.leader(t)
	return f
}

// leader builds a manager as a newly elected leader would: nothing in
// memory, everything from the store.
func (f *rotFixture) leader(t *testing.T) *CACerts {
	return NewCACerts(f.signer, f.store, CACertsOptions{
		Now: f.clock.Now, Metrics: f.metrics, Log: testLogger(t), Pods: f.pods, RotationMetrics: f.rm,
		GatewayLabels: []map[string]string{{"istio": "ingressgateway"}, {"istio": "eastwestgateway"}},
	})
}

func autoIssued(rootGen string) *snapshotv1.IssuedCertificate {
	ic := issuedCert("istio-system", rootGen)
	ic.AutoRestartPods = true
	return ic
}

func (f *rotFixture) rotation(t *testing.T) domain.Rotation {
	t.Helper()
	r, err := domain.ParseRotation(f.store.get(t, "istio-system", "cacerts").Annotations)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// step advances the clock a second, plays the controllers (replacements
// come up Ready) and reconciles once with m.
func (f *rotFixture) step(ctx context.Context, m *CACerts) {
	f.clock.Set(f.clock.Now().Add(time.Second))
	f.pods.replace(f.clock.Now(), true)
	m.Reconcile(ctx)
}

// driveUntil steps until cond holds.
func (f *rotFixture) driveUntil(t *testing.T, m *CACerts, cond func() bool) {
	t.Helper()
	for range 100 {
		if cond() {
			return
		}
		f.step(context.Background(), m)
	}
	t.Fatalf("rotation stuck in %+v; deleted %v", f.rotation(t), f.pods.deletions())
}

var replacementSuffix = regexp.MustCompile(`-r[0-9]+`)

func wantMeshOrder(t *testing.T, deleted []string) {
	t.Helper()
	want := []string{"istio-system/istiod-0", "istio-ingress/gw-0", "bookinfo/reviews-0", "bookinfo/reviews-1", "bookinfo/reviews-2"}
	// A second rotation restarts the replacements of the first.
	deleted = slices.Clone(deleted)
	for i, d := range deleted {
		deleted[i] = replacementSuffix.ReplaceAllString(d, "")
	}
	if !slices.Equal(deleted, want) {
		t.Fatalf("deleted %v, want %v (each once, in order)", deleted, want)
	}
}

func TestRotationBouncesInOrderAndWaitsForReadiness(t *testing.T) {
	f := newRotFixture(t)
	ctx := context.Background()
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{autoIssued("root-1")})
	f.m.Reconcile(ctx) // issues; the rotation starts with istiod
	if r := f.rotation(t); r.Phase != domain.RotationIstiod || r.Serial == "" {
		t.Fatalf("rotation after issuance %+v, want phase istiod", r)
	}

	f.clock.Set(f.clock.Now().Add(time.Second))
	f.m.Reconcile(ctx)
	if got := f.pods.deletions(); !slices.Equal(got, []string{"istio-system/istiod-0"}) {
		t.Fatalf("first deletions %v, want istiod only", got)
	}
	// istiod comes back but is not Ready: the gateways wait.
	f.clock.Set(f.clock.Now().Add(time.Second))
	f.pods.replace(f.clock.Now(), false)
	for range 3 {
		f.clock.Set(f.clock.Now().Add(time.Second))
		f.m.Reconcile(ctx)
	}
	if got := f.pods.deletions(); len(got) != 1 {
		t.Fatalf("deleted %v while istiod was not Ready", got)
	}
	if r := f.rotation(t); r.Phase != domain.RotationIstiod || r.Bounced[domain.RotationIstiod] != 1 {
		t.Fatalf("rotation %+v, want istiod with one pod bounced", r)
	}
	if s := statusOf(t, f.m, "istio-system"); s.Rotation == nil || s.Rotation.Phase != "istiod" || s.Rotation.Waiting != 1 {
		t.Fatalf("status %+v, want phase istiod waiting for one pod", s.Rotation)
	}
	f.pods.setReady()

	// The workloads go one at a time: a quarter of three is less than one.
	f.driveUntil(t, f.m, func() bool { return len(f.pods.deletions()) == 3 })
	if r := f.rotation(t); r.Phase != domain.RotationWorkloads {
		t.Fatalf("phase %s after the gateway, want workloads", r.Phase)
	}
	f.driveUntil(t, f.m, func() bool { return f.rotation(t).Phase == domain.RotationDone })
	wantMeshOrder(t, f.pods.deletions())
	r := f.rotation(t)
	if r.Bounced[domain.RotationIstiod] != 1 || r.Bounced[domain.RotationGateways] != 1 || r.Bounced[domain.RotationWorkloads] != 3 {
		t.Errorf("bounced %v", r.Bounced)
	}
	if f.rm.finished[RotationCompleted] != 1 || f.rm.bounced["workloads"] != 3 || f.rm.bounced["istiod"] != 1 {
		t.Errorf("metrics %v %v", f.rm.finished, f.rm.bounced)
	}
	// Done: nothing more is deleted.
	for range 3 {
		f.step(ctx, f.m)
	}
	if n := len(f.pods.deletions()); n != 5 {
		t.Errorf("%d deletions after the rotation was done", n)
	}
}

func TestRotationBatchesByMaxUnavailable(t *testing.T) {
	pods := []domain.BouncePod{}
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 8 {
		pods = append(pods, domain.BouncePod{Namespace: "a", Name: fmt.Sprint("p", i), Controller: domain.OwnerRef{Kind: "ReplicaSet", Name: "rs"}, Ready: true, CreatedAt: old})
	}
	expected := map[string]int{}
	plan := domain.PlanBounce(pods, old.Add(time.Hour), expected, 0.25)
	if len(plan.Delete) != 2 || plan.Done {
		t.Fatalf("plan %+v, want two of eight deleted", plan)
	}
	// Two are gone and not replaced yet: no more deletions.
	plan = domain.PlanBounce(pods[2:], old.Add(time.Hour), expected, 0.25)
	if len(plan.Delete) != 0 || plan.Waiting != 8 {
		t.Fatalf("plan %+v, want none deleted and eight waited for", plan)
	}
}

func TestRotationWithANewRootCarriesBothRootsThenDropsTheOld(t *testing.T) {
	f := newRotFixture(t)
	ctx := context.Background()
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{autoIssued("root-1")})
	f.m.Reconcile(ctx)
	f.driveUntil(t, f.m, func() bool { return f.rotation(t).Phase == domain.RotationDone })
	oldRoot := f.signer.root

	// The VirtualMesh's root changes.
	f.signer.root, f.signer.rootKey = newTestRoot(t, f.clock.Now())
	f.pods.deleted, f.pods.seq = nil, 0
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{autoIssued("root-2")})
	f.step(ctx, f.m)
	roots := rootsOf(t, f.store.get(t, "istio-system", "cacerts"))
	if len(roots) != 2 || !roots[0].Equal(f.signer.root) || !roots[1].Equal(oldRoot) {
		t.Fatalf("root-cert.pem during the transition holds %d roots, want the new then the old", len(roots))
	}
	if r := f.rotation(t); r.NewRoot != rootFingerprint(f.signer.root) || r.Phase != domain.RotationIstiod {
		t.Fatalf("rotation %+v", r)
	}
	f.driveUntil(t, f.m, func() bool { return f.rotation(t).Phase == domain.RotationDropOldRoot })
	if roots := rootsOf(t, f.store.get(t, "istio-system", "cacerts")); len(roots) != 2 {
		t.Fatalf("the old root was dropped before the workloads moved")
	}
	f.driveUntil(t, f.m, func() bool { return f.rotation(t).Phase == domain.RotationDone })
	if roots := rootsOf(t, f.store.get(t, "istio-system", "cacerts")); len(roots) != 1 || !roots[0].Equal(f.signer.root) {
		t.Fatalf("root-cert.pem after the rotation holds %d roots, want the new one only", len(roots))
	}
	if s := statusOf(t, f.m, "istio-system"); s.Rotation == nil || s.Rotation.Phase != "done" || s.Rotation.DualRoot {
		t.Fatalf("status %+v", s.Rotation)
	}
}

func TestRotationResumesOnANewLeaderAtEachPhase(t *testing.T) {
	for _, stop := range []domain.RotationPhase{domain.RotationIstiod, domain.RotationGateways, domain.RotationWorkloads, domain.RotationDropOldRoot} {
		t.Run(string(stop), func(t *testing.T) {
			f := newRotFixture(t)
			ctx := context.Background()
			f.m.SetDesired([]*snapshotv1.IssuedCertificate{autoIssued("root-1")})
			f.m.Reconcile(ctx)
			f.driveUntil(t, f.m, func() bool { return f.rotation(t).Phase == domain.RotationDone })
			f.signer.root, f.signer.rootKey = newTestRoot(t, f.clock.Now())
			f.pods.deleted, f.pods.seq = nil, 0
			f.m.SetDesired([]*snapshotv1.IssuedCertificate{autoIssued("root-2")})
			f.step(ctx, f.m)
			// The old leader gets as far as one deletion in the phase.
			f.driveUntil(t, f.m, func() bool {
				r := f.rotation(t)
				return r.Phase == stop && (!stop.Bounces() || r.Bounced[stop] > 0)
			})

			// Leadership moves: the new leader knows only the Secret.
			next := f.leader(t)
			next.SetDesired([]*snapshotv1.IssuedCertificate{autoIssued("root-2")})
			f.driveUntil(t, next, func() bool { return f.rotation(t).Phase == domain.RotationDone })
			wantMeshOrder(t, f.pods.deletions())
			if roots := rootsOf(t, f.store.get(t, "istio-system", "cacerts")); len(roots) != 1 || !roots[0].Equal(f.signer.root) {
				t.Fatalf("root-cert.pem holds %d roots after the resumed rotation", len(roots))
			}
			if n := f.signer.calls(); n != 2 {
				t.Errorf("%d intermediates signed, want 2: the new leader resumes, it does not start over", n)
			}
		})
	}
}

func TestRotationCancelledMidBounceLeavesAConsistentState(t *testing.T) {
	f := newRotFixture(t)
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{autoIssued("root-1")})
	f.m.Reconcile(context.Background())
	f.driveUntil(t, f.m, func() bool { return f.rotation(t).Phase == domain.RotationWorkloads })
	before := f.rotation(t)

	// Leadership is lost while the first workload is deleted.
	ctx, cancel := context.WithCancel(context.Background())
	f.pods.onDelete = func(string) { cancel() }
	f.step(ctx, f.m)
	f.pods.onDelete = nil
	after := f.rotation(t)
	if after.Phase != domain.RotationWorkloads || !after.PhaseStartedAt.Equal(before.PhaseStartedAt) {
		t.Fatalf("after a cancel mid-phase the rotation is %+v, want the workloads phase as it was (%+v)", after, before)
	}
	if got := f.pods.deletions(); len(got) != 3 {
		t.Fatalf("deleted %v, want istiod, the gateway and one workload", got)
	}

	next := f.leader(t)
	next.SetDesired([]*snapshotv1.IssuedCertificate{autoIssued("root-1")})
	f.driveUntil(t, next, func() bool { return f.rotation(t).Phase == domain.RotationDone })
	wantMeshOrder(t, f.pods.deletions())
}

func TestRotationWithoutAutoRestartBouncesNothing(t *testing.T) {
	f := newRotFixture(t)
	ctx := context.Background()
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1")})
	for range 5 {
		f.step(ctx, f.m)
	}
	if got := f.pods.deletions(); len(got) != 0 {
		t.Fatalf("deleted %v with auto_restart_pods off", got)
	}
	if r := f.rotation(t); r.Phase != domain.RotationNone {
		t.Fatalf("phase %q with auto_restart_pods off", r.Phase)
	}

	// Turned off mid-way, the rotation stops and keeps both roots.
	f.signer.root, f.signer.rootKey = newTestRoot(t, f.clock.Now())
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{autoIssued("root-2")})
	f.step(ctx, f.m)
	f.step(ctx, f.m)
	if r := f.rotation(t); r.Phase != domain.RotationGateways && r.Phase != domain.RotationIstiod {
		t.Fatalf("phase %s", r.Phase)
	}
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-2")})
	n := len(f.pods.deletions())
	for range 5 {
		f.step(ctx, f.m)
	}
	if got := f.pods.deletions(); len(got) != n {
		t.Fatalf("deleted %v after auto_restart_pods was turned off", got[n:])
	}
	if r := f.rotation(t); r.Phase != domain.RotationNone || f.rm.finished[RotationAbandoned] != 1 {
		t.Fatalf("rotation %+v, metrics %v", r, f.rm.finished)
	}
	if roots := rootsOf(t, f.store.get(t, "istio-system", "cacerts")); len(roots) != 2 {
		t.Fatalf("root-cert.pem holds %d roots; the old one is still needed", len(roots))
	}
}

func newTestRoot(t *testing.T, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "test VirtualMesh root 2"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	root, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return root, key
}

func rootsOf(t *testing.T, s StoredSecret) []*x509.Certificate {
	t.Helper()
	roots, err := pki.ParseCertificates(s.Data[RootCertKey])
	if err != nil {
		t.Fatal(err)
	}
	return roots
}

func TestRotationSupersededByANewerIntermediate(t *testing.T) {
	f := newRotFixture(t)
	ctx := context.Background()
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{autoIssued("root-1")})
	f.m.Reconcile(ctx)
	f.driveUntil(t, f.m, func() bool { return f.rotation(t).Phase == domain.RotationWorkloads })
	first := f.rotation(t)

	// A new root arrives mid-way: a new rotation starts over from istiod,
	// and the pods restarted since the first still count as restarted
	// only if they were created after the new one started.
	f.signer.root, f.signer.rootKey = newTestRoot(t, f.clock.Now())
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{autoIssued("root-2")})
	f.step(ctx, f.m)
	r := f.rotation(t)
	if r.Phase != domain.RotationIstiod || r.Serial == first.Serial || r.NewRoot == "" {
		t.Fatalf("rotation after a newer intermediate %+v", r)
	}
	if f.rm.finished[RotationSuperseded] != 1 {
		t.Errorf("finished %v, want one superseded", f.rm.finished)
	}
	f.driveUntil(t, f.m, func() bool { return f.rotation(t).Phase == domain.RotationDone })
	if f.rm.finished[RotationCompleted] != 1 {
		t.Errorf("finished %v, want one completed", f.rm.finished)
	}
}
