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
	u, err := url.Parse("spiffe://test.local/cluster/east")
	if err != nil {
		t.Fatal(err)
	}
	notAfter := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cert := &x509.Certificate{SerialNumber: big.NewInt(7), NotAfter: notAfter, URIs: []*url.URL{u}}

	var policy atomic.Pointer[AccessPolicy]
	p := AccessPolicy{}
	policy.Store(&p)
	now := notAfter.Add(-time.Second)
	reached := 0
	g := &guard{
		next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached++
			if id, ok := IdentityFromContext(r.Context()); !ok || id.Name != "east" {
				t.Errorf("handler saw identity %v, %v", id, ok)
			}
		}),
		logger:    slog.New(slog.DiscardHandler),
		policy:    &policy,
		errWriter: connect.NewErrorWriter(),
		rejected:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"code"}),
		now:       func() time.Time { return now },
	}
	serve := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/a.v1.Svc/Get", nil)
		r.Header.Set("Content-Type", "application/proto")
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		return w
	}

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
	u, _ := url.Parse("spiffe://test.local/cluster/east")
	cert := &x509.Certificate{SerialNumber: big.NewInt(7), NotAfter: time.Now().Add(time.Hour), URIs: []*url.URL{u}}
	var policy atomic.Pointer[AccessPolicy]
	p := AccessPolicy{}
	policy.Store(&p)
	g := &guard{
		next:      http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("handler reached") }),
		logger:    slog.New(slog.DiscardHandler),
		policy:    &policy,
		errWriter: connect.NewErrorWriter(),
		rejected:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"code"}),
		now:       time.Now,
	}
	r := httptest.NewRequest(http.MethodPost, "/a.v1.Svc/Get", nil)
	r.Header.Set("Content-Type", "application/proto")
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", w.Code)
	}
}
