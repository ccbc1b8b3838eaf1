package app_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/meshplane/meshplane/libs/revocation"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/memory"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/smallstep"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

const td = "test.local"

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type fixture struct {
	ca      *pki.CA
	r       *app.Registrar
	stores  app.Stores
	revoked *app.Revocations
	static  *memory.Tokens
	clock   *clock
}

func newFixture(t testing.TB, relayToken string) *fixture {
	t.Helper()
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := smallstep.New(ca)
	if err != nil {
		t.Fatal(err)
	}
	static := memory.NewTokens()
	static.Set("demo", "demo-token")
	static.Set("meshplane", "reserved-token")
	stores := app.Stores{Tokens: memory.NewBootstrapTokens(), Clusters: memory.NewClusters(), Revocations: memory.NewRevocations(), Static: static}
	clk := &clock{now: time.Now().Truncate(time.Second)}
	revoked := app.NewRevocations(stores.Revocations, time.Hour, nil)
	opts := app.Options{TrustDomain: td, CertTTL: time.Hour, TokenTTL: 10 * time.Minute, Now: clk.Now, Log: slog.New(slog.DiscardHandler), Reserved: []string{"meshplane"}}
	if relayToken != "" {
		h := domain.HashToken(relayToken)
		opts.RelayToken = &h
	}
	return &fixture{ca: ca, r: app.NewRegistrar(stores, signer, revoked, opts), stores: stores, revoked: revoked, static: static, clock: clk}
}

func (f *fixture) create(t *testing.T, cluster string, requireApproval bool) string {
	t.Helper()
	c, err := f.r.CreateCluster(t.Context(), cluster, requireApproval, 0)
	if err != nil {
		t.Fatalf("CreateCluster(%s): %v", cluster, err)
	}
	return c.Token
}

func csrFor(t testing.TB, cluster string) []byte {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.NewCSR(key, pki.ClusterID(td, cluster))
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

func TestCreateClusterRefusesReservedName(t *testing.T) {
	f := newFixture(t, "")
	_, err := f.r.CreateCluster(t.Context(), "meshplane", false, 0)
	if !errors.Is(err, app.ErrInvalidArgument) || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("CreateCluster(meshplane): %v, want ErrInvalidArgument saying the name is reserved", err)
	}
	if _, err := f.stores.Clusters.Cluster(t.Context(), "meshplane"); !errors.Is(err, app.ErrNotFound) {
		t.Fatal("a record was made for the reserved name")
	}
}

