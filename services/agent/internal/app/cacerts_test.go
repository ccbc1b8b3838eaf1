package app

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fakeSigner signs intermediates with its own root, at the test's clock.
type fakeSigner struct {
	now      func() time.Time
	root     *x509.Certificate
	rootKey  crypto.Signer
	mu       sync.Mutex
	requests []IntermediateRequest
	// fail makes the next calls fail, one error each.
	fail []error
	// otherKey signs a certificate for another key than the CSR's.
	otherKey bool
}

func newFakeSigner(t *testing.T, now func() time.Time) *fakeSigner {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test VirtualMesh root"},
		NotBefore: now().Add(-time.Hour), NotAfter: now().Add(10 * 365 * 24 * time.Hour),
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
	return &fakeSigner{now: now, root: root, rootKey: key}
}

func (f *fakeSigner) SignIntermediate(_ context.Context, req IntermediateRequest) (SignedIntermediate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	if len(f.fail) > 0 {
		err := f.fail[0]
		f.fail = f.fail[1:]
		return SignedIntermediate{}, err
	}
	csr, err := pki.ParseCSR(req.CSRPEM)
	if err != nil {
		return SignedIntermediate{}, err
	}
	pub := csr.PublicKey
	if f.otherKey {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		pub = k.Public()
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = 365 * 24 * time.Hour
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	now := f.now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "istiod " + req.MeshName},
		NotBefore: now, NotAfter: now.Add(ttl),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}, f.root, pub, f.rootKey)
	if err != nil {
		return SignedIntermediate{}, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	rootPEM := pki.EncodeCertificates(f.root)
	return SignedIntermediate{CertPEM: certPEM, ChainPEM: append(append([]byte{}, certPEM...), rootPEM...), RootPEM: rootPEM}, nil
}

func (f *fakeSigner) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func (f *fakeSigner) last() IntermediateRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}

// fakeSecrets is a Secret store in memory with resource versions.
type fakeSecrets struct {
	mu      sync.Mutex
	secrets map[secretKey]StoredSecret
	rv      int
	getErr  error
}

func newFakeSecrets() *fakeSecrets { return &fakeSecrets{secrets: map[secretKey]StoredSecret{}} }

func (f *fakeSecrets) Get(_ context.Context, namespace, name string) (StoredSecret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.getErr != nil {
		return StoredSecret{}, f.getErr
	}
	s, ok := f.secrets[secretKey{namespace, name}]
	if !ok {
		return StoredSecret{}, ErrSecretNotFound
	}
	s.Data, s.Annotations = maps.Clone(s.Data), maps.Clone(s.Annotations)
	return s, nil
}

func (f *fakeSecrets) Create(_ context.Context, s CASecret) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := secretKey{s.Namespace, s.Name}
	if _, ok := f.secrets[k]; ok {
		return fmt.Errorf("%w: Secret %s/%s exists", ErrConflict, s.Namespace, s.Name)
	}
	f.rv++
	f.secrets[k] = StoredSecret{Owned: true, ResourceVersion: strconv.Itoa(f.rv), Data: maps.Clone(s.Data), Annotations: maps.Clone(s.Annotations)}
	return nil
}

func (f *fakeSecrets) Update(_ context.Context, s CASecret, rv string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := secretKey{s.Namespace, s.Name}
	old, ok := f.secrets[k]
	switch {
	case !ok || old.ResourceVersion != rv:
		return ErrSecretChanged
	case !old.Owned:
		return ErrConflict
	}
	f.rv++
	f.secrets[k] = StoredSecret{Owned: true, ResourceVersion: strconv.Itoa(f.rv), Data: maps.Clone(s.Data), Annotations: maps.Clone(s.Annotations)}
	return nil
}

func (f *fakeSecrets) get(t *testing.T, namespace, name string) StoredSecret {
	t.Helper()
	s, err := f.Get(context.Background(), namespace, name)
	if err != nil {
		t.Fatalf("Secret %s/%s: %v", namespace, name, err)
	}
	return s
}

// fakeCAMetrics counts what the manager reports.
type fakeCAMetrics struct {
	mu       sync.Mutex
	issued   map[string]int
	failed   map[string]int
	observed []CACertsStatus
}

func newFakeCAMetrics() *fakeCAMetrics {
	return &fakeCAMetrics{issued: map[string]int{}, failed: map[string]int{}}
}

