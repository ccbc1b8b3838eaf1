package service

import (
	"encoding/json"
	"flag"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"github.com/prometheus/client_golang/prometheus"
)

func TestConfigEnvoyFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"defaults", nil, ""},
		{"off", []string{"--envoy-addr", ""}, ""},
		{"bad address", []string{"--envoy-addr", "9977"}, "--envoy-addr"},
		{"cert without key", []string{"--envoy-tls-cert-file", "c.pem"}, "--envoy-tls-key-file"},
		{"empty queue", []string{"--accesslog-queue", "0"}, "--accesslog-queue"},
		{"no series", []string{"--envoy-metrics-max-series", "0"}, "--envoy-metrics-max-series"},
		{"no flush interval", []string{"--accesslog-flush-interval", "0s"}, "--accesslog-flush-interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			fs := flag.NewFlagSet("agent", flag.ContinueOnError)
			cfg.AddFlags(fs)
			args := append([]string{"--cluster", "east", "--relay-addr", "relay:9900", "--relay-ca-file", "ca.pem"}, tt.args...)
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			err := cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want an error about %s", err, tt.wantErr)
			}
		})
	}
}

func TestEnvoyServersDebugAccessLogs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cluster, cfg.Envoy.Addr = "east", ""
	a := &Agent{cfg: cfg, reg: prometheus.NewRegistry(), log: slog.New(slog.DiscardHandler)}
	s, err := a.newEnvoyServers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s.sink.SetEnvoyConfig(app.EnvoyConfig{Version: "v1", AccessLogPolicies: []*snapshotv1.AccessLogPolicyConfig{{Policy: &commonv1.ObjectRef{Namespace: "ops", Name: "all"}}}})
	s.accessLogs.Accept(domain.ProxyWorkload{Pod: "reviews-v1-abc", Namespace: "bookinfo"}, []*observabilityv1.AccessLogEntry{{Path: "/a", ResponseCode: 503}, {Path: "/b"}})

	rec := httptest.NewRecorder()
	s.debugHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/accesslogs?n=1", nil))
	var got []map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	if len(got) != 1 || got[0]["path"] != "/b" || got[0]["cluster"] != "east" {
		t.Errorf("debug = %v, want the last entry, /b of east", got)
	}
	rec = httptest.NewRecorder()
	s.debugHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/accesslogs?n=x", nil))
	if rec.Code != 400 {
		t.Errorf("bad n: status %d, want 400", rec.Code)
	}
}

func TestCertHolderWithoutCertificate(t *testing.T) {
	h := &certHolder{dir: t.TempDir()}
	if _, err := h.Certificate(); err == nil || !strings.Contains(err.Error(), "no agent certificate") {
		t.Errorf("Certificate = %v, want a no-certificate error", err)
	}
}
