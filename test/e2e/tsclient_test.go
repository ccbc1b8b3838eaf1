package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/test/e2e/harness"
)

// TestTypeScriptClient runs the buf-generated TypeScript client
// (clients/ts, @bufbuild/protoc-gen-es + Connect-ES) under Node against a
// running management plane: it creates a cluster over the Connect protocol
// and lists clusters over gRPC, both with mTLS and a service certificate.
func TestTypeScriptClient(t *testing.T) {
	harness.RequireE2E(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: run `make tools` (it installs nodejs and npm with apt when they are missing, then `npm ci` in clients/ts)")
	}
	tsDir := filepath.Join(harness.RepoRoot(), "clients", "ts")
	if _, err := os.Stat(filepath.Join(tsDir, "node_modules", "@connectrpc", "connect-node")); err != nil {
		t.Fatalf("clients/ts has no node_modules: run `make tools` (npm ci in clients/ts): %v", err)
	}

	dir := t.TempDir()
	plane, _, err := harness.StartPlane(t.Context(), harness.PlaneOptions{
		BinDir: binDir, Dir: dir, Clusters: []string{"east"}, AllInOne: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	cert, key, err := plane.PKI.ServiceCert("meshctl")
	if err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(tsDir, "examples", "clusters.mjs")}, args...)...)
		cmd.Dir = tsDir
		cmd.Env = append(os.Environ(),
			"MESHPLANE_ADDR="+plane.Registration, "MESHPLANE_CA_FILE="+plane.PKI.RootFile(),
			"MESHPLANE_CERT_FILE="+cert, "MESHPLANE_KEY_FILE="+key)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: []byte(stderr.String() + err.Error())}
		}
		return string(out), nil
	}

	// The plane may still be starting: retry until it answers.
	var out string
	if err := harness.Wait(t.Context(), 60*time.Second, "the TypeScript client's first call", func(context.Context) (bool, error) {
		out, err = run("ts-made")
		return err == nil, nil
	}, plane.Procs...); err != nil {
		t.Fatalf("%v; last error: %v", err, string(err.(*exec.ExitError).Stderr))
	}
	var got struct {
		Created struct {
			Cluster     string `json:"cluster"`
			TokenIssued bool   `json:"tokenIssued"`
		} `json:"created"`
		Clusters []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if got.Created.Cluster != "ts-made" || !got.Created.TokenIssued {
		t.Errorf("CreateCluster from TypeScript = %+v, want cluster ts-made with a token", got.Created)
	}
	found := false
	for _, c := range got.Clusters {
		if c.Name == "ts-made" {
			found = true
			if c.Status != "CLUSTER_STATUS_PENDING_APPROVAL" {
				t.Errorf("ts-made status = %q, want CLUSTER_STATUS_PENDING_APPROVAL (created with requireApproval)", c.Status)
			}
		}
	}
	if !found {
		t.Errorf("ListClusters over gRPC from TypeScript = %+v, want ts-made among them", got.Clusters)
	}
}
