package service_test

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/services/registration/service"
)

const td = "test.local"

// protocols are the wire protocols every handler is tested with.
var protocols = []struct {
	name string
	opts []connect.ClientOption
}{
	{"connect", nil},
	{"grpc", []connect.ClientOption{connect.WithGRPC()}},
}

// env is a registration service on a real TLS server on loopback. The
// server's certificate and every client certificate come from the same CA
// that signs cluster certificates, as in a real install.
type env struct {
	ca       *pki.CA
	addr     string
	rootFile string
	svc      *service.Service
}

func newEnv(t *testing.T, opts ...service.Option) *env {
	t.Helper()
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	return newEnvWithCA(t, ca, func(*service.Config) {}, opts...)
}

// newEnvWithCA serves a registration service signing with ca; edit changes
// the configuration first. Replicas that share ca and a store behave as one
// install.
func newEnvWithCA(t *testing.T, ca *pki.CA, edit func(*service.Config), opts ...service.Option) *env {
	t.Helper()
	dir := t.TempDir()
	rootFile := filepath.Join(dir, "root.pem")
	writeFile(t, rootFile, ca.TrustBundlePEM())
	certPEM, keyPEM, err := ca.IssueKeyPair(pki.LeafOptions{
		ID: pki.ServiceID(td, service.Name), TTL: time.Hour, Server: true,
		DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	writeFile(t, certFile, certPEM)
	writeFile(t, keyFile, keyPEM)

	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	cfg := service.DefaultConfig()
	cfg.TrustDomain = td
	cfg.CADir = filepath.Join(dir, "unused-ca")
	cfg.CertTTL = time.Hour
	edit(&cfg)
	revocation := service.NewRevocationChecker()
	svc, err := service.New(cfg, append([]service.Option{service.WithCA(ca), service.WithLogger(log), service.WithRevocationChecker(revocation)}, opts...)...)
	if err != nil {
		t.Fatalf("service.New: %v", err)
	}
	svc.AddBootstrapToken("east", "east-token")
	svc.AddBootstrapToken("west", "west-token")

	srvOpts := platform.NewServerOptions()
	srvOpts.Addr, srvOpts.AdminAddr = "127.0.0.1:0", "127.0.0.1:0"
	srvOpts.TrustDomain = td
	srvOpts.Revocation = revocation
	srvOpts.TLS = platform.TLSOptions{
		CertFile: certFile, KeyFile: keyFile, ClientCAFile: rootFile,
		// Register is called before the agent has a certificate.
		ClientAuth: platform.ClientAuthOptional, MinVersion: platform.TLS13,
	}
	srv, err := platform.NewServer(srvOpts, log, platform.NewRegistry())
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	svc.Mount(srv)
	srv.SetReady(true)
	addr, _ := platformtest.Serve(t, srv)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &env{ca: ca, addr: addr, rootFile: rootFile, svc: svc}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// client returns a RegistrationService client that presents cert (none if
// nil).
func (e *env) client(t *testing.T, cert *tls.Certificate, protoOpts []connect.ClientOption) registrationv1connect.RegistrationServiceClient {
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
	return registrationv1connect.NewRegistrationServiceClient(hc, platform.BaseURL(o), append(platform.DefaultClientOptions(o), protoOpts...)...)
}

// serviceCert is a certificate of a management service from the same CA.
func (e *env) serviceCert(t *testing.T, name string) *tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := e.ca.IssueKeyPair(pki.LeafOptions{ID: pki.ServiceID(td, name), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

func newKeyAndCSR(t *testing.T, cluster string) (crypto.Signer, []byte) {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.NewCSR(key, pki.ClusterID(td, cluster))
	if err != nil {
		t.Fatal(err)
	}
	return key, csr
}

// checkChain asserts what a cluster certificate must be: one URI SAN naming
// the cluster, client auth only, no CA, and a chain that verifies against
// the trust bundle returned with it.
func checkChain(t *testing.T, chainPEM, bundlePEM []byte, key crypto.Signer, cluster string) *x509.Certificate {
	t.Helper()
	chain, err := pki.ParseCertificates(chainPEM)
	if err != nil {
		t.Fatalf("chain: %v", err)
	}
	leaf := chain[0]
	if got, want := len(leaf.URIs), 1; got != want {
		t.Fatalf("leaf has %d URI SANs, want %d", got, want)
	}
	if got, want := leaf.URIs[0].String(), "spiffe://"+td+"/cluster/"+cluster; got != want {
		t.Fatalf("leaf URI SAN %s, want %s", got, want)
	}
	if len(leaf.DNSNames)+len(leaf.IPAddresses)+len(leaf.EmailAddresses) != 0 {
		t.Fatalf("leaf has other SANs: %v %v %v", leaf.DNSNames, leaf.IPAddresses, leaf.EmailAddresses)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || len(leaf.UnknownExtKeyUsage) != 0 {
		t.Fatalf("leaf EKUs %v %v, want client auth only", leaf.ExtKeyUsage, leaf.UnknownExtKeyUsage)
	}
	if leaf.IsCA {
		t.Fatal("leaf is a CA")
	}
	if !key.Public().(comparableKey).Equal(leaf.PublicKey) {
		t.Fatal("leaf is not for the key in the CSR")
	}
	roots, err := pki.ParseCertificates(bundlePEM)
	if err != nil {
		t.Fatalf("bundle: %v", err)
	}
	rootPool, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range roots {
		rootPool.AddCert(c)
	}
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: rootPool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("leaf does not verify against the trust bundle: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: rootPool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Fatal("a cluster certificate verifies for server auth")
	}
	return leaf
}

func register(t *testing.T, c registrationv1connect.RegistrationServiceClient, cluster, token string) (*tls.Certificate, *registrationv1.RegisterResponse) {
	t.Helper()
	key, csr := newKeyAndCSR(t, cluster)
	res, err := c.Register(t.Context(), connect.NewRequest(&registrationv1.RegisterRequest{
		Cluster: cluster, Token: token, CsrPem: csr, AgentVersion: "test",
	}))
	if err != nil {
		t.Fatalf("Register(%s): %v", cluster, err)
	}
	checkChain(t, res.Msg.GetCertificateChainPem(), res.Msg.GetTrustBundlePem(), key, cluster)
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(res.Msg.GetCertificateChainPem(), keyPEM)
	if err != nil {
		t.Fatalf("issued chain and key do not load: %v", err)
	}
	return &cert, res.Msg
}

func TestRegister(t *testing.T) {
	e := newEnv(t)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			// No client certificate: the token stands in for one.
			c := e.client(t, nil, p.opts)
			_, res := register(t, c, "east", "east-token")
			if d := time.Until(res.GetExpiresAt().AsTime()); d < 55*time.Minute || d > time.Hour {
				t.Errorf("expires in %v, want about the configured hour", d)
			}

			for _, tc := range []struct {
				name          string
				cluster       string
				token         string
				csrCluster    string
				want          connect.Code
				wantNoMessage bool
			}{
				{name: "wrong token", cluster: "east", token: "guess", csrCluster: "east", want: connect.CodeUnauthenticated},
				{name: "token of cluster west used for east", cluster: "east", token: "west-token", csrCluster: "east", want: connect.CodeUnauthenticated},
				{name: "token of cluster east used for west", cluster: "west", token: "east-token", csrCluster: "west", want: connect.CodeUnauthenticated},
				{name: "unknown cluster", cluster: "north", token: "east-token", csrCluster: "north", want: connect.CodeUnauthenticated},
				{name: "right token, CSR for another cluster", cluster: "east", token: "east-token", csrCluster: "west", want: connect.CodeInvalidArgument},
			} {
				t.Run(tc.name, func(t *testing.T) {
					_, csr := newKeyAndCSR(t, tc.csrCluster)
					res, err := c.Register(t.Context(), connect.NewRequest(&registrationv1.RegisterRequest{
						Cluster: tc.cluster, Token: tc.token, CsrPem: csr,
					}))
					if got := connect.CodeOf(err); err == nil || got != tc.want {
						t.Fatalf("Register: %v (code %v), want code %v", err, got, tc.want)
					}
					if res != nil {
						t.Fatal("a refused Register returned a response")
					}
				})
			}
		})
	}
}

func TestRenew(t *testing.T) {
	e := newEnv(t)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			eastCert, _ := register(t, e.client(t, nil, p.opts), "east", "east-token")

			t.Run("without a client certificate", func(t *testing.T) {
				_, csr := newKeyAndCSR(t, "east")
				_, err := e.client(t, nil, p.opts).Renew(t.Context(), connect.NewRequest(&registrationv1.RenewRequest{CsrPem: csr}))
				if got := connect.CodeOf(err); err == nil || got != connect.CodeUnauthenticated {
					t.Fatalf("Renew: %v (code %v), want Unauthenticated", err, got)
				}
			})
			t.Run("with a service certificate", func(t *testing.T) {
				_, csr := newKeyAndCSR(t, "east")
				_, err := e.client(t, e.serviceCert(t, "ingest"), p.opts).Renew(t.Context(), connect.NewRequest(&registrationv1.RenewRequest{CsrPem: csr}))
				if got := connect.CodeOf(err); err == nil || got != connect.CodePermissionDenied {
					t.Fatalf("Renew: %v (code %v), want PermissionDenied", err, got)
				}
			})
			t.Run("with the cluster certificate, for another cluster", func(t *testing.T) {
				_, csr := newKeyAndCSR(t, "west")
				_, err := e.client(t, eastCert, p.opts).Renew(t.Context(), connect.NewRequest(&registrationv1.RenewRequest{CsrPem: csr}))
				if got := connect.CodeOf(err); err == nil || got != connect.CodeInvalidArgument {
					t.Fatalf("Renew: %v (code %v), want InvalidArgument", err, got)
				}
			})
			t.Run("with the cluster certificate", func(t *testing.T) {
				key, csr := newKeyAndCSR(t, "east")
				res, err := e.client(t, eastCert, p.opts).Renew(t.Context(), connect.NewRequest(&registrationv1.RenewRequest{CsrPem: csr}))
				if err != nil {
					t.Fatalf("Renew: %v", err)
				}
				leaf := checkChain(t, res.Msg.GetCertificateChainPem(), res.Msg.GetTrustBundlePem(), key, "east")
				if leaf.SerialNumber.Cmp(eastCert.Leaf.SerialNumber) == 0 {
					t.Fatal("renewal returned the old certificate")
				}
			})
		})
	}
}

func TestGetTrustBundle(t *testing.T) {
	e := newEnv(t)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			// Public: no client certificate.
			res, err := e.client(t, nil, p.opts).GetTrustBundle(t.Context(), connect.NewRequest(&registrationv1.GetTrustBundleRequest{}))
			if err != nil {
				t.Fatalf("GetTrustBundle: %v", err)
			}
			roots, err := pki.ParseCertificates(res.Msg.GetTrustBundlePem())
			if err != nil {
				t.Fatal(err)
			}
			if len(roots) != 1 || !roots[0].Equal(e.ca.Root) {
				t.Fatal("trust bundle is not the CA root")
			}
		})
	}
}

// comparableKey is a public key that compares with another: every key
// type of the standard library is one (see crypto.PublicKey).
type comparableKey interface {
	Equal(crypto.PublicKey) bool
}
