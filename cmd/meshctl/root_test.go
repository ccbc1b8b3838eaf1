package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"
)

func meshctlOffline(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestExitCodesAndHints: usage errors exit 2 with a pointer to --help,
// unreachable servers exit 1 with a hint.
func TestExitCodesAndHints(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		code       int
		wantStdout string
		wantStderr []string
	}{
		{nil, 2, "", []string{"Usage:", "cluster"}},
		{[]string{"--help"}, 0, "Available Commands:", nil},
		{[]string{"frobnicate"}, 2, "", []string{`unknown command "frobnicate"`, "meshctl --help"}},
		{[]string{"cluster"}, 2, "", []string{"register"}},
		{[]string{"cluster", "list", "--frob"}, 2, "", []string{"unknown flag: --frob"}},
		{[]string{"cluster", "list", "-o", "wide"}, 2, "", []string{"-o must be table, yaml or json"}},
		{[]string{"cluster", "list", "--addr", "nope"}, 2, "", []string{"--addr", "hint:"}},
		{[]string{"cluster", "list", "extra"}, 2, "", []string{"unexpected argument"}},
		{[]string{"snapshot", "dump"}, 2, "", []string{"--cluster NAME"}},
		{[]string{"version"}, 0, "meshctl ", nil},
		// Nothing listens on port 1: the call fails with what to do.
		{[]string{"cluster", "list", "--addr", "127.0.0.1:1", "--plaintext"}, 1, "", []string{"cannot reach registration at 127.0.0.1:1", "hint: is the management plane running", "meshctl check"}},
	} {
		out, errOut, code := meshctlOffline(t, tc.args...)
		if code != tc.code {
			t.Errorf("meshctl %q: exit %d, want %d\nstdout: %s\nstderr: %s", tc.args, code, tc.code, out, errOut)
			continue
		}
		if !strings.Contains(out, tc.wantStdout) {
			t.Errorf("meshctl %q: stdout lacks %q:\n%s", tc.args, tc.wantStdout, out)
		}
		for _, w := range tc.wantStderr {
			if !strings.Contains(errOut, w) {
				t.Errorf("meshctl %q: stderr lacks %q:\n%s", tc.args, w, errOut)
			}
		}
	}
}

// TestCompletion: every shell gets a script, and the completion of
// commands, describe kinds and -o values comes from the command tree.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash":       "__start_meshctl",
		"zsh":        "#compdef meshctl",
		"fish":       "complete -c meshctl",
		"powershell": "Register-ArgumentCompleter",
	} {
		out, errOut, code := meshctlOffline(t, "completion", shell)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("completion %s: exit %d, stderr %s; script lacks %q", shell, code, errOut, want)
		}
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", ""}, []string{"check", "cluster", "config", "describe", "install", "render", "snapshot", "uninstall", "version"}},
		{[]string{"__complete", "config", ""}, []string{"current-context", "delete-context", "get-contexts", "set-context", "use-context"}},
		{[]string{"__complete", "cluster", ""}, []string{"approve", "deregister", "list", "register"}},
		{[]string{"__complete", "cluster", "list", "-o", ""}, []string{"table", "yaml", "json"}},
		{[]string{"__complete", "describe", ""}, []string{"destination", "policy", "mesh", "workload"}},
		{[]string{"__complete", "describe", "policy", "x", "--kind", ""}, []string{"TrafficPolicy", "AccessPolicy", "VirtualMesh"}},
	} {
		out, _, code := meshctlOffline(t, tc.args...)
		if code != 0 {
			t.Errorf("meshctl %q: exit %d", tc.args, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w+"\t") && !strings.Contains(out, w+"\n") {
				t.Errorf("meshctl %q lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
}

// TestHintStoreUnavailable: an Unavailable that the server sent (its store
// is down) does not ask whether the management plane runs; one the client
// made (nothing listens) does.
func TestHintStoreUnavailable(t *testing.T) {
	wire := connect.NewWireError(connect.CodeUnavailable, errors.New("list acks in redis: dial tcp 127.0.0.1:6379: connect: connection refused"))
	got := hintFor("distribution", "127.0.0.1:9900", wire)
	for _, want := range []string{"distribution at 127.0.0.1:9900 answered, but cannot reach Redis", "is Redis up"} {
		if !strings.Contains(got, want) {
			t.Errorf("hint for a server's Unavailable lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "is the management plane running") {
		t.Errorf("hint for a server's Unavailable asks whether the plane runs:\n%s", got)
	}
	local := connect.NewError(connect.CodeUnavailable, errors.New("dial tcp 127.0.0.1:9900: connect: connection refused"))
	if got := hintFor("distribution", "127.0.0.1:9900", local); !strings.Contains(got, "is the management plane running") {
		t.Errorf("hint for an unreachable plane:\n%s", got)
	}
}
