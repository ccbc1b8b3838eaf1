package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	console "github.com/meshplane/meshplane/services/console/service"
)

// TestConsoleSettingsFromDevPKI: with --dev-pki-dir the console dials the
// front door on loopback with a service certificate of its own, and serves
// HTTPS with a certificate from the dev CA.
func TestConsoleSettingsFromDevPKI(t *testing.T) {
	dir := t.TempDir()
	srvOpts := platform.NewServerOptions()
	srvOpts.Addr = ":9900"
	caDir := filepath.Join(dir, "ca")
	if err := devServerPKI(dir, caDir, pki.DefaultTrustDomain, &srvOpts); err != nil {
		t.Fatal(err)
	}
	s := settings{devPKIDir: dir, trustDomain: pki.DefaultTrustDomain, console: console.DefaultConfig()}
	s.reg.CADir = caDir
	s.console.Addr = "127.0.0.1:9443"
	if err := consoleSettings(&s, srvOpts); err != nil {
		t.Fatal(err)
	}
	c := s.console
	if c.ManagementAddr != "127.0.0.1:9900" {
		t.Errorf("management addr = %q, want the front door on loopback", c.ManagementAddr)
	}
	b, err := os.ReadFile(c.Upstream.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCertificates(b)
	if err != nil {
		t.Fatal(err)
	}
	id, err := pki.IDFromCertificate(certs[0])
	if err != nil || id != pki.ServiceID(pki.DefaultTrustDomain, "console") {
		t.Errorf("client certificate names %v (%v), want the console's service ID", id, err)
	}
	if c.TLSCertFile == "" || c.Upstream.CAFile == "" {
		t.Errorf("console TLS %q, upstream CA %q", c.TLSCertFile, c.Upstream.CAFile)
	}
	c.ManagementAddr = ""
	if err := c.Validate(); err == nil {
		t.Error("a console without a management address validated")
	}

	// Without the dev PKI, the console's certificate must be given.
	s2 := settings{trustDomain: pki.DefaultTrustDomain, console: console.DefaultConfig()}
	s2.console.Addr = "127.0.0.1:9443"
	if err := consoleSettings(&s2, srvOpts); err == nil {
		t.Error("no console certificate and no --dev-pki-dir accepted")
	}
}
