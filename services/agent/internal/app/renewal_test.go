package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
)

// fakeClock advances only when the code under test sleeps, so a day of
// certificate lifetime passes in microseconds.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) after(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.t = c.t.Add(d)
	now := c.t
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- now
	return ch
}

// caRenewer signs renewal CSRs at the fake clock's time and records when
// each renewal happened and which certificate it replaced.
type caRenewer struct {
	ca    *pki.CA
	clock *fakeClock
	id    *Identity
	ttl   time.Duration
	fail  bool
	stop  int
	done  context.CancelFunc

	mu    sync.Mutex
	times []time.Time
	prev  []time.Time // NotAfter of the certificate in use at each call
}

func (r *caRenewer) Renew(_ context.Context, csrPEM []byte) ([]byte, []byte, error) {
	_, notAfter, err := r.id.validity()
	if err != nil {
		return nil, nil, err
	}
	r.mu.Lock()
	r.times = append(r.times, r.clock.now())
	r.prev = append(r.prev, notAfter)
	n := len(r.times)
	r.mu.Unlock()
	if n >= r.stop {
		defer r.done()
	}
	if r.fail {
		return nil, nil, errors.New("registration unavailable")
	}
	csr, err := pki.ParseCSR(csrPEM)
	if err != nil {
		return nil, nil, err
	}
	id, err := pki.ParseID(csr.URIs[0])
	if err != nil {
		return nil, nil, err
	}
	chain, err := r.ca.Sign(csr.PublicKey, pki.LeafOptions{ID: id, TTL: r.ttl, Now: r.clock.now()})
	if err != nil {
		return nil, nil, err
	}
	return pki.EncodeCertificates(chain...), r.ca.TrustBundlePEM(), nil
}

func TestRenewAtWindow(t *testing.T) {
	nb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	na := nb.Add(100 * time.Hour)
	if got := RenewAt(nb, na, 0); !got.Equal(nb.Add(80 * time.Hour)) {
		t.Errorf("jitter 0: %v, want 80%% of the lifetime", got.Sub(nb))
	}
	if got := RenewAt(nb, na, 0.999999); got.Before(nb.Add(75*time.Hour)) || !got.Before(nb.Add(80*time.Hour)) {
		t.Errorf("jitter ~1: %v, want just after 75%% of the lifetime", got.Sub(nb))
	}
}

func TestRenewalHappensInWindowBeforeExpiry(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	clock := &fakeClock{t: start}
	store := &memStore{}
	cred := issued(t, ca, "east", start, 10*time.Minute)
	store.cred = &cred
	id := NewIdentity("east", trustDomain, func() (string, error) { return "", errors.New("no token") }, store, &caRegistrar{ca: ca}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	id.now, id.after = clock.now, clock.after
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := id.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := id.Certificate()

	r := &caRenewer{ca: ca, clock: clock, id: id, ttl: 10 * time.Minute, stop: 3, done: cancel}
	if err := id.RunRenewal(ctx, r); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("renewal did not run three times before the deadline: %v", ctx.Err())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for n, at := range r.times {
		notAfter := r.prev[n]
		// pki.Sign backdates NotBefore by a minute for clock skew.
		life := 10*time.Minute + time.Minute
		remaining := notAfter.Sub(at)
		if remaining < life*20/100 || remaining > life*25/100 {
			t.Errorf("renewal %d with %v of %v left, want 20-25%%", n, remaining, life)
		}
	}
	after, _ := id.Certificate()
	if after == before {
		t.Error("the renewed certificate was not adopted")
	}
	if len(store.saved) < 3 {
		t.Errorf("saved %d credentials, want every renewal saved", len(store.saved))
	}
}

func TestExpiredCertificateRegistersAgain(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	clock := &fakeClock{t: start}
	store := &memStore{}
	cred := issued(t, ca, "east", start, 10*time.Minute)
	store.cred = &cred
	reg := &caRegistrar{ca: ca}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Stop the loop once it has registered again.
	stopping := registrarFunc(func(ctx context.Context, cluster, token string, csr []byte) ([]byte, []byte, error) {
		defer cancel()
		return reg.Register(ctx, cluster, token, csr)
	})
	id := NewIdentity("east", trustDomain, func() (string, error) { return "token", nil }, store, stopping, slog.New(slog.NewTextHandler(io.Discard, nil)))
	id.now, id.after = clock.now, clock.after
	if err := id.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if reg.registrations() != 0 {
		t.Fatal("valid stored credentials must not register")
	}
	// Renewal always fails: once the certificate has expired, the agent
	// must fall back to its bootstrap token.
	r := &caRenewer{ca: ca, clock: clock, id: id, ttl: 10 * time.Minute, fail: true, stop: 1 << 30, done: func() {}}
	_ = id.RunRenewal(ctx, r)
	if reg.registrations() == 0 {
		t.Fatal("an expired certificate did not lead to registering again")
	}
	if len(r.times) == 0 {
		t.Fatal("renewal was never tried before expiry")
	}
}

type registrarFunc func(ctx context.Context, cluster, token string, csr []byte) ([]byte, []byte, error)

func (f registrarFunc) Register(ctx context.Context, cluster, token string, csr []byte) ([]byte, []byte, error) {
	return f(ctx, cluster, token, csr)
}
