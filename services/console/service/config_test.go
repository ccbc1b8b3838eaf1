package service_test

import (
	"flag"
	"strings"
	"testing"

	"github.com/meshplane/meshplane/services/console/service"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of the error; none means valid
	}{
		{"valid", []string{"--tls-cert-file", "c", "--tls-key-file", "k", "--management-addr", "plane:9900"}, nil},
		{"plaintext on loopback", []string{"--insecure-plaintext", "--addr", "127.0.0.1:9443", "--management-addr", "plane:9900"}, nil},
		{"plaintext on every address", []string{"--insecure-plaintext", "--addr", ":9443", "--management-addr", "plane:9900"}, []string{"--insecure-plaintext needs a loopback --addr"}},
		{"no certificate", []string{"--management-addr", "plane:9900"}, []string{"--tls-cert-file and --tls-key-file are required"}},
		{"no plane", []string{"--tls-cert-file", "c", "--tls-key-file", "k", "--ingest-addr", "i:1"}, []string{"--translation-addr", "--distribution-addr", "--registration-addr"}},
		{"bad session", []string{"--tls-cert-file", "c", "--tls-key-file", "k", "--management-addr", "p:1", "--session-idle", "0s"}, []string{"--session-idle must be positive"}},
	} {
		cfg := service.DefaultConfig()
		fs := flag.NewFlagSet("console", flag.ContinueOnError)
		cfg.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := cfg.Validate()
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v, want it to say %q", tc.name, err, w)
			}
		}
		if err != nil && strings.Contains(err.Error(), "--ingest-addr is required") && tc.name == "no plane" {
			t.Errorf("%s: ingest's override was not counted", tc.name)
		}
	}
	// In the all-in-one the server flags are prefixed, and so are the
	// messages.
	cfg := service.DefaultConfig()
	fs := flag.NewFlagSet("meshplane", flag.ContinueOnError)
	cfg.AddServerFlags(fs, "console")
	_ = fs.Parse([]string{"--console-addr", "0.0.0.0:9443", "--console-insecure-plaintext"})
	cfg.ManagementAddr = "127.0.0.1:9900"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--console-insecure-plaintext needs a loopback --console-addr") {
		t.Errorf("prefixed: %v", err)
	}
}
