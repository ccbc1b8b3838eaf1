package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/meshplane/meshplane/libs/platform"
)

// TestVersion: the client version always; the services served at --addr
// with a service certificate (reflection) and without one (health
// checks); agent versions from registration; an unreachable server is
// reported with a hint, not an error.
func TestVersion(t *testing.T) {
	out, errOut, code := meshctlOffline(t, "version", "--client")
	if code != 0 || !strings.HasPrefix(out, "Client: meshctl ") || strings.Contains(out, "Server") {
		t.Fatalf("version --client: exit %d %q %q", code, out, errOut)
	}

	s := startRegistration(t)
	out, errOut, code = s.meshctl(t, "cluster", "register", "--cluster", "east", "-o", "json")
	if code != 0 {
		t.Fatalf("register: %s", errOut)
	}
	var reg struct{ Token string }
	if err := json.Unmarshal([]byte(out), &reg); err != nil {
		t.Fatal(err)
	}
	if err := s.registerAgent(t, "east", reg.Token); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = s.meshctl(t, "version")
	if code != 0 {
		t.Fatalf("version: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"Server: " + s.addr, "meshplane.registration.v1.ClusterService", "meshplane.registration.v1.RegistrationService", "east", "v9"} {
		if !strings.Contains(out, want) {
			t.Errorf("version lacks %q:\n%s", want, out)
		}
	}
	// With a service certificate, each service reports its build.
	if !hasLine(out, "meshplane.registration.v1.ClusterService", "SERVING", platform.Version) || !hasLine(out, "meshplane.registration.v1.RegistrationService", "SERVING", platform.Version) || strings.Contains(out, "unknown") {
		t.Errorf("version with a certificate:\n%s", out)
	}
	if strings.Contains(out, "TranslationService") {
		t.Errorf("version lists a service registration does not serve:\n%s", out)
	}

	// Cluster names complete from registration.
	out, _, _ = meshctlOffline(t, "__complete", "cluster", "deregister", "--addr", s.addr, "--pki-dir", s.pkiDir, "")
	if !strings.Contains(out, "east\n") {
		t.Errorf("completion of cluster deregister:\n%s", out)
	}

	// Without a client certificate: health checks still find the services.
	out, errOut, code = meshctlOffline(t, "version", "--addr", s.addr, "--ca-file", s.rootFile, "-o", "json")
	var rep versionReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("version -o json without a certificate: exit %d, %v: %s %s", code, err, out, errOut)
	}
	if rep.Server == nil || len(rep.Server.Services) != 2 || rep.Server.Services[0].Version != "unknown" || rep.Server.Services[0].Status != "SERVING" {
		t.Errorf("version without a certificate = %s", out)
	}

	t2 := startTranslation(t)
	out, _, _ = t2.meshctl(t, "version", "-o", "yaml")
	if !strings.Contains(out, "service: meshplane.translation.v1.TranslationService") || !strings.Contains(out, "status: SERVING") || !strings.Contains(out, "version: "+platform.Version) {
		t.Errorf("version against translation:\n%s", out)
	}

	out, _, code = meshctlOffline(t, "version", "--addr", "127.0.0.1:1", "--plaintext")
	if code != 0 || !strings.Contains(out, "cannot reach the management plane at 127.0.0.1:1") || !strings.Contains(out, "hint:") {
		t.Errorf("version against nothing: exit %d:\n%s", code, out)
	}
}
