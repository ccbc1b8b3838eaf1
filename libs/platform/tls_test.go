package platform_test

import (
	"crypto/tls"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
)

func TestCertReloader(t *testing.T) {
	ca := platformtest.NewCA(t, "test CA")
	dir := t.TempDir()
	first, second := ca.ServerCert(t), ca.ServerCert(t)
	certFile, keyFile := platformtest.WriteKeyPair(t, dir, "server", first)
	logs := &syncBuffer{}
	r, err := platform.NewCertReloader(certFile, keyFile, slogTo(logs))
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string {
		t.Helper()
		c, err := r.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.SerialNumber.String()
	}
	if got := serial(); got != first.Leaf.SerialNumber.String() {
		t.Fatalf("serving %s, want the first certificate", got)
	}

	// Half a rotation: a new key with the old certificate does not load,
	// and the last good pair stays in service.
	other := ca.ServerCert(t)
	_, otherKey := platformtest.WriteKeyPair(t, t.TempDir(), "other", other)
	copyFile(t, otherKey, keyFile)
	touch(t, keyFile, time.Now().Add(time.Minute))
	if got := serial(); got != first.Leaf.SerialNumber.String() {
		t.Fatalf("after a broken rotation serving %s, want the first certificate", got)
	}
	_ = serial() // a second handshake must not log the same failure again
	if n := strings.Count(logs.String(), "does not load"); n != 1 {
		t.Errorf("broken pair logged %d times, want once:\n%s", n, logs)
	}

	// The rotation completes.
	platformtest.WriteKeyPair(t, dir, "server", second)
	touch(t, certFile, time.Now().Add(2*time.Minute))
	touch(t, keyFile, time.Now().Add(2*time.Minute))
	if got := serial(); got != second.Leaf.SerialNumber.String() {
		t.Fatalf("after rotation serving %s, want the second certificate", got)
	}

	if _, err := platform.NewCertReloader(certFile, dir+"/missing.pem", slogTo(logs)); err == nil {
		t.Error("NewCertReloader accepted a missing key file")
	}
}

func TestClientRotatesCertificateWithoutNewClient(t *testing.T) {
	ts := newServer(t, platform.ClientAuthRequire, nil).start(t)
	east, west := ts.ca.ClientCert(t, eastID), ts.ca.ClientCert(t, "spiffe://test.local/cluster/west")

	var mu sync.Mutex
	current := &east
	o := ts.ca.ClientOptions(t, ts.addr, nil)
	o.CertificateSource = func() (*tls.Certificate, error) {
		mu.Lock()
		defer mu.Unlock()
		return current, nil
	}
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()

	name := func() any {
		t.Helper()
		res, err := call(t, hc, platform.BaseURL(o), procWhoAmI)
		if err != nil {
			t.Fatal(err)
		}
		return field(res, "name")
	}
	if got := name(); got != "east" {
		t.Fatalf("caller = %v, want east", got)
	}
	mu.Lock()
	current = &west
	mu.Unlock()
	// The open connection keeps the identity it was made with; a new one
	// presents the new certificate.
	hc.CloseIdleConnections()
	if got := name(); got != "west" {
		t.Fatalf("caller after rotation = %v, want west", got)
	}
}

func TestClientCertificateFromFiles(t *testing.T) {
	ts := newServer(t, platform.ClientAuthRequire, nil).start(t)
	dir := t.TempDir()
	o := platform.NewClientOptions()
	o.Addr = ts.addr
	o.CAFile = ts.ca.WriteCAFile(t, dir)
	o.CertFile, o.KeyFile = platformtest.WriteKeyPair(t, dir, "client", ts.ca.ClientCert(t, ingestID))
	o.ServerName = "localhost"
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	res, err := call(t, hc, platform.BaseURL(o), procWhoAmI)
	if err != nil {
		t.Fatal(err)
	}
	if got := field(res, "kind"); got != "service" {
		t.Fatalf("kind = %v, want service", got)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// touch sets an explicit modification time, so the test does not depend on
// the file system's timestamp granularity.
func touch(t *testing.T, path string, mod time.Time) {
	t.Helper()
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
}
