package platform_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/platform"
)

func TestServerOptionsFlagsAndEnv(t *testing.T) {
	t.Setenv("MESHPLANE_INGEST_ADDR", ":7000")
	t.Setenv("MESHPLANE_INGEST_SHUTDOWN_TIMEOUT", "3s")
	t.Setenv("MESHPLANE_INGEST_TLS_CLIENT_AUTH", "optional")
	t.Setenv("MESHPLANE_INGEST_MAX_RECV_BYTES", "1024")

	o := platform.NewServerOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs, "ingest")
	err := fs.Parse([]string{
		"--ingest-addr=:9902", // the command line beats the environment
		"--ingest-tls-cert-file=/c.pem", "--ingest-tls-key-file=/k.pem", "--ingest-tls-client-ca-file=/ca.pem",
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != ":9902" {
		t.Errorf("Addr = %q, want the flag's :9902", o.Addr)
	}
	if o.ShutdownTimeout != 3*time.Second || o.TLS.ClientAuth != platform.ClientAuthOptional || o.MaxRecvBytes != 1024 {
		t.Errorf("environment not applied: %+v", o)
	}
	if o.AdminAddr != platform.DefaultAdminAddr || o.TLS.MinVersion != platform.TLS13 {
		t.Errorf("defaults lost: %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}

	var usage bytes.Buffer
	fs.SetOutput(&usage)
	fs.PrintDefaults()
	for _, want := range []string{"-ingest-tls-client-auth", "$MESHPLANE_INGEST_TLS_CLIENT_AUTH", "$MESHPLANE_INGEST_ADDR"} {
		if !strings.Contains(usage.String(), want) {
			t.Errorf("usage lacks %s:\n%s", want, usage.String())
		}
	}
}

func TestBadEnvironmentFailsValidate(t *testing.T) {
	t.Setenv("MESHPLANE_READ_HEADER_TIMEOUT", "soon")
	t.Setenv("MESHPLANE_TLS_CLIENT_AUTH", "maybe")
	o := platform.NewServerOptions()
	o.AddFlags(flag.NewFlagSet("test", flag.ContinueOnError), "")
	o.TLS.Plaintext = true
	err := o.Validate()
	if err == nil {
		t.Fatal("Validate accepted unparseable environment values")
	}
	for _, want := range []string{"MESHPLANE_READ_HEADER_TIMEOUT", "MESHPLANE_TLS_CLIENT_AUTH", "maybe"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q should mention %s", err, want)
		}
	}
}

func TestBadFlagFailsParse(t *testing.T) {
	o := platform.NewServerOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs, "")
	if err := fs.Parse([]string{"--tls-client-auth=yes"}); err == nil {
		t.Fatal("Parse accepted an unknown client auth mode")
	}
	if err := fs.Parse([]string{"--tls-min-version=1.1"}); err == nil {
		t.Fatal("Parse accepted TLS 1.1")
	}
}

func TestServerOptionsValidate(t *testing.T) {
	tlsOK := platform.TLSOptions{CertFile: "c", KeyFile: "k", ClientCAFile: "ca", ClientAuth: platform.ClientAuthRequire, MinVersion: platform.TLS13}
	tests := []struct {
		name string
		edit func(*platform.ServerOptions)
		want []string // substrings of the error; none means valid
	}{
		{"valid mTLS", func(o *platform.ServerOptions) { o.TLS = tlsOK }, nil},
		{"valid plaintext", func(o *platform.ServerOptions) { o.TLS = platform.TLSOptions{Plaintext: true} }, nil},
		{"defaults need TLS files", nil, []string{"--tls-cert-file is required", "--tls-key-file is required", "--tls-client-ca-file is required when --tls-client-auth is require"}},
		{"plaintext with files", func(o *platform.ServerOptions) { o.TLS = tlsOK; o.TLS.Plaintext = true }, []string{"--plaintext cannot be combined"}},
		{"CA ignored", func(o *platform.ServerOptions) { o.TLS = tlsOK; o.TLS.ClientAuth = platform.ClientAuthNone }, []string{"client certificates would be ignored"}},
		{"unknown mode", func(o *platform.ServerOptions) { o.TLS = tlsOK; o.TLS.ClientAuth = "sometimes" }, []string{"unknown client auth mode"}},
		{"bad addr", func(o *platform.ServerOptions) { o.TLS = tlsOK; o.Addr = "9900" }, []string{"--addr", "not host:port"}},
		{"bad port", func(o *platform.ServerOptions) { o.TLS = tlsOK; o.Addr = ":http2" }, []string{"want a number"}},
		{"same ports", func(o *platform.ServerOptions) { o.TLS = tlsOK; o.AdminAddr = o.Addr }, []string{"must differ"}},
		{"admin off", func(o *platform.ServerOptions) { o.TLS = tlsOK; o.AdminAddr = "" }, nil},
		{"limits", func(o *platform.ServerOptions) {
			o.TLS = tlsOK
			o.ReadHeaderTimeout, o.ShutdownTimeout, o.MaxRecvBytes = 0, -time.Second, 0
		}, []string{"--read-header-timeout must be positive", "--shutdown-timeout must be positive", "--max-recv-bytes must be positive"}},
		{"trust domain", func(o *platform.ServerOptions) { o.TLS = tlsOK; o.TrustDomain = "Prod.Example" }, []string{"--trust-domain"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := platform.NewServerOptions()
			if tt.edit != nil {
				tt.edit(&o)
			}
			err := o.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %+v", o)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestValidateNamesPrefixedFlags(t *testing.T) {
	o := platform.NewServerOptions()
	o.AddFlags(flag.NewFlagSet("test", flag.ContinueOnError), "distribution")
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), "--distribution-tls-cert-file") {
		t.Fatalf("error %v should name the prefixed flag", err)
	}
}

func TestClientOptions(t *testing.T) {
	t.Setenv("MESHPLANE_INGEST_ADDR", "ingest.meshplane:9902")
	o := platform.NewClientOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs, "ingest")
	if err := fs.Parse([]string{"--ingest-timeout=5s"}); err != nil {
		t.Fatal(err)
	}
	if o.Addr != "ingest.meshplane:9902" || o.Timeout != 5*time.Second {
		t.Fatalf("options = %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if got := platform.BaseURL(o); got != "https://ingest.meshplane:9902" {
		t.Errorf("BaseURL = %s", got)
	}
	o.Plaintext = true
	if got := platform.BaseURL(o); got != "http://ingest.meshplane:9902" {
		t.Errorf("BaseURL plaintext = %s", got)
	}

	source := func() (*tls.Certificate, error) { return nil, nil }
	tests := []struct {
		name string
		o    platform.ClientOptions
		want string
	}{
		{"no addr", platform.ClientOptions{}, "--addr"},
		{"cert without key", platform.ClientOptions{Addr: "a:1", CertFile: "c"}, "--cert-file and --key-file go together"},
		{"two cert sources", platform.ClientOptions{Addr: "a:1", CertFile: "c", KeyFile: "k", CertificateSource: source}, "use one"},
		{"plaintext with TLS", platform.ClientOptions{Addr: "a:1", Plaintext: true, CAFile: "ca"}, "--plaintext cannot be combined"},
		{"negative timeout", platform.ClientOptions{Addr: "a:1", Timeout: -1}, "--timeout must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestLogOptions(t *testing.T) {
	t.Setenv("MESHPLANE_LOG_LEVEL", "debug")
	o := platform.NewLogOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs, "")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	o.NewLogger(&buf).Debug("hello", "k", "v")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("default format is not JSON: %q: %v", buf.String(), err)
	}
	if rec["msg"] != "hello" || rec["level"] != "DEBUG" {
		t.Errorf("record = %v", rec)
	}

	if err := fs.Parse([]string{"--log-format=text", "--log-level=warn"}); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	logger := o.NewLogger(&buf)
	logger.Info("dropped")
	logger.Warn("kept")
	if got := buf.String(); strings.Contains(got, "dropped") || !strings.HasPrefix(got, "time=") || !strings.Contains(got, "msg=kept") {
		t.Errorf("text logger wrote %q", got)
	}
	if !logger.Enabled(t.Context(), slog.LevelWarn) || logger.Enabled(t.Context(), slog.LevelInfo) {
		t.Error("level not applied")
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse([]string{"--log-format=xml"}); err == nil {
		t.Error("Parse accepted log format xml")
	}
}