func (m *fakeCAMetrics) CACertsIssued(reason string) { m.mu.Lock(); m.issued[reason]++; m.mu.Unlock() }
func (m *fakeCAMetrics) CACertsFailed(stage string)  { m.mu.Lock(); m.failed[stage]++; m.mu.Unlock() }
func (m *fakeCAMetrics) CACertsObserved(s []CACertsStatus) {
	m.mu.Lock()
	m.observed = s
	m.mu.Unlock()
}

// setClock is a settable clock.
type setClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *setClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *setClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func issuedCert(meshNS, rootGen string) *snapshotv1.IssuedCertificate {
	return &snapshotv1.IssuedCertificate{
		VirtualMesh:     &commonv1.ObjectRef{Name: "vm", Namespace: "meshplane"},
		Mesh:            &commonv1.ObjectRef{Name: "istiod-" + meshNS, Namespace: meshNS},
		TrustDomain:     "east.example.org",
		SecretNamespace: meshNS,
		SecretName:      "cacerts",
		Ttl:             durationpb.New(100 * time.Hour),
		RootGeneration:  rootGen,
	}
}

type caFixture struct {
	clock   *setClock
	signer  *fakeSigner
	store   *fakeSecrets
	metrics *fakeCAMetrics
	m       *CACerts
	start   time.Time
}

func newCAFixture(t *testing.T) *caFixture {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f := &caFixture{clock: &setClock{t: start}, store: newFakeSecrets(), metrics: newFakeCAMetrics(), start: start}
	f.signer = newFakeSigner(t, f.clock.Now)
	f.m = f.manager(t)
	return f
}

// manager builds a manager over the fixture's store and signer, as an
// agent restart would.
func (f *caFixture) manager(t *testing.T) *CACerts {
	return NewCACerts(f.signer, f.store, CACertsOptions{Now: f.clock.Now, Metrics: f.metrics, Log: testLogger(t)})
}

func statusOf(t *testing.T, m *CACerts, namespace string) CACertsStatus {
	t.Helper()
	for _, s := range m.Status() {
		if s.Namespace == namespace && s.Name == "cacerts" {
			return s
		}
	}
	t.Fatalf("no status for %s/cacerts in %+v", namespace, m.Status())
	return CACertsStatus{}
}

func TestCACertsIssuesOnceAndWritesTheSecret(t *testing.T) {
	f := newCAFixture(t)
	ctx := context.Background()
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1")})
	next := f.m.Reconcile(ctx)
	if n := f.signer.calls(); n != 1 {
		t.Fatalf("%d SignIntermediate calls, want 1", n)
	}
	req := f.signer.last()
	if req.VirtualMeshName != "vm" || req.VirtualMeshNamespace != "meshplane" || req.MeshName != "istiod-istio-system" || req.MeshNamespace != "istio-system" || req.TTL != 100*time.Hour {
		t.Errorf("request %+v", req)
	}
	s := f.store.get(t, "istio-system", "cacerts")
	for _, k := range []string{CACertKey, CAKeyKey, RootCertKey, CertChainKey} {
		if len(s.Data[k]) == 0 {
			t.Errorf("Secret lacks %s", k)
		}
	}
	key, err := pki.ParseKey(s.Data[CAKeyKey])
	if err != nil {
		t.Fatalf("ca-key.pem: %v", err)
	}
	if _, ok := key.(*ecdsa.PrivateKey); !ok {
		t.Errorf("key is %T, want ECDSA for the default algorithm", key)
	}
	cert, err := pki.ParseCertificates(s.Data[CACertKey])
	if err != nil {
		t.Fatal(err)
	}
	if !cert[0].PublicKey.(*ecdsa.PublicKey).Equal(key.Public()) {
		t.Error("ca-cert.pem is not for ca-key.pem")
	}
	if got := s.Annotations[AnnotationRootGeneration]; got != "root-1" {
		t.Errorf("root generation annotation %q", got)
	}
	if got, want := s.Annotations[AnnotationExpiresAt], f.start.Add(100*time.Hour).Format(time.RFC3339); got != want {
		t.Errorf("expiry annotation %q, want %q", got, want)
	}
	// Due between 75% and 80% of the 100 h lifetime.
	if lo, hi := f.start.Add(75*time.Hour), f.start.Add(80*time.Hour); next.Before(lo) || next.After(hi) {
		t.Errorf("next look at %v, want between %v and %v", next, lo, hi)
	}
	if st := statusOf(t, f.m, "istio-system"); st.State != CAStateCurrent || !st.RenewAt.Equal(next) {
		t.Errorf("status %+v", st)
	}
	if f.metrics.issued["missing"] != 1 {
		t.Errorf("issued metrics %v", f.metrics.issued)
	}

	// A second pass, and a new snapshot with the same instructions, reuse.
	f.clock.Set(f.start.Add(time.Hour))
	f.m.Reconcile(ctx)
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1")})
	f.m.Reconcile(ctx)
	if n := f.signer.calls(); n != 1 {
		t.Errorf("%d SignIntermediate calls after two more passes, want still 1", n)
	}
}

