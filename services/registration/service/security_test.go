package service_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	revredis "github.com/meshplane/meshplane/libs/revocation/redis"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/services/registration/service"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/durationpb"
)

// admin returns a ClusterService client presenting cert.
func (e *env) admin(t *testing.T, cert *tls.Certificate, protoOpts []connect.ClientOption) registrationv1connect.ClusterServiceClient {
	t.Helper()
	o := platform.NewClientOptions()
	o.Addr = e.addr
	o.CAFile = e.rootFile
	o.Timeout = 10 * time.Second
	if cert != nil {
		o.CertificateSource = func() (*tls.Certificate, error) { return cert, nil }
	}
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return registrationv1connect.NewClusterServiceClient(hc, platform.BaseURL(o), append(platform.DefaultClientOptions(o), protoOpts...)...)
}

// create makes a bootstrap token for cluster as meshctl does.
func (e *env) create(t *testing.T, cluster string, requireApproval bool, ttl time.Duration) string {
	t.Helper()
	req := &registrationv1.CreateClusterRequest{Name: cluster, RequireApproval: requireApproval}
	if ttl > 0 {
		req.TokenTtl = durationpb.New(ttl)
	}
	res, err := e.admin(t, e.serviceCert(t, "meshctl"), nil).CreateCluster(t.Context(), connect.NewRequest(req))
	if err != nil {
		t.Fatalf("CreateCluster(%s): %v", cluster, err)
	}
	if !strings.HasPrefix(res.Msg.GetToken(), "mpbt_") {
		t.Fatalf("token %q does not have the mpbt_ prefix", res.Msg.GetToken())
	}
	return res.Msg.GetToken()
}

// csrPEM builds a request signed by key from tmpl; edit may change the DER
// before it is encoded.
func csrPEM(t *testing.T, key crypto.Signer, tmpl *x509.CertificateRequest, edit func([]byte)) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(der)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// wantRefused checks the code and, when given, a word of the message, and
// that no certificate came back.
func wantRefused[T any](t *testing.T, res *connect.Response[T], err error, code connect.Code, word string) {
	t.Helper()
	if err == nil {
		t.Fatalf("call succeeded, want %v", code)
	}
	if got := connect.CodeOf(err); got != code {
		t.Fatalf("call: %v (code %v), want code %v", err, got, code)
	}
	if word != "" && !strings.Contains(err.Error(), word) {
		t.Fatalf("call: %v, want a message saying %q", err, word)
	}
	if res != nil {
		t.Fatal("a refused call returned a response")
	}
}