func TestRegister(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, f *fixture) (cluster, token string, csr []byte)
		wantErr error // nil: success
	}{
		{name: "own token", setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			return "east", f.create(t, "east", false), csrFor(t, "east")
		}},
		{name: "wrong token", wantErr: domain.ErrTokenInvalid, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			f.create(t, "east", false)
			return "east", "mpbt_nope", csrFor(t, "east")
		}},
		{name: "empty token", wantErr: domain.ErrTokenInvalid, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			f.create(t, "east", false)
			return "east", "", csrFor(t, "east")
		}},
		{name: "token with a newline", wantErr: domain.ErrTokenInvalid, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			return "east", f.create(t, "east", false) + "\n", csrFor(t, "east")
		}},
		{name: "expired token", wantErr: domain.ErrTokenExpired, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			tok := f.create(t, "east", false)
			f.clock.Add(10 * time.Minute)
			return "east", tok, csrFor(t, "east")
		}},
		{name: "used token", wantErr: domain.ErrTokenUsed, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			tok := f.create(t, "east", false)
			if _, err := f.r.Register(t.Context(), "east", tok, csrFor(t, "east"), "v1"); err != nil {
				t.Fatalf("first Register: %v", err)
			}
			return "east", tok, csrFor(t, "east")
		}},
		{name: "replaced token", wantErr: domain.ErrTokenInvalid, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			tok := f.create(t, "east", false)
			f.create(t, "east", false)
			return "east", tok, csrFor(t, "east")
		}},
		{name: "reserved cluster name with a static token", wantErr: domain.ErrInvalidCSR, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			return "meshplane", "reserved-token", csrFor(t, "meshplane")
		}},
		{name: "token of cluster A used for cluster B", wantErr: domain.ErrTokenInvalid, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			tokA := f.create(t, "east", false)
			f.create(t, "west", false)
			return "west", tokA, csrFor(t, "west")
		}},
		{name: "token of cluster A for an unknown cluster", wantErr: domain.ErrTokenInvalid, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			return "north", f.create(t, "east", false), csrFor(t, "north")
		}},
		{name: "right token, CSR for another cluster", wantErr: domain.ErrInvalidCSR, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			return "east", f.create(t, "east", false), csrFor(t, "west")
		}},
		{name: "right token, garbage CSR", wantErr: domain.ErrInvalidCSR, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			return "east", f.create(t, "east", false), []byte("not a CSR")
		}},
		{name: "invalid cluster name", wantErr: domain.ErrInvalidCSR, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			return "East/..", f.create(t, "east", false), csrFor(t, "east")
		}},
		// A bad token is refused before the CSR is looked at, so that the
		// answer tells a stranger nothing about the CSR rules.
		{name: "wrong token and bad CSR", wantErr: domain.ErrTokenInvalid, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			f.create(t, "east", false)
			return "east", "mpbt_nope", []byte("x")
		}},
		{name: "pending cluster", wantErr: domain.ErrPendingApproval, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			return "east", f.create(t, "east", true), csrFor(t, "east")
		}},
		{name: "pending cluster after approval", setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			tok := f.create(t, "east", true)
			if _, err := f.r.ApproveCluster(t.Context(), "east"); err != nil {
				t.Fatal(err)
			}
			return "east", tok, csrFor(t, "east")
		}},
		{name: "deregistered cluster with a static token", wantErr: domain.ErrDeregistered, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			if _, err := f.r.Register(t.Context(), "demo", "demo-token", csrFor(t, "demo"), ""); err != nil {
				t.Fatal(err)
			}
			if _, _, err := f.r.DeregisterCluster(t.Context(), "demo"); err != nil {
				t.Fatal(err)
			}
			return "demo", "demo-token", csrFor(t, "demo")
		}},
		{name: "static token, twice", setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			if _, err := f.r.Register(t.Context(), "demo", "demo-token", csrFor(t, "demo"), ""); err != nil {
				t.Fatal(err)
			}
			return "demo", "demo-token", csrFor(t, "demo")
		}},
		{name: "relay token without compatibility mode", wantErr: domain.ErrTokenInvalid, setup: func(t *testing.T, f *fixture) (string, string, []byte) {
			return "east", "relay-secret", csrFor(t, "east")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "")
			cluster, token, csr := tc.setup(t, f)
			issued, err := f.r.Register(t.Context(), cluster, token, csr, "v1.0.0")
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Register: %v, want %v", err, tc.wantErr)
				}
				if issued.ChainPEM != nil {
					t.Fatal("Register failed but returned a certificate")
				}
				return
			}
			if err != nil {
				t.Fatalf("Register: %v", err)
			}
			leaf := checkIssued(t, f.ca, issued, cluster)
			if want := f.clock.Now().Add(time.Hour); !leaf.NotAfter.Equal(want) || !issued.ExpiresAt.Equal(want) {
				t.Errorf("NotAfter %v, ExpiresAt %v, want both %v", leaf.NotAfter, issued.ExpiresAt, want)
			}
			c, err := f.r.GetCluster(t.Context(), cluster)
			if err != nil {
				t.Fatal(err)
			}
			if latest, _ := c.Latest(); c.Status != domain.StatusRegistered || latest.Serial != issued.Serial || c.AgentVersion != "v1.0.0" {
				t.Errorf("record %+v, want REGISTERED with serial %s and agent v1.0.0", c, issued.Serial)
			}
		})
	}
}