func TestCACertsReuseAfterRestartAndRenewNearExpiry(t *testing.T) {
	f := newCAFixture(t)
	ctx := context.Background()
	ics := []*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1")}
	f.m.SetDesired(ics)
	f.m.Reconcile(ctx)
	first := f.store.get(t, "istio-system", "cacerts")

	// Restart at 70% of the lifetime: the Secret is reused.
	f.clock.Set(f.start.Add(70 * time.Hour))
	restarted := f.manager(t)
	restarted.SetDesired(ics)
	next := restarted.Reconcile(ctx)
	if n := f.signer.calls(); n != 1 {
		t.Fatalf("%d SignIntermediate calls after a restart with a fresh CA, want 1", n)
	}
	if st := statusOf(t, restarted, "istio-system"); st.State != CAStateCurrent {
		t.Errorf("status after restart %+v", st)
	}

	// Restart again once it is due (80%): renewed.
	f.clock.Set(f.start.Add(80 * time.Hour))
	if f.clock.Now().Before(next) {
		t.Fatalf("renewal due at %v, after 80%% of the lifetime", next)
	}
	again := f.manager(t)
	again.SetDesired(ics)
	again.Reconcile(ctx)
	if n := f.signer.calls(); n != 2 {
		t.Fatalf("%d SignIntermediate calls after a restart near expiry, want 2", n)
	}
	renewed := f.store.get(t, "istio-system", "cacerts")
	if string(renewed.Data[CAKeyKey]) == string(first.Data[CAKeyKey]) {
		t.Error("renewal kept the old key")
	}
	if f.metrics.issued["renewal"] != 1 {
		t.Errorf("issued metrics %v, want one renewal", f.metrics.issued)
	}
}

func TestCACertsRenewsWhenDueWithoutRestart(t *testing.T) {
	f := newCAFixture(t)
	ctx := context.Background()
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1")})
	next := f.m.Reconcile(ctx)
	f.clock.Set(next.Add(-time.Second))
	f.m.Reconcile(ctx)
	if n := f.signer.calls(); n != 1 {
		t.Fatalf("renewed a second before it was due (%d calls)", n)
	}
	f.clock.Set(next)
	f.m.Reconcile(ctx)
	if n := f.signer.calls(); n != 2 {
		t.Fatalf("%d calls once due, want 2", n)
	}
}