// TestRegisterRefusals sends every kind of bad registration over real TLS
// and checks each is refused with a clear error and no certificate.
func TestRegisterRefusals(t *testing.T) {
	clk := &fakeClock{now: time.Now()}
	reg := prometheus.NewRegistry()
	e := newEnv(t, service.WithClock(clk.Now), service.WithRegisterer(reg))
	t.Cleanup(func() {
		for reason, min := range map[string]float64{"token_invalid": 2, "token_expired": 2, "token_used": 2, "invalid_request": 18, "pending_approval": 2} {
			if got := counter(t, reg, "meshplane_registration_refused_total", map[string]string{"call": "register", "reason": reason}); got < min {
				t.Errorf("refused_total{reason=%s} = %v, want at least %v", reason, got, min)
			}
		}
		if got := counter(t, reg, "meshplane_registration_certificates_issued_total", map[string]string{"call": "register"}); got < 10 {
			t.Errorf("certificates_issued_total{call=register} = %v, want at least 10", got)
		}
	})
	ecKey, _ := newKeyAndCSR(t, "east")
	eastID := pki.ClusterID(td, "east")
	rsaWeak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caExt, err := asn1.Marshal(struct {
		IsCA bool `asn1:"optional"`
	}{true})
	if err != nil {
		t.Fatal(err)
	}

	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := e.client(t, nil, p.opts)
			call := func(cluster, token string, csr []byte) (*connect.Response[registrationv1.RegisterResponse], error) {
				return c.Register(t.Context(), connect.NewRequest(&registrationv1.RegisterRequest{Cluster: cluster, Token: token, CsrPem: csr}))
			}
			good := func(cluster string) []byte { _, csr := newKeyAndCSR(t, cluster); return csr }

			t.Run("wrong token", func(t *testing.T) {
				e.create(t, "east", false, 0)
				res, err := call("east", "mpbt_guess", good("east"))
				wantRefused(t, res, err, connect.CodeUnauthenticated, "not valid")
			})
			t.Run("expired token", func(t *testing.T) {
				tok := e.create(t, "east", false, time.Minute)
				clk.Add(2 * time.Minute)
				defer clk.Add(-2 * time.Minute)
				res, err := call("east", tok, good("east"))
				wantRefused(t, res, err, connect.CodeUnauthenticated, "expired")
			})
			t.Run("used token", func(t *testing.T) {
				tok := e.create(t, "east", false, 0)
				if _, err := call("east", tok, good("east")); err != nil {
					t.Fatalf("first use: %v", err)
				}
				res, err := call("east", tok, good("east"))
				wantRefused(t, res, err, connect.CodeUnauthenticated, "already been used")
			})
			t.Run("token of cluster A used for cluster B", func(t *testing.T) {
				tokA := e.create(t, "east", false, 0)
				e.create(t, "west", false, 0)
				res, err := call("west", tokA, good("west"))
				wantRefused(t, res, err, connect.CodeUnauthenticated, "not valid")
				// And the token still works for its own cluster.
				if _, err := call("east", tokA, good("east")); err != nil {
					t.Fatalf("token after the refusal: %v", err)
				}
			})
			for _, tc := range []struct {
				name string
				csr  func() []byte
				word string
			}{
				{"CSR with an extra URI SAN", func() []byte {
					return csrPEM(t, ecKey, &x509.CertificateRequest{URIs: []*url.URL{eastID.URL(), mustURL(t, "spiffe://"+td+"/service/translation")}}, nil)
				}, "exactly one URI SAN"},
				{"CSR with an extra DNS SAN", func() []byte {
					return csrPEM(t, ecKey, &x509.CertificateRequest{URIs: []*url.URL{eastID.URL()}, DNSNames: []string{"istiod.istio-system.svc"}}, nil)
				}, "only a URI SAN"},
				{"CSR naming a service", func() []byte {
					return csrPEM(t, ecKey, &x509.CertificateRequest{URIs: []*url.URL{mustURL(t, "spiffe://"+td+"/service/east")}}, nil)
				}, "want spiffe://"},
				{"CSR in another trust domain", func() []byte {
					return csrPEM(t, ecKey, &x509.CertificateRequest{URIs: []*url.URL{mustURL(t, "spiffe://evil.local/cluster/east")}}, nil)
				}, "want spiffe://"},
				{"CA request", func() []byte {
					return csrPEM(t, ecKey, &x509.CertificateRequest{URIs: []*url.URL{eastID.URL()},
						ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Critical: true, Value: caExt}}}, nil)
				}, "CA request"},
				{"weak RSA key", func() []byte {
					return csrPEM(t, rsaWeak, &x509.CertificateRequest{URIs: []*url.URL{eastID.URL()}}, nil)
				}, "too weak"},
				{"P-224 key", func() []byte {
					return csrPEM(t, p224, &x509.CertificateRequest{URIs: []*url.URL{eastID.URL()}}, nil)
				}, "not allowed"},
				{"bad signature", func() []byte {
					return csrPEM(t, ecKey, &x509.CertificateRequest{URIs: []*url.URL{eastID.URL()}}, func(der []byte) { der[len(der)-3] ^= 0xff })
				}, "signature"},
				{"not PEM", func() []byte { return []byte("hello") }, "PEM"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					tok := e.create(t, "east", false, 0)
					res, err := call("east", tok, tc.csr())
					wantRefused(t, res, err, connect.CodeInvalidArgument, tc.word)
					// A refused CSR does not spend the token.
					if _, err := call("east", tok, good("east")); err != nil {
						t.Fatalf("token after a refused CSR: %v", err)
					}
				})
			}
			t.Run("pending cluster", func(t *testing.T) {
				north := "north-" + p.name
				tok := e.create(t, north, true, 0)
				res, err := call(north, tok, good(north))
				wantRefused(t, res, err, connect.CodeFailedPrecondition, "approval")
				if _, err := e.admin(t, e.serviceCert(t, "meshctl"), nil).ApproveCluster(t.Context(), connect.NewRequest(&registrationv1.ApproveClusterRequest{Name: north})); err != nil {
					t.Fatal(err)
				}
				if _, err := call(north, tok, good(north)); err != nil {
					t.Fatalf("Register after approval: %v", err)
				}
			})
		})
	}
}

// TestForeignClientCertificate: a certificate from another CA names no one,
// however convincing its SAN.
func TestForeignClientCertificate(t *testing.T) {
	e := newEnv(t)
	other := platformtest.NewCA(t, "other")
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			agent := other.ClientCert(t, "spiffe://"+td+"/cluster/east")
			_, csr := newKeyAndCSR(t, "east")
			res, err := e.client(t, &agent, p.opts).Renew(t.Context(), connect.NewRequest(&registrationv1.RenewRequest{CsrPem: csr}))
			if err == nil || res != nil {
				t.Fatal("Renew with a foreign certificate succeeded")
			}
			admin := other.ClientCert(t, "spiffe://"+td+"/service/meshctl")
			lres, err := e.admin(t, &admin, p.opts).ListClusters(t.Context(), connect.NewRequest(&registrationv1.ListClustersRequest{}))
			if err == nil || lres != nil {
				t.Fatal("ListClusters with a foreign certificate succeeded")
			}
		})
	}
}

