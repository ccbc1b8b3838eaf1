package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/test/e2e/harness"
)

// consoleViewer is the service account whose token signs the demo's user
// into the console: bound to the chart's viewer ClusterRole, so it sees
// every view.
const consoleViewer = "console-viewer"

// consoleSetup gives the management cluster the console's viewer
// ClusterRole (the chart's own file) and a service account bound to it,
// issues the console's certificate (server for the browser, client for
// the management services: spiffe://meshplane.local/service/console) from
// the demo's CA, which the plane then shares, and returns the all-in-one's
// console flags.
func consoleSetup(ctx context.Context, dir, addr string, mgmt *kubetest.Cluster) ([]string, error) {
	role, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "deploy", "charts", "console", "files", "viewer-clusterrole.yaml"))
	if err != nil {
		return nil, fmt.Errorf("the console's viewer ClusterRole: %w", err)
	}
	rbac := fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s, namespace: %[2]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: meshplane-console-viewer}
subjects:
- {kind: ServiceAccount, name: %[1]s, namespace: %[2]s}
---
`, consoleViewer, mirrorNamespace)
	if err := mgmt.ApplyYAML(ctx, append([]byte(rbac), role...)); err != nil {
		return nil, fmt.Errorf("apply the console's RBAC to mgmt: %w", err)
	}
	// The plane's PKI lives in dir/pki: made here first, then loaded by
	// the plane.
	p, err := harness.NewPKI(filepath.Join(dir, "pki"), "meshplane.local")
	if err != nil {
		return nil, err
	}
	cert, key, err := p.ServiceCert("console")
	if err != nil {
		return nil, err
	}
	return []string{
		"--console-addr", addr, "--console-tls-cert-file", cert, "--console-tls-key-file", key,
		"--console-upstream-cert-file", cert, "--console-upstream-key-file", key,
	}, nil
}

func printConsole(addr, caFile string) {
	fmt.Printf(`
The operator console (docs/console.md):

  https://%[1]s      (its certificate is signed by the demo's CA, %[2]s:
                     accept it in the browser, or import that file)
  sign in with the token this prints:
  kubectl --context mgmt -n %[3]s create token %[4]s
`, addr, caFile, mirrorNamespace, consoleViewer)
}
