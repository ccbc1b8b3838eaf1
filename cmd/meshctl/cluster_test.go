package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	registration "github.com/meshplane/meshplane/services/registration/service"
)

const td = "test.local"

// server runs registration on real TLS on loopback and writes a pki-dir as
// 'meshplane all-in-one --dev-pki-dir' does, plus an agent's key pair.
type server struct {
	addr, pkiDir, rootFile string
	ca                     *pki.CA
}

// mountFunc adds another service to the server of startRegistration, as
// the all-in-one process does, and runs it until the test ends.
type mountFunc func(t *testing.T, srv *platform.Server, log *slog.Logger)

func startRegistration(t *testing.T, mounts ...mountFunc) *server {
	t.Helper()
	dir := t.TempDir()
	ca, _, err := pki.LoadOrCreateCA(filepath.Join(dir, "ca"), "test")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certPEM, keyPEM, err := ca.IssueKeyPair(pki.LeafOptions{ID: pki.ServiceID(td, "meshplane"), TTL: time.Hour, Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := write("server.crt", certPEM), write("server.key", keyPEM)
	ctlCert, ctlKey, err := ca.IssueKeyPair(pki.LeafOptions{ID: pki.ServiceID(td, "meshctl"), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	write("meshctl.crt", ctlCert)
	write("meshctl.key", ctlKey)

	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	cfg := registration.DefaultConfig()
	cfg.TrustDomain, cfg.CADir = td, filepath.Join(dir, "ca")
	rc := registration.NewRevocationChecker()
	svc, err := registration.New(cfg, registration.WithLogger(log), registration.WithRevocationChecker(rc))
	if err != nil {
		t.Fatal(err)
	}
	o := platform.NewServerOptions()
	o.Addr, o.AdminAddr, o.TrustDomain, o.Revocation = "127.0.0.1:0", "127.0.0.1:0", td, rc
	o.TLS = platform.TLSOptions{CertFile: certFile, KeyFile: keyFile, ClientCAFile: filepath.Join(dir, "ca", pki.RootCertFile), ClientAuth: platform.ClientAuthOptional}
	srv, err := platform.NewServer(o, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc.Mount(srv)
	for _, m := range mounts {
		m(t, srv, log)
	}
	srv.SetReady(true)
	addr, _ := platformtest.Serve(t, srv)
	return &server{addr: addr, pkiDir: dir, rootFile: filepath.Join(dir, "ca", pki.RootCertFile), ca: ca}
}

func (s *server) meshctl(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), append(args, "--addr", s.addr, "--pki-dir", s.pkiDir), &out, &errb)
	return out.String(), errb.String(), code
}

// registerAgent trades token for a certificate as the agent would.
func (s *server) registerAgent(t *testing.T, cluster, token string) error {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.NewCSR(key, pki.ClusterID(td, cluster))
	if err != nil {
		t.Fatal(err)
	}
	o := platform.NewClientOptions()
	o.Addr, o.CAFile = s.addr, s.rootFile
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	c := registrationv1connect.NewRegistrationServiceClient(hc, platform.BaseURL(o), platform.DefaultClientOptions(o)...)
	_, err = c.Register(context.Background(), connect.NewRequest(&registrationv1.RegisterRequest{Cluster: cluster, Token: token, CsrPem: csr, AgentVersion: "v9"}))
	return err
}

func TestClusterCommands(t *testing.T) {
	s := startRegistration(t)

	out, errOut, code := s.meshctl(t, "cluster", "register", "--cluster", "east")
	if code != 0 {
		t.Fatalf("register: exit %d: %s", code, errOut)
	}
	var token string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "mpbt_") {
			token = strings.TrimSpace(line)
		}
	}
	for _, want := range []string{"cluster east: APPROVED", "helm install meshplane-agent ./deploy/charts/agent", "bootstrapToken: \"" + token + "\"", "caBundle: |", "-----BEGIN CERTIFICATE-----", "relayAddr: \"" + s.addr + "\"", "<<'EOF'"} {
		if !strings.Contains(out, want) {
			t.Errorf("register output lacks %q:\n%s", want, out)
		}
	}
	if token == "" {
		t.Fatalf("register printed no token:\n%s", out)
	}
	helmTemplatePrinted(t, out)
	if err := s.registerAgent(t, "east", token); err != nil {
		t.Fatalf("agent Register with the printed token: %v", err)
	}
	if err := s.registerAgent(t, "east", token); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("second use of the token: %v, want Unauthenticated", err)
	}

	// Double opt-in: a pending cluster registers only after approve.
	out, errOut, code = s.meshctl(t, "cluster", "register", "--cluster", "west", "--require-approval", "-o", "json")
	if code != 0 {
		t.Fatalf("register west: exit %d: %s", code, errOut)
	}
	var reg struct {
		Token      string            `json:"token"`
		HelmValues map[string]string `json:"helmValues"`
		Cluster    struct {
			Status string `json:"status"`
		} `json:"cluster"`
	}
	if err := json.Unmarshal([]byte(out), &reg); err != nil {
		t.Fatalf("register -o json: %v\n%s", err, out)
	}
	if reg.Cluster.Status != "CLUSTER_STATUS_PENDING_APPROVAL" || reg.HelmValues["bootstrapToken"] != reg.Token || reg.HelmValues["cluster"] != "west" {
		t.Fatalf("register -o json = %s", out)
	}
	if err := s.registerAgent(t, "west", reg.Token); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("Register of a pending cluster: %v, want FailedPrecondition", err)
	}
	if out, errOut, code = s.meshctl(t, "cluster", "approve", "west"); code != 0 || !strings.Contains(out, "west: APPROVED") {
		t.Fatalf("approve: exit %d: %s %s", code, out, errOut)
	}
	if err := s.registerAgent(t, "west", reg.Token); err != nil {
		t.Fatalf("Register after approve: %v", err)
	}

	out, errOut, code = s.meshctl(t, "cluster", "list")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "CLUSTER") || !strings.Contains(out, "east") || !strings.Contains(out, "REGISTERED") || !strings.Contains(out, "v9") {
		t.Fatalf("list output:\n%s", out)
	}

	if out, errOut, code = s.meshctl(t, "cluster", "deregister", "--cluster", "east"); code != 0 || !strings.Contains(out, "1 certificate(s) revoked") {
		t.Fatalf("deregister: exit %d: %s %s", code, out, errOut)
	}
	out, _, code = s.meshctl(t, "cluster", "list", "-o", "json")
	var list []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
		t.Fatalf("list -o json: exit %d, %v:\n%s", code, err, out)
	}
	if len(list) != 2 || list[0].Name != "east" || list[0].Status != "CLUSTER_STATUS_DEREGISTERED" {
		t.Fatalf("list -o json = %+v", list)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cluster", "deregister", "nowhere"}, 1, "not found"},
		{[]string{"cluster", "register"}, 2, "--cluster"},
		{[]string{"cluster", "register", "--cluster", "Not_A_Label"}, 1, "invalid"},
		{[]string{"cluster", "list", "-o", "xml"}, 2, "table, yaml or json"},
		{[]string{"cluster", "frobnicate"}, 2, "unknown command"},
	} {
		_, errOut, code := s.meshctl(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("meshctl %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

// TestClusterCommandsRefuseAgentCertificate: an agent's certificate cannot
// administer clusters.
func TestClusterCommandsRefuseAgentCertificate(t *testing.T) {
	s := startRegistration(t)
	certPEM, keyPEM, err := s.ca.IssueKeyPair(pki.LeafOptions{ID: pki.ClusterID(td, "east"), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "agent.crt"), filepath.Join(dir, "agent.key")
	if err := os.WriteFile(cert, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"cluster", "list", "--addr", s.addr, "--ca-file", s.rootFile, "--cert-file", cert, "--key-file", key}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "permission_denied") {
		t.Fatalf("list with an agent certificate: exit %d, %q", code, errb.String())
	}
}

// helmTemplatePrinted runs the helm install line that register printed, as
// `helm template`, from the repository root as a user of a checkout would
// paste it: the chart exists and takes the printed values.
func helmTemplatePrinted(t *testing.T, out string) {
	t.Helper()
	i := strings.Index(out, "helm install ")
	j := strings.LastIndex(out, "\nEOF")
	if i < 0 || j < i {
		t.Fatalf("register printed no helm install heredoc:\n%s", out)
	}
	helm := filepath.Join(kubetest.ToolsDir(), "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("%v: run `make tools` (hack/tools.sh) to cache helm", err)
	}
	script := strings.Replace(out[i:j+len("\nEOF")], "helm install ", helm+" template ", 1) + "\n"
	home := t.TempDir()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	rendered, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the printed helm line, as helm template: %v\n%s\n%s", err, script, rendered)
	}
	for _, want := range []string{"kind: Deployment", "--cluster=east", "namespace: meshplane"} {
		if !strings.Contains(string(rendered), want) {
			t.Errorf("helm template of the printed line lacks %q:\n%.3000s", want, rendered)
		}
	}
}