// TestClusterServiceAccess: only management service identities administer
// clusters.
func TestClusterServiceAccess(t *testing.T) {
	e := newEnv(t)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			agent, _ := register(t, e.client(t, nil, p.opts), "east", "east-token")
			for _, tc := range []struct {
				name string
				cert *tls.Certificate
				want connect.Code
			}{
				{"agent certificate", agent, connect.CodePermissionDenied},
				{"no certificate", nil, connect.CodeUnauthenticated},
			} {
				t.Run(tc.name, func(t *testing.T) {
					a := e.admin(t, tc.cert, p.opts)
					cres, err := a.CreateCluster(t.Context(), connect.NewRequest(&registrationv1.CreateClusterRequest{Name: "evil"}))
					wantRefused(t, cres, err, tc.want, "")
					dres, err := a.DeregisterCluster(t.Context(), connect.NewRequest(&registrationv1.DeregisterClusterRequest{Name: "west"}))
					wantRefused(t, dres, err, tc.want, "")
					lres, err := a.ListClusters(t.Context(), connect.NewRequest(&registrationv1.ListClustersRequest{}))
					wantRefused(t, lres, err, tc.want, "")
				})
			}
		})
	}
}

// TestClusterLifecycle walks register, list, deregister and re-register
// through ClusterService, and checks that a revoked certificate is refused
// on its next call.
func TestClusterLifecycle(t *testing.T) {
	e := newEnv(t)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			admin := e.admin(t, e.serviceCert(t, "meshctl"), p.opts)
			created, err := admin.CreateCluster(t.Context(), connect.NewRequest(&registrationv1.CreateClusterRequest{Name: "lc-" + p.name}))
			if err != nil {
				t.Fatal(err)
			}
			name := "lc-" + p.name
			if v := created.Msg.GetHelmValues(); v["cluster"] != name || !strings.Contains(v["caBundle"], "BEGIN CERTIFICATE") || v["trustDomain"] != td {
				t.Errorf("helm values %v lack cluster, caBundle or trustDomain", v)
			}
			if s := created.Msg.GetCluster().GetStatus(); s != registrationv1.ClusterStatus_CLUSTER_STATUS_APPROVED {
				t.Errorf("status after create %v, want APPROVED", s)
			}
			cert, _ := register(t, e.client(t, nil, p.opts), name, created.Msg.GetToken())

			got, err := admin.GetCluster(t.Context(), connect.NewRequest(&registrationv1.GetClusterRequest{Name: name}))
			if err != nil {
				t.Fatal(err)
			}
			cl := got.Msg.GetCluster()
			if cl.GetStatus() != registrationv1.ClusterStatus_CLUSTER_STATUS_REGISTERED || cl.GetCertificateSerial() != cert.Leaf.SerialNumber.String() ||
				cl.GetAgentVersion() != "test" || cl.GetFirstSeen() == nil || !cl.GetCertificateExpiresAt().AsTime().Equal(cert.Leaf.NotAfter) {
				t.Errorf("record %v does not match the registration", cl)
			}
			list, err := admin.ListClusters(t.Context(), connect.NewRequest(&registrationv1.ListClustersRequest{}))
			if err != nil || len(list.Msg.GetClusters()) == 0 {
				t.Fatalf("ListClusters: %v, %v", list, err)
			}

			// The certificate works until the cluster is deregistered.
			_, csr := newKeyAndCSR(t, name)
			if _, err := e.client(t, cert, p.opts).Renew(t.Context(), connect.NewRequest(&registrationv1.RenewRequest{CsrPem: csr})); err != nil {
				t.Fatalf("Renew before deregistration: %v", err)
			}
			dres, err := admin.DeregisterCluster(t.Context(), connect.NewRequest(&registrationv1.DeregisterClusterRequest{Name: name}))
			if err != nil {
				t.Fatal(err)
			}
			if dres.Msg.GetRevokedCertificates() != 2 {
				t.Errorf("revoked %d certificates, want 2 (registered and renewed)", dres.Msg.GetRevokedCertificates())
			}
			res, err := e.client(t, cert, p.opts).Renew(t.Context(), connect.NewRequest(&registrationv1.RenewRequest{CsrPem: csr}))
			wantRefused(t, res, err, connect.CodeUnauthenticated, "revoked")

			_, err = admin.ApproveCluster(t.Context(), connect.NewRequest(&registrationv1.ApproveClusterRequest{Name: name}))
			if connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Errorf("approving a deregistered cluster: %v, want PermissionDenied", err)
			}
			_, err = admin.GetCluster(t.Context(), connect.NewRequest(&registrationv1.GetClusterRequest{Name: "nowhere"}))
			if connect.CodeOf(err) != connect.CodeNotFound {
				t.Errorf("GetCluster of an unknown cluster: %v, want NotFound", err)
			}
			// Registering again takes a new token.
			again, err := admin.CreateCluster(t.Context(), connect.NewRequest(&registrationv1.CreateClusterRequest{Name: name}))
			if err != nil {
				t.Fatal(err)
			}
			register(t, e.client(t, nil, p.opts), name, again.Msg.GetToken())
		})
	}
}