// A refused CSR or a pending cluster must not spend the token.
func TestRefusalsDoNotSpendToken(t *testing.T) {
	f := newFixture(t, "")
	tok := f.create(t, "east", true)
	if _, err := f.r.Register(t.Context(), "east", tok, csrFor(t, "east"), ""); !errors.Is(err, domain.ErrPendingApproval) {
		t.Fatalf("Register of a pending cluster: %v", err)
	}
	if _, err := f.r.Register(t.Context(), "east", tok, csrFor(t, "west"), ""); !errors.Is(err, domain.ErrInvalidCSR) {
		t.Fatalf("Register with a bad CSR: %v", err)
	}
	if _, err := f.r.ApproveCluster(t.Context(), "east"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.Register(t.Context(), "east", tok, csrFor(t, "east"), ""); err != nil {
		t.Fatalf("Register after the refusals: %v", err)
	}
}

func TestConcurrentRegisterSpendsTokenOnce(t *testing.T) {
	f := newFixture(t, "")
	tok := f.create(t, "east", false)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 16 {
		wg.Go(func() {
			_, err := f.r.Register(context.Background(), "east", tok, csrFor(t, "east"), "")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, domain.ErrTokenUsed):
				t.Errorf("Register: %v, want success or ErrTokenUsed", err)
			}
		})
	}
	wg.Wait()
	if ok != 1 {
		t.Fatalf("%d registrations succeeded with one token, want 1", ok)
	}
}

func TestRelayTokenWaitsForApproval(t *testing.T) {
	f := newFixture(t, "relay-secret")
	if _, err := f.r.Register(t.Context(), "east", "relay-secret", csrFor(t, "east"), ""); !errors.Is(err, domain.ErrPendingApproval) {
		t.Fatalf("first Register with the relay token: %v, want ErrPendingApproval", err)
	}
	c, err := f.r.GetCluster(t.Context(), "east")
	if err != nil || c.Status != domain.StatusPendingApproval {
		t.Fatalf("record after the relay token: %+v, %v; want PENDING_APPROVAL", c, err)
	}
	if _, err := f.r.Register(t.Context(), "east", "relay-secret", csrFor(t, "east"), ""); !errors.Is(err, domain.ErrPendingApproval) {
		t.Fatalf("second Register before approval: %v", err)
	}
	if _, err := f.r.ApproveCluster(t.Context(), "east"); err != nil {
		t.Fatal(err)
	}
	issued, err := f.r.Register(t.Context(), "east", "relay-secret", csrFor(t, "east"), "")
	if err != nil {
		t.Fatalf("Register after approval: %v", err)
	}
	checkIssued(t, f.ca, issued, "east")
}