func TestCACertsReissuesWhenTheRootChanges(t *testing.T) {
	f := newCAFixture(t)
	ctx := context.Background()
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1")})
	f.m.Reconcile(ctx)
	f.clock.Set(f.start.Add(time.Hour)) // far from renewal
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-2")})
	f.m.Reconcile(ctx)
	if n := f.signer.calls(); n != 2 {
		t.Fatalf("%d calls after the root generation changed, want 2", n)
	}
	if got := f.store.get(t, "istio-system", "cacerts").Annotations[AnnotationRootGeneration]; got != "root-2" {
		t.Errorf("root generation annotation %q, want root-2", got)
	}
	if f.metrics.issued["root_changed"] != 1 {
		t.Errorf("issued metrics %v", f.metrics.issued)
	}

	// A restarted agent told about yet another root re-issues too.
	restarted := f.manager(t)
	restarted.SetDesired([]*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-3")})
	restarted.Reconcile(ctx)
	if n := f.signer.calls(); n != 3 {
		t.Fatalf("%d calls after a restart with a new root generation, want 3", n)
	}
}

func TestCACertsLeavesAUserSecretAlone(t *testing.T) {
	f := newCAFixture(t)
	ctx := context.Background()
	user := StoredSecret{Owned: false, ResourceVersion: "7", Data: map[string][]byte{CACertKey: []byte("the user's own")}}
	f.store.secrets[secretKey{"istio-system", "cacerts"}] = user
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1"), issuedCert("istio-other", "root-1")})
	f.m.Reconcile(ctx)

	if got := f.store.get(t, "istio-system", "cacerts"); string(got.Data[CACertKey]) != "the user's own" || got.ResourceVersion != "7" {
		t.Errorf("the user's Secret was changed: %+v", got)
	}
	if n := f.signer.calls(); n != 1 || f.signer.last().MeshNamespace != "istio-other" {
		t.Errorf("%d SignIntermediate calls; want 1, for the other mesh only", n)
	}
	st := statusOf(t, f.m, "istio-system")
	if st.State != CAStateConflict || st.Error == "" {
		t.Errorf("status %+v, want a conflict with a message", st)
	}
	res := f.m.Results()
	if len(res) != 1 || res[0].GetOutcome() != snapshotv1.ApplyOutcome_APPLY_OUTCOME_CONFLICT ||
		res[0].GetRef().GetKind() != "Secret" || res[0].GetRef().GetNamespace() != "istio-system" || res[0].GetRef().GetName() != "cacerts" {
		t.Errorf("ack results %v, want one CONFLICT for istio-system/cacerts", res)
	}
	if n := conflicts(f.metrics); n != 1 {
		t.Errorf("metrics observed %d conflicts, want 1", n)
	}

	// It stays alone on later passes, and is taken over once the user
	// removes it.
	f.m.Reconcile(ctx)
	delete(f.store.secrets, secretKey{"istio-system", "cacerts"})
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1"), issuedCert("istio-other", "root-1")})
	f.m.Reconcile(ctx)
	if got := f.store.get(t, "istio-system", "cacerts"); !got.Owned {
		t.Error("the Secret was not written after the user's was removed")
	}
	if res := f.m.Results(); len(res) != 0 {
		t.Errorf("ack results %v after the conflict went away", res)
	}
}

func conflicts(m *fakeCAMetrics) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.observed {
		if s.State == CAStateConflict {
			n++
		}
	}
	return n
}

func TestCACertsRetriesAfterAFailure(t *testing.T) {
	f := newCAFixture(t)
	ctx := context.Background()
	f.signer.fail = []error{errors.New("unavailable: registration is down"), errors.New("unavailable: still down")}
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1")})
	retryAt := f.m.Reconcile(ctx)
	st := statusOf(t, f.m, "istio-system")
	if st.State != CAStateFailing || st.Failures != 1 || st.Error == "" {
		t.Fatalf("status %+v, want failing once", st)
	}
	if f.metrics.failed["sign"] != 1 {
		t.Errorf("failure metrics %v", f.metrics.failed)
	}
	if res := f.m.Results(); len(res) != 1 || res[0].GetOutcome() != snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED {
		t.Errorf("ack results %v, want one REJECTED", res)
	}
	if _, err := f.store.Get(ctx, "istio-system", "cacerts"); !errors.Is(err, ErrSecretNotFound) {
		t.Errorf("a Secret was written after a failed signing: %v", err)
	}
	if !retryAt.After(f.start) || retryAt.After(f.start.Add(time.Second)) {
		t.Errorf("retry at %v, want within the first backoff step (1s)", retryAt)
	}

	// Before the backoff is over, nothing is tried, not even for a new
	// snapshot with the same instructions.
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1")})
	f.m.Reconcile(ctx)
	if n := f.signer.calls(); n != 1 {
		t.Fatalf("%d calls before the retry time, want 1", n)
	}
	f.clock.Set(retryAt)
	retryAt = f.m.Reconcile(ctx)
	if st := statusOf(t, f.m, "istio-system"); st.Failures != 2 {
		t.Fatalf("status %+v, want a second failure", st)
	}
	f.clock.Set(retryAt)
	f.m.Reconcile(ctx)
	if st := statusOf(t, f.m, "istio-system"); st.State != CAStateCurrent || st.Failures != 0 {
		t.Fatalf("status %+v after the signer came back", st)
	}
	if n := f.signer.calls(); n != 3 {
		t.Errorf("%d calls, want 3", n)
	}
}

