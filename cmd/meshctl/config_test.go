package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain points meshctl at a config file that does not exist, so that a
// developer's own contexts never reach the tests.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "meshctl-config")
	if err != nil {
		panic(err)
	}
	os.Setenv(configEnv, filepath.Join(dir, "none.yaml"))
	os.Unsetenv(contextEnv)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func meshctlEnv(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestContexts: a context made by `config set-context` connects with no
// flags; --context, $MESHPLANE_CONTEXT, a flag and a $MESHPLANE_<FLAG>
// variable each win over the current context; use-context switches it.
func TestContexts(t *testing.T) {
	s := startRegistration(t)
	cfg := filepath.Join(t.TempDir(), "sub", "config.yaml")
	t.Setenv(configEnv, cfg)

	mustRun := func(args ...string) string {
		t.Helper()
		out, errOut, code := meshctlEnv(t, args...)
		if code != 0 {
			t.Fatalf("meshctl %q: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
		}
		return out
	}
	wantFail := func(code int, want string, args ...string) {
		t.Helper()
		out, errOut, got := meshctlEnv(t, args...)
		if got != code || !strings.Contains(errOut, want) {
			t.Errorf("meshctl %q: exit %d, want %d with %q\nstdout: %s\nstderr: %s", args, got, code, want, out, errOut)
		}
	}

	// No file: the built-in default address.
	wantFail(1, "localhost:9900", "cluster", "list", "--timeout", "2s")
	if out, errOut, code := meshctlEnv(t, "config", "get-contexts"); code != 0 || out != "" || !strings.Contains(errOut, "no contexts in "+cfg) {
		t.Errorf("get-contexts without a file: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	wantFail(1, "no current context", "config", "current-context")

	mustRun("config", "set-context", "demo", "--addr", s.addr, "--ca-file", s.rootFile,
		"--cert-file", filepath.Join(s.pkiDir, "meshctl.crt"), "--key-file", filepath.Join(s.pkiDir, "meshctl.key"))
	mustRun("config", "set-context", "dead", "--addr", "127.0.0.1:1", "--ca-file", s.rootFile)
	if got := mustRun("config", "current-context"); got != "demo\n" {
		t.Errorf("current-context = %q, want demo (the first context set becomes current)", got)
	}
	if fi, err := os.Stat(cfg); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config file: %v, mode %v, want 0600", err, fi.Mode().Perm())
	}

	// The current context connects with no flags.
	if out := mustRun("cluster", "list", "-o", "json"); !strings.HasPrefix(out, "[") {
		t.Errorf("cluster list through the context: %s", out)
	}
	// --context and $MESHPLANE_CONTEXT pick another one.
	wantFail(1, "cannot reach registration at 127.0.0.1:1", "cluster", "list", "--context", "dead")
	t.Setenv(contextEnv, "dead")
	wantFail(1, "cannot reach registration at 127.0.0.1:1", "cluster", "list")
	mustRun("cluster", "list", "--context", "demo")
	os.Unsetenv(contextEnv)
	wantFail(2, `no context "nope"`, "cluster", "list", "--context", "nope")
	// A flag or its variable overrides the field it names, nothing else.
	wantFail(1, "cannot reach registration at 127.0.0.1:1", "cluster", "list", "--addr", "127.0.0.1:1")
	t.Setenv("MESHPLANE_ADDR", "127.0.0.1:1")
	wantFail(1, "cannot reach registration at 127.0.0.1:1", "cluster", "list")
	os.Unsetenv("MESHPLANE_ADDR")
	// The dead context has no client certificate; a flag gives one.
	mustRun("cluster", "list", "--context", "dead", "--addr", s.addr, "--pki-dir", s.pkiDir)

	out := mustRun("config", "get-contexts")
	if !strings.Contains(out, "*        demo") || !strings.Contains(out, "dead") || !strings.Contains(out, s.addr) {
		t.Errorf("get-contexts:\n%s", out)
	}
	if got := mustRun("config", "use-context", "dead"); !strings.Contains(got, `Switched to context "dead"`) {
		t.Errorf("use-context: %s", got)
	}
	wantFail(1, "127.0.0.1:1", "cluster", "list")
	wantFail(2, `no context "gone"`, "config", "use-context", "gone")
	if got := mustRun("config", "get-contexts", "-o", "name"); got != "demo\ndead\n" {
		t.Errorf("get-contexts -o name = %q", got)
	}
	mustRun("config", "delete-context", "dead")
	wantFail(1, "no current context", "config", "current-context")
	if out, _, _ := meshctlEnv(t, "__complete", "config", "use-context", ""); !strings.Contains(out, "demo") {
		t.Errorf("completion of use-context lacks demo:\n%s", out)
	}
}

// TestContextFile: a hand-written file's relative names are relative to
// it, and a bad file is a usage error that names the file and the field.
func TestContextFile(t *testing.T) {
	s := startRegistration(t)
	cfg := filepath.Join(s.pkiDir, "meshctl.yaml")
	t.Setenv(configEnv, cfg)
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("current-context: local\ncontexts:\n- name: local\n  addr: " + s.addr + "\n  ca-file: ca/root.crt\n  cert-file: meshctl.crt\n  key-file: meshctl.key\n")
	if out, errOut, code := meshctlEnv(t, "cluster", "list"); code != 0 {
		t.Fatalf("cluster list with relative names: exit %d\n%s%s", code, out, errOut)
	}
	for body, want := range map[string]string{
		"contexts:\n- name: a\n  adr: x:1\n":                         `unknown field "adr"`,
		"current-context: b\ncontexts:\n- name: a\n":                 `current-context "b" is not in contexts`,
		"contexts:\n- name: a\n- name: a\n":                          `contexts[1].name "a" is used twice`,
		"contexts:\n- name: a\n  cert-file: c.crt\n":                 "cert-file and key-file go together",
		"apiVersion: v2\ncontexts:\n- name: a\n":                     "apiVersion must be meshplane.dev/v1",
		"current-context: a\ncontexts:\n- name: a\n  addr: nohost\n": "--addr",
	} {
		write(body)
		_, errOut, code := meshctlEnv(t, "cluster", "list")
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("config %q: exit %d, want 2 with %q:\n%s", body, code, want, errOut)
		}
		if want != "--addr" && !strings.Contains(errOut, cfg) {
			t.Errorf("config %q: the error does not name the file:\n%s", body, errOut)
		}
	}
}
