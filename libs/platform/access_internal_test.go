package platform

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// A connection outlives the handshake that verified its certificate, so the
// guard checks expiry on every call. Only a clock can show that, hence this
// test inside the package.
func TestGuardRefusesExpiredCertificateOnLiveConnection(t *testing.T) {
	notAfter := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cert := testCert(t, "spiffe://test.local/cluster/east", notAfter)
	now := notAfter.Add(-time.Second)
	reached := 0
	g := testGuard(AccessPolicy{}, func() time.Time { return now }, func(w http.ResponseWriter, r *http.Request) {
		reached++
		if id, ok := IdentityFromContext(r.Context()); !ok || id.Name != "east" {
			t.Errorf("handler saw identity %v, %v", id, ok)
		}
	})
	serve := func() *httptest.ResponseRecorder { return serveGuard(g, "/a.v1.Svc/Get", cert, true) }

	if w := serve(); w.Code != http.StatusOK || reached != 1 {
		t.Fatalf("valid certificate: status %d, handler reached %d times", w.Code, reached)
	}
	now = notAfter
	w := serve()
	if w.Code != http.StatusUnauthorized || reached != 1 {
		t.Fatalf("expired certificate: status %d, handler reached %d times; want 401 and no call", w.Code, reached)
	}
	if got := w.Header().Get("Connection"); got != "close" {
		t.Errorf("Connection header = %q, want close so the client redials with its new certificate", got)
	}
}

// Unverified certificates prove nothing, whatever they claim.
func TestGuardIgnoresUnverifiedCertificates(t *testing.T) {
	cert := testCert(t, "spiffe://test.local/cluster/east", time.Now().Add(time.Hour))
	g := testGuard(AccessPolicy{}, time.Now, func(http.ResponseWriter, *http.Request) { t.Error("handler reached") })
	w := serveGuard(g, "/a.v1.Svc/Get", cert, false)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", w.Code)
	}
}

// testGuard is a guard over next with policy p, reading the time from now.
func testGuard(p AccessPolicy, now func() time.Time, next http.HandlerFunc) *guard {
	var policy atomic.Pointer[AccessPolicy]
	policy.Store(&p)
	return &guard{
		next:      next,
		logger:    slog.New(slog.DiscardHandler),
		policy:    &policy,
		errWriter: connect.NewErrorWriter(),
		rejected:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"code"}),
		now:       now,
	}
}

// testCert is a client certificate naming spiffeID, valid until notAfter.
func testCert(t *testing.T, spiffeID string, notAfter time.Time) *x509.Certificate {
	t.Helper()
	u, err := url.Parse(spiffeID)
	if err != nil {
		t.Fatal(err)
	}
	return &x509.Certificate{SerialNumber: big.NewInt(7), NotAfter: notAfter, URIs: []*url.URL{u}}
}

// serveGuard sends g a Connect call of procedure from a client that
// presented cert, verified by the TLS handshake when verified is set.
func serveGuard(g *guard, procedure string, cert *x509.Certificate, verified bool) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, procedure, nil)
	r.Header.Set("Content-Type", "application/proto")
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	if verified {
		r.TLS.VerifiedChains = [][]*x509.Certificate{{cert}}
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	return w
}
