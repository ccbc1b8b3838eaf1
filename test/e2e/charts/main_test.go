package charts

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
)

var (
	chartsOnce sync.Once
	chartsTmp  string
	chartsErr  error

	clusterOnce sync.Once
	cluster     *kubetest.Cluster
	clusterErr  error
)

// extraCRDs are minimal CRDs for the kinds the charts render that the
// harness does not install (ServiceMonitor, cert-manager Certificate, Gateway
// API HTTPRoute).
//
//go:embed testdata/crds.yaml
var extraCRDs []byte

// apiServer starts one kube-apiserver for every test of the package.
func apiServer(t testing.TB) *kubetest.Cluster {
	t.Helper()
	if os.Getenv(kubetest.EnvSkip) == "1" {
		t.Skip(kubetest.EnvSkip + "=1")
	}
	clusterOnce.Do(func() {
		cluster, clusterErr = kubetest.StartCluster(context.Background(), kubetest.Options{Name: "charts", CRDs: [][]byte{extraCRDs}})
	})
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	return cluster
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cluster != nil {
		cluster.Stop()
	}
	if chartsTmp != "" {
		if err := os.RemoveAll(chartsTmp); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}