func TestCACertsRefusesABadAnswerAndBadInstructions(t *testing.T) {
	f := newCAFixture(t)
	ctx := context.Background()
	f.signer.otherKey = true
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1")})
	f.m.Reconcile(ctx)
	if f.metrics.failed["verify"] != 1 {
		t.Errorf("failure metrics %v, want a verify failure for a certificate of another key", f.metrics.failed)
	}
	if _, err := f.store.Get(ctx, "istio-system", "cacerts"); !errors.Is(err, ErrSecretNotFound) {
		t.Errorf("a Secret was written with a certificate for another key: %v", err)
	}

	bad := issuedCert("istio-x", "")
	bad.SecretName = ""
	f.signer.otherKey = false
	good := issuedCert("istio-good", "root-1")
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{good, bad})
	calls := f.signer.calls()
	next := f.m.Reconcile(ctx)
	if f.signer.calls() != calls+1 || f.metrics.failed["invalid"] != 1 {
		t.Errorf("want the invalid issued certificate refused and the good one issued (calls %d -> %d, failures %v)", calls, f.signer.calls(), f.metrics.failed)
	}
	// The invalid one has nothing to wait for; the good one's renewal is
	// still the next thing due.
	if next.IsZero() || next.Before(f.start.Add(75*time.Hour)) {
		t.Errorf("next look at %v, want the good CA's renewal time", next)
	}
}

func TestCACertsKeyAlgorithmAndDuplicates(t *testing.T) {
	f := newCAFixture(t)
	var algs []KeyAlgorithm
	f.m.newKey = func(a KeyAlgorithm) (crypto.Signer, error) {
		algs = append(algs, a)
		return NewCAKey(networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_ECDSA_P256)
	}
	rsaIC := issuedCert("istio-system", "root-1")
	rsaIC.KeyAlgorithm = networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_RSA_4096
	dup := issuedCert("istio-system", "root-1")
	dup.Mesh.Name = "istiod-canary"
	f.m.SetDesired([]*snapshotv1.IssuedCertificate{rsaIC, dup})
	f.m.Reconcile(context.Background())
	if len(algs) != 1 || algs[0] != networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_RSA_4096 {
		t.Errorf("keys made for %v, want one RSA_4096 (one Secret named twice)", algs)
	}
	if got := f.store.get(t, "istio-system", "cacerts").Annotations[AnnotationMesh]; got != "istio-system/istiod-istio-system" {
		t.Errorf("Secret written for mesh %q, want the first one named", got)
	}
}

func TestNewCAKeyRSA(t *testing.T) {
	key, err := NewCAKey(networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_RSA_4096)
	if err != nil {
		t.Fatal(err)
	}
	pemKey, err := encodeCAKey(key)
	if err != nil {
		t.Fatal(err)
	}
	back, err := pki.ParseKey(pemKey)
	if err != nil {
		t.Fatal(err)
	}
	if pub, ok := back.Public().(*rsa.PublicKey); !ok || pub.Size()*8 != 4096 {
		t.Errorf("key %T, want RSA of 4096 bits", back.Public())
	}
	if _, err := NewCAKey(KeyAlgorithm(9)); err == nil {
		t.Error("an unknown algorithm made a key")
	}
}