func TestDeregisterRevokes(t *testing.T) {
	f := newFixture(t, "")
	first, err := f.r.Register(t.Context(), "demo", "demo-token", csrFor(t, "demo"), "")
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.r.Renew(t.Context(), "demo", csrFor(t, "demo"), "v2")
	if err != nil {
		t.Fatal(err)
	}
	c, n, err := f.r.DeregisterCluster(t.Context(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || c.Status != domain.StatusDeregistered {
		t.Fatalf("Deregister: revoked %d, status %v; want 2, DEREGISTERED", n, c.Status)
	}
	for _, s := range []string{first.Serial, second.Serial} {
		if revoked, _ := f.revoked.IsRevoked(t.Context(), s); !revoked {
			t.Errorf("serial %s is not revoked in this replica", s)
		}
	}
	// Another replica sees them through the store.
	other := app.NewRevocations(f.stores.Revocations, time.Hour, nil)
	if err := other.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if revoked, _ := other.IsRevoked(t.Context(), second.Serial); !revoked {
		t.Error("another replica does not see the revocation")
	}
	if _, err := f.r.Renew(t.Context(), "demo", csrFor(t, "demo"), ""); !errors.Is(err, domain.ErrDeregistered) {
		t.Fatalf("Renew after deregistration: %v, want ErrDeregistered", err)
	}
	// Registering again needs a new token, and then works.
	tok := f.create(t, "demo", false)
	if _, err := f.r.Register(t.Context(), "demo", tok, csrFor(t, "demo"), ""); err != nil {
		t.Fatalf("Register after re-creating: %v", err)
	}
	if _, _, err := f.r.DeregisterCluster(t.Context(), "nowhere"); !errors.Is(err, domain.ErrClusterNotFound) {
		t.Fatalf("Deregister of an unknown cluster: %v", err)
	}
}

// failingRevocations fails every read after the first.
type failingRevocations struct {
	app.RevocationStore
	mu    sync.Mutex
	reads int
}

func (f *failingRevocations) Revoked(ctx context.Context, now time.Time) ([]revocation.Revoked, error) {
	f.mu.Lock()
	f.reads++
	n := f.reads
	f.mu.Unlock()
	if n > 1 {
		return nil, errors.New("store down")
	}
	return f.RevocationStore.Revoked(ctx, now)
}

func TestRevocationsSurviveStoreOutage(t *testing.T) {
	mem := memory.NewRevocations()
	if err := mem.Revoke(t.Context(), []domain.IssuedCert{{Serial: "42", NotAfter: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	r := app.NewRevocations(&failingRevocations{RevocationStore: mem}, time.Hour, nil)
	if err := r.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.Refresh(t.Context()); err == nil {
		t.Fatal("second Refresh did not fail")
	}
	for serial, want := range map[string]bool{"42": true, "43": false} {
		got, err := r.IsRevoked(t.Context(), serial)
		if err != nil || got != want {
			t.Errorf("IsRevoked(%s) during an outage = %v, %v; want %v, nil", serial, got, err, want)
		}
	}
}

func TestTrustBundle(t *testing.T) {
	f := newFixture(t, "")
	roots, err := pki.ParseCertificates(f.r.TrustBundle())
	if err != nil {
		t.Fatal(err)
	}
	if len(roots) != 1 || !roots[0].Equal(f.ca.Root) {
		t.Fatalf("trust bundle holds %d certificates, want the CA root only", len(roots))
	}
}

// checkIssued verifies the chain against the bundle and returns the leaf.
func checkIssued(t *testing.T, ca *pki.CA, issued app.Issued, cluster string) *x509.Certificate {
	t.Helper()
	chain, err := pki.ParseCertificates(issued.ChainPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := pki.ParseCertificates(issued.BundlePEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	for _, c := range roots {
		pool.AddCert(c)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: leaf.NotBefore.Add(time.Minute)}); err != nil {
		t.Fatalf("leaf does not verify against the bundle: %v", err)
	}
	id, err := pki.IDFromCertificate(leaf)
	if err != nil {
		t.Fatal(err)
	}
	if id != pki.ClusterID(td, cluster) {
		t.Fatalf("leaf names %v, want cluster %s", id, cluster)
	}
	if issued.Serial != leaf.SerialNumber.String() {
		t.Fatalf("Serial %s, leaf serial %s", issued.Serial, leaf.SerialNumber)
	}
	return leaf
}

// BenchmarkRenew is the whole signing path of a call: parse and validate
// the CSR, look the cluster up, sign with the smallstep authority, record
// the certificate (memory store).
func BenchmarkRenew(b *testing.B) {
	f := newFixture(b, "")
	// Many clusters, so that no record's list of live certificates grows
	// long enough to matter.
	const clusters = 256
	csrs := make([][]byte, clusters)
	for i := range csrs {
		csrs[i] = csrFor(b, fmt.Sprintf("c%d", i))
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := f.r.Renew(ctx, fmt.Sprintf("c%d", i%clusters), csrs[i%clusters], ""); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "signings/s")
}
