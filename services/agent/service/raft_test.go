package service

import (
	"bytes"
	"encoding/json"
	"flag"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/agent/internal/adapters/files"
	raftadapter "github.com/meshplane/meshplane/services/agent/internal/adapters/raft"
	"github.com/meshplane/meshplane/services/agent/internal/app"
)

func TestConfigRaftFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no raft", nil, ""},
		{"static peers", []string{"--raft-bind-addr", ":7000", "--raft-peers", "agent-0=10.0.0.1:7000,agent-1=10.0.0.2:7000", "--replica", "agent-0"}, ""},
		{"dns peers", []string{"--raft-bind-addr", ":7000", "--raft-peers-dns", "agent-raft.meshplane.svc.cluster.local", "--raft-bootstrap-expect", "3", "--replica", "agent-0"}, ""},
		{"peers without raft", []string{"--raft-peers", "a=10.0.0.1:7000"}, "--raft-bind-addr"},
		{"both peer sources", []string{"--raft-bind-addr", ":7000", "--raft-peers", "a=10.0.0.1:7000", "--raft-peers-dns", "x", "--replica", "a"}, "not both"},
		{"bad static peer", []string{"--raft-bind-addr", ":7000", "--raft-peers", "a=10.0.0.1", "--replica", "a"}, "--raft-peers"},
		{"bad bind address", []string{"--raft-bind-addr", "7000", "--replica", "a"}, "--raft-bind-addr"},
		{"no replica name", []string{"--raft-bind-addr", ":7000", "--replica", ""}, "--replica"},
		{"no expectation", []string{"--raft-bind-addr", ":7000", "--replica", "a", "--raft-bootstrap-expect", "0"}, "--raft-bootstrap-expect"},
		{"no member timeout", []string{"--raft-bind-addr", ":7000", "--replica", "a", "--raft-member-timeout", "0s"}, "--raft-member-timeout"},
		{"empty dir", []string{"--raft-bind-addr", ":7000", "--replica", "a", "--raft-dir", ""}, "--raft-dir"},
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
				t.Fatalf("Validate = %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
}

// A single replica with Raft on (no peers) leads alone; its state shows in
// the metrics and /debug/raft.
func TestRaftLeadershipMetricsAndDebug(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Cluster, cfg.RelayAddr, cfg.RelayCAFile, cfg.Replica = "east", "relay:9900", "ca.pem", "agent-0"
	cfg.Raft.BindAddr, cfg.Raft.Dir = "127.0.0.1:0", t.TempDir()
	a, err := New(cfg, WithRaftListener(ln), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	lead, err := a.newLeadership()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- lead.run(t.Context()) }()
	select {
	case v := <-lead.LeaderCh():
		if !v {
			t.Fatal("LeaderCh sent false first")
		}
	case err := <-done:
		t.Fatalf("raft stopped: %v", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(newRaftCollector(lead.status))
	want := `
# HELP meshplane_agent_raft_leader 1 on the replica that leads (and runs the leader duties).
# TYPE meshplane_agent_raft_leader gauge
meshplane_agent_raft_leader 1
# HELP meshplane_agent_raft_leader_info 1, labelled with the current leader's replica name (empty: none known).
# TYPE meshplane_agent_raft_leader_info gauge
meshplane_agent_raft_leader_info{leader="agent-0"} 1
# HELP meshplane_agent_raft_peers Servers in the Raft configuration, this one included.
# TYPE meshplane_agent_raft_peers gauge
meshplane_agent_raft_peers 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "meshplane_agent_raft_leader", "meshplane_agent_raft_leader_info", "meshplane_agent_raft_peers"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(newRaftCollector(lead.status), "meshplane_agent_raft_term"); n != 1 {
		t.Fatalf("%d term series", n)
	}

	rec := httptest.NewRecorder()
	raftHandler(lead.status)(rec, httptest.NewRequest("GET", "/debug/raft", nil))
	var st raftadapter.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("/debug/raft: %v: %s", err, rec.Body.String())
	}
	if !memberReady(st) {
		t.Fatalf("the leader alone is not ready: %+v", st)
	}
	if memberReady(raftadapter.Status{ID: "agent-1", Leader: "agent-0", Configuration: st.Configuration}) {
		t.Fatal("a replica outside the configuration is ready")
	}
	if st.State != "Leader" || st.Leader != "agent-0" || st.Term == 0 || st.LastIndex == 0 || len(st.Configuration) != 1 || st.Configuration[0].Address != ln.Addr().String() {
		t.Fatalf("/debug/raft = %s", rec.Body.String())
	}
}

// Without Raft the replica always leads and serves the EnvoyConfig itself.
func TestSingleReplicaWithoutRaft(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cluster, cfg.RelayAddr, cfg.RelayCAFile, cfg.Replica = "east", "relay:9900", "ca.pem", "solo"
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lead, err := a.newLeadership()
	if err != nil {
		t.Fatal(err)
	}
	if !lead.IsLeader() || lead.raft || lead.status().Leader != "solo" {
		t.Fatalf("leadership %+v, status %+v", lead, lead.status())
	}
}

func TestCredentialsKeyAndSink(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("mpbt_one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Cluster, cfg.RelayAddr, cfg.RelayCAFile, cfg.TokenFile = "east", "relay:9900", "ca.pem", tokenFile
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k1 := a.credentialsKey()
	if len(k1) != 32 || bytes.Contains(k1, []byte("mpbt_one")) {
		t.Fatalf("key %x", k1)
	}
	os.WriteFile(tokenFile, []byte("mpbt_two"), 0o600)
	if bytes.Equal(a.credentialsKey(), k1) {
		t.Fatal("two tokens give one key")
	}
	a.cfg.TokenFile = ""
	if a.credentialsKey() != nil {
		t.Fatal("a key without a token")
	}

	// The sink keeps whichever certificate lasts longer.
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ttl time.Duration) app.Credentials {
		t.Helper()
		certPEM, keyPEM, err := ca.IssueKeyPair(pki.LeafOptions{ID: pki.ClusterID("meshplane.test", "east"), TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		certs, err := pki.ParseCertificates(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		return app.Credentials{CertPEM: certPEM, KeyPEM: keyPEM, BundlePEM: ca.TrustBundlePEM(), NotAfter: certs[0].NotAfter}
	}
	sink := credentialsSink{files.Credentials{Dir: filepath.Join(dir, "state")}}
	long, short := issue(2*time.Hour), issue(time.Hour)
	for _, c := range []app.Credentials{long, short} {
		if err := sink.SetCredentials(c); err != nil {
			t.Fatal(err)
		}
	}
	got, err := sink.store.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.CertPEM, long.CertPEM) {
		t.Fatal("an older certificate replaced a newer one")
	}
}