// TestRevocationSharedThroughRedis runs two replicas over one Redis: a
// cluster deregistered on one is refused by the other within its refresh.
func TestRevocationSharedThroughRedis(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{srv.Addr()}})
	t.Cleanup(func() { _ = client.Close() })
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	fast := func(c *service.Config) { c.RevocationRefresh = 20 * time.Millisecond }
	a := newEnvWithCA(t, ca, fast, service.WithRedis(client))
	b := newEnvWithCA(t, ca, fast, service.WithRedis(client))

	// A token made on A is spent on B, once.
	tok := a.create(t, "east", false, 0)
	cert, _ := register(t, b.client(t, nil, nil), "east", tok)
	_, csr := newKeyAndCSR(t, "east")
	res, err := a.client(t, nil, nil).Register(t.Context(), connect.NewRequest(&registrationv1.RegisterRequest{Cluster: "east", Token: tok, CsrPem: csr}))
	wantRefused(t, res, err, connect.CodeUnauthenticated, "already been used")

	if _, err := a.admin(t, a.serviceCert(t, "meshctl"), nil).DeregisterCluster(t.Context(), connect.NewRequest(&registrationv1.DeregisterClusterRequest{Name: "east"})); err != nil {
		t.Fatal(err)
	}
	platformtest.Eventually(t, 5*time.Second, "replica B to refuse the revoked certificate", func() bool {
		_, err := b.client(t, cert, nil).Renew(t.Context(), connect.NewRequest(&registrationv1.RenewRequest{CsrPem: csr}))
		return connect.CodeOf(err) == connect.CodeUnauthenticated && strings.Contains(err.Error(), "revoked")
	})

	// Redis goes down: B keeps answering from memory, and still refuses
	// the revoked certificate.
	srv.Stop()
	_, err = b.client(t, cert, nil).Renew(t.Context(), connect.NewRequest(&registrationv1.RenewRequest{CsrPem: csr}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("revoked certificate during a Redis outage: %v, want Unauthenticated", err)
	}
	// A call that needs the store says that the store is down, as
	// Unavailable (retry), not an Internal error of registration.
	_, err = a.admin(t, a.serviceCert(t, "meshctl"), nil).ListClusters(t.Context(), connect.NewRequest(&registrationv1.ListClustersRequest{}))
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "store (Redis) is unreachable") {
		t.Fatalf("ListClusters during a Redis outage: %v, want Unavailable naming the store", err)
	}

	// Redis comes back empty: it forgot the revocation. B still refuses
	// the certificate (a cache never unrevokes), and the replicas write
	// what they remember back, so that a replica started now, which knows
	// only the store, refuses it too.
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	revokedKey := revredis.Key(service.DefaultConfig().Install)
	serial := cert.Leaf.SerialNumber.String()
	err = kubetest.WaitFor(t.Context(), 10*time.Second, func(ctx context.Context) (bool, error) {
		_, rerr := b.client(t, cert, nil).Renew(ctx, connect.NewRequest(&registrationv1.RenewRequest{CsrPem: csr}))
		if connect.CodeOf(rerr) != connect.CodeUnauthenticated {
			t.Fatalf("revoked certificate after Redis came back empty: %v, want Unauthenticated", rerr)
		}
		_, zerr := client.ZScore(ctx, revokedKey, serial).Result()
		return zerr == nil, nil
	})
	if err != nil {
		t.Fatalf("the revocation the emptied Redis lost was not written back: %v", err)
	}
	c := newEnvWithCA(t, ca, fast, service.WithRedis(client))
	var last error
	err = kubetest.WaitFor(t.Context(), 5*time.Second, func(ctx context.Context) (bool, error) {
		_, last = c.client(t, cert, nil).Renew(ctx, connect.NewRequest(&registrationv1.RenewRequest{CsrPem: csr}))
		return connect.CodeOf(last) == connect.CodeUnauthenticated && strings.Contains(last.Error(), "revoked"), nil
	})
	if err != nil {
		t.Fatalf("a replica started after Redis came back empty answers the revoked certificate: %v (%v)", last, err)
	}
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// counter reads one counter from reg, 0 when absent.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
