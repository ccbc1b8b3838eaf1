package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/render"
	translation "github.com/meshplane/meshplane/services/translation/service"
)

// translationServer is the translation service in process, over real TLS
// on loopback, translating the fixed inputs of testdata/describe, with the
// client flags meshctl needs.
type translationServer struct {
	flags []string
	ca    *platformtest.CA
	addr  string
}

func startTranslation(t *testing.T) *translationServer {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := translation.DefaultConfig()
	cfg.Debounce, cfg.SafeStartWindow = time.Millisecond, 0
	svc, err := translation.New(cfg, translation.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("translation Run: %v", err)
		}
	})
	ca := platformtest.NewCA(t, "test CA")
	so := platform.NewServerOptions()
	so.Addr, so.AdminAddr, so.TrustDomain = "127.0.0.1:0", "127.0.0.1:0", td
	so.TLS = ca.ServerTLS(t, platform.ClientAuthRequire)
	srv, err := platform.NewServer(so, log, platform.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	svc.Mount(srv)
	srv.SetReady(true)
	addr, _ := platformtest.Serve(t, srv)

	dir := t.TempDir()
	certFile, keyFile := platformtest.WriteKeyPair(t, dir, "meshctl", ca.ClientCert(t, "spiffe://"+td+"/service/meshctl"))
	s := &translationServer{ca: ca, addr: addr, flags: []string{"--addr", addr, "--ca-file", ca.WriteCAFile(t, dir), "--cert-file", certFile, "--key-file", keyFile}}

	data, err := os.ReadFile(filepath.Join("testdata", "describe", "input.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	in := &render.Inputs{}
	if err := render.Load("input.yaml", "", data, in); err != nil {
		t.Fatal(err)
	}
	for cluster, snap := range in.Snapshots {
		snapshots.SealInput(snap)
		e, err := snapshots.EncodeInput(snap)
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Notify(t.Context(), cluster, e.Version, e.Data); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until every cluster's output is published.
	o := ca.ClientOptions(t, addr, nil)
	o.CertificateSource, o.CAFile = nil, s.flags[3]
	o.CertFile, o.KeyFile = certFile, keyFile
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	tc := translationv1connect.NewTranslationServiceClient(hc, platform.BaseURL(o), platform.DefaultClientOptions(o)...)
	waitFor(t, "every cluster's output", func() bool {
		res, err := tc.GetStatus(t.Context(), connect.NewRequest(&translationv1.GetStatusRequest{}))
		if err != nil {
			t.Fatalf("GetStatus: %v", err)
		}
		for c := range in.Snapshots {
			if res.Msg.GetOutputVersions()[c] == "" {
				return false
			}
		}
		return true
	})
	return s
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	platformtest.Eventually(t, 20*time.Second, what, cond)
}

func (s *translationServer) meshctl(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return meshctlOffline(t, append(args, s.flags...)...)
}

// TestDescribeGolden describes destinations, policies, meshes and
// workloads of fixed inputs against a real translation server and compares
// the output with testdata/describe/*.txt|yaml.
func TestDescribeGolden(t *testing.T) {
	s := startTranslation(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		// Two TrafficPolicies and an AccessPolicy in acceptance order, one
		// TrafficPolicy rejected, a warning, and the objects in east.
		{"destination-reviews-east", []string{"destination", "reviews", "-n", "default", "--cluster", "east"}},
		// The same Service name in two clusters: both are described.
		{"destination-ratings", []string{"destination", "ratings"}},
		{"policy-reviews-timeout", []string{"policy", "reviews-timeout"}},
		{"policy-reviews-bad-mirror", []string{"policy", "reviews-bad-mirror", "-n", "default"}},
		{"policy-bad-operations", []string{"policy", "bad-operations", "--kind", "AccessPolicy"}},
		{"policy-global", []string{"policy", "global"}},
		{"mesh-east", []string{"mesh", "istiod-istio-system-east"}},
		{"workload-reviews-v1", []string{"workload", "reviews-v1", "--cluster", "east"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := s.meshctl(t, append([]string{"describe"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, "describe/"+tc.name+".txt", out)
		})
	}
	out, errOut, code := s.meshctl(t, "describe", "destination", "reviews", "--cluster", "east", "-o", "yaml")
	if code != 0 {
		t.Fatalf("-o yaml: exit %d: %s", code, errOut)
	}
	golden(t, "describe/destination-reviews-east.yaml", out)

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"describe", "destination", "nosuch"}, 1, "destination nosuch not found"},
		{[]string{"describe", "destination", "reviews-default-east"}, 1, "named by its Service"},
		{[]string{"describe", "gateway", "x"}, 2, `unknown kind "gateway"`},
		{[]string{"describe", "destination"}, 2, "want a kind"},
		{[]string{"describe", "mesh", "x", "--kind", "TrafficPolicy"}, 2, "--kind goes with describe policy"},
	} {
		_, errOut, code := s.meshctl(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("meshctl %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}

	// --cluster completes from the clusters translation has outputs for.
	out, _, code = meshctlOffline(t, append(append([]string{"__complete", "describe", "destination", "reviews"}, s.flags...), "--cluster", "")...)
	if code != 0 || !strings.Contains(out, "east\n") || !strings.Contains(out, "west\n") || !strings.Contains(out, "meshplane\n") {
		t.Errorf("completion of --cluster: exit %d:\n%s", code, out)
	}
	out, _, _ = meshctlOffline(t, append(append([]string{"__complete", "snapshot", "dump"}, s.flags...), "--cluster", "we")...)
	if !strings.Contains(out, "west\n") || strings.Contains(out, "east\n") {
		t.Errorf("completion of --cluster we:\n%s", out)
	}

	// A cluster's certificate is refused, with the hint.
	dir := t.TempDir()
	cert, key := platformtest.WriteKeyPair(t, dir, "east", s.ca.ClientCert(t, "spiffe://"+td+"/cluster/east"))
	_, errOut, code = meshctlOffline(t, "describe", "destination", "reviews", "--addr", s.addr, "--ca-file", s.flags[3], "--cert-file", cert, "--key-file", key)
	if code != 1 || !strings.Contains(errOut, "permission_denied") || !strings.Contains(errOut, "hint: use a management-plane service certificate") {
		t.Errorf("describe with a cluster certificate: exit %d, %q", code, errOut)
	}
}