func TestCACertsRunWaitsForLeadership(t *testing.T) {
	f := newCAFixture(t)
	var leading atomic.Bool
	var asked atomic.Int32
	f.m = NewCACerts(f.signer, f.store, CACertsOptions{
		Now:    f.clock.Now,
		Leader: func() bool { asked.Add(1); return leading.Load() },
		Log:    testLogger(t),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.m.Run(ctx) }()
	defer func() {
		cancel()
		receive(t, done, 5*time.Second, "Run to return")
	}()

	ics := []*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1")}
	// Each poke makes Run ask again; it must never issue while it does not
	// lead.
	for i := 0; i < 3; i++ {
		before := asked.Load()
		f.m.SetDesired(ics)
		waitFor(t, 5*time.Second, func() bool { return asked.Load() > before }, "Run to ask for leadership again")
	}
	if n := f.signer.calls(); n != 0 {
		t.Fatalf("a replica that does not lead called SignIntermediate %d times", n)
	}
	leading.Store(true)
	f.m.SetDesired(ics)
	waitFor(t, 5*time.Second, func() bool { return f.signer.calls() == 1 }, "the leader to issue")
}

// The syncer hands the snapshot's IssuedCertificates to the manager without
// waiting for it, and its acknowledgement carries the manager's conflicts
// without counting them as failures.
func TestSyncerHandsIssuedCertificatesToCACerts(t *testing.T) {
	f := newCAFixture(t)
	f.store.secrets[secretKey{"istio-system", "cacerts"}] = StoredSecret{Owned: false, ResourceVersion: "1"}
	relay := newFakeRelay()
	s := NewSyncer(relay, newFakeApplier(), nil, testLogger(t), WithCACerts(f.m))
	snap := &snapshotv1.OutputSnapshot{Cluster: "east", Objects: []*snapshotv1.Object{object("DestinationRule", "reviews")},
		IssuedCertificates: []*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1")}}
	snapshots.SealOutput(snap)
	ctx := context.Background()
	if !s.Apply(ctx, snap) {
		t.Fatal("Apply failed")
	}
	receive(t, relay.acks, time.Second, "the first ack")
	if n := f.signer.calls(); n != 0 {
		t.Fatalf("Apply signed %d intermediates itself; that is the manager's job", n)
	}
	// The manager runs (in the agent, in its own goroutine) and finds the
	// user's Secret; the next acknowledgement reports it.
	f.m.Reconcile(ctx)
	if !s.Apply(ctx, snap) {
		t.Fatal("a cacerts conflict made the snapshot count as failed")
	}
	a := receive(t, relay.acks, time.Second, "the second ack")
	if got := outcomes(a.results); !slices.Contains(got, "CONFLICT Secret/cacerts") || !slices.Contains(got, "APPLIED DestinationRule/reviews") {
		t.Errorf("ack outcomes %v, want the DestinationRule applied and the Secret in conflict", got)
	}
	if s.AppliedVersion() != snap.GetVersion() {
		t.Errorf("applied version %q, want %q", s.AppliedVersion(), snap.GetVersion())
	}
}

// A conflict the manager finds after the snapshot was acknowledged is
// acknowledged again at once, for the same version, with the object results
// it had; it goes away the same way.
func TestSyncerReacksWhenCACertsResultsChange(t *testing.T) {
	f := newCAFixture(t)
	f.store.secrets[secretKey{"istio-system", "cacerts"}] = StoredSecret{Owned: false, ResourceVersion: "1"}
	relay := newFakeRelay()
	s := NewSyncer(relay, newFakeApplier(), nil, testLogger(t), WithCACerts(f.m))
	stream := newFakeWatchStream()
	relay.watchStreams <- stream
	stop := runSyncer(t, s)
	defer stop()

	snap := &snapshotv1.OutputSnapshot{Cluster: "east", Objects: []*snapshotv1.Object{object("DestinationRule", "reviews")},
		IssuedCertificates: []*snapshotv1.IssuedCertificate{issuedCert("istio-system", "root-1")}}
	snapshots.SealOutput(snap)
	stream.snaps <- snap
	first := receive(t, relay.acks, 5*time.Second, "the ack of the snapshot")
	if got := outcomes(first.results); !slices.Equal(got, []string{"APPLIED DestinationRule/reviews"}) {
		t.Fatalf("first ack %v, want only the DestinationRule (the manager has not looked yet)", got)
	}

	f.m.Reconcile(t.Context())
	again := receive(t, relay.acks, 5*time.Second, "a second ack once the conflict is known")
	if again.version != snap.GetVersion() {
		t.Errorf("re-acked version %q, want %q", again.version, snap.GetVersion())
	}
	if got := outcomes(again.results); !slices.Equal(got, []string{"APPLIED DestinationRule/reviews", "CONFLICT Secret/cacerts"}) {
		t.Errorf("second ack %v, want the DestinationRule and the Secret's conflict", got)
	}

	// No change, no new ack: the next one comes after the user removed
	// the Secret and the agent wrote its own.
	f.m.Reconcile(t.Context())
	delete(f.store.secrets, secretKey{"istio-system", "cacerts"})
	f.m.Reconcile(t.Context())
	cleared := receive(t, relay.acks, 5*time.Second, "an ack once the conflict is gone")
	if got := outcomes(cleared.results); !slices.Equal(got, []string{"APPLIED DestinationRule/reviews"}) {
		t.Errorf("ack after the conflict went away %v, want only the DestinationRule", got)
	}
	if n := len(relay.acks); n != 0 {
		t.Errorf("%d more acks, want none: a pass that changes nothing acks nothing", n)
	}
}
