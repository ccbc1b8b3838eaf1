package platformtest

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/meshplane/meshplane/libs/platform"
)

// ServerTLS writes the CA and a fresh server key pair into a temporary
// directory and returns TLS options that use them with the given client
// authentication mode.
func (ca *CA) ServerTLS(t testing.TB, mode platform.ClientAuthMode) platform.TLSOptions {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := WriteKeyPair(t, dir, "server", ca.ServerCert(t))
	o := platform.TLSOptions{
		CertFile:   certFile,
		KeyFile:    keyFile,
		ClientAuth: mode,
		MinVersion: platform.TLS13,
	}
	if mode != platform.ClientAuthNone {
		o.ClientCAFile = ca.WriteCAFile(t, dir)
	}
	return o
}

// ClientOptions returns options for calling addr over TLS, trusting only ca
// and presenting cert (none if nil).
func (ca *CA) ClientOptions(t testing.TB, addr string, cert *tls.Certificate) platform.ClientOptions {
	t.Helper()
	o := platform.NewClientOptions()
	o.Addr = addr
	o.CAFile = ca.WriteCAFile(t, t.TempDir())
	if cert != nil {
		o.CertificateSource = func() (*tls.Certificate, error) { return cert, nil }
	}
	return o
}

// Serve runs s on two fresh loopback listeners and returns their addresses.
// When the test ends, it stops the server and fails the test if Serve or
// ServeAdmin returned an error.
func Serve(t testing.TB, s *platform.Server) (addr, adminAddr string) {
	t.Helper()
	ln := Listen(t)
	adminLn := Listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { errs <- s.Serve(ctx, ln) }()
	go func() { errs <- s.ServeAdmin(ctx, adminLn) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("server stopped with an error: %v", err)
			}
		}
	})
	return ln.Addr().String(), adminLn.Addr().String()
}

// Listen opens a listener on a free loopback port. Hand it to the server as
// it is: closing it and listening again on its port races other tests.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on loopback: %v", err)
	}
	return ln
}
