package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// addIngestReplica starts a second ingest process, "ingest-2", on the fault
// plane's Redis and translation.
func (p *faultPlane) addIngestReplica() {
	p.t.Helper()
	rpc, err := harness.Listen()
	if err != nil {
		p.t.Fatal(err)
	}
	admin, err := harness.Listen()
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { rpc.Close(); admin.Close() })
	p.lns["ingest-2"] = [2]*net.TCPListener{rpc, admin}
	p.addrs["ingest-2"] = [2]string{rpc.Addr().String(), admin.Addr().String()}
	p.start("ingest-2")
}

// startAgentIngests starts the cluster's agent as startAgent does, but
// with a comma-separated list of ingest addresses.
func (p *faultPlane) startAgentIngests(c *kubetest.Cluster, token, ingestAddrs string) string {
	p.t.Helper()
	stateDir := filepath.Join(p.dir, "agent-"+c.Name)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		p.t.Fatal(err)
	}
	tokenFile := filepath.Join(stateDir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		p.t.Fatal(err)
	}
	admin, err := harness.Listen()
	if err != nil {
		p.t.Fatal(err)
	}
	defer admin.Close()
	proc, err := harness.Start(harness.Spec{
		Name: "agent-" + c.Name, Binary: harness.Binary(binDir, harness.CmdAgent), LogDir: filepath.Join(p.dir, "logs"),
		Args: []string{
			"--cluster", c.Name, "--kubeconfig", c.Kubeconfig(),
			"--registration-addr", p.addr("registration"), "--ingest-addr", ingestAddrs,
			"--distribution-addr", p.addr("distribution-1") + "," + p.addr("distribution-2"),
			"--relay-ca-file", p.pki.RootFile(), "--server-name", "localhost", "--trust-domain", p.pki.TrustDomain,
			"--token-file", tokenFile, "--state-dir", stateDir, "--admin-addr", "fd:3", "--debounce", "50ms",
			"--envoy-addr", "127.0.0.1:0",
		},
		Listeners: []*net.TCPListener{admin},
	})
	if err != nil {
		p.t.Fatal(err)
	}
	p.agents = append(p.agents, proc)
	return admin.Addr().String()
}

// An ingest replica killed while its agent is connected: the agent moves
// its push stream to the other replica, which serves the cluster from
// Redis; translation's input does not change, so nothing is re-applied;
// and new discoveries flow through the other replica.
func TestIngestReplicaKilled(t *testing.T) {
	harness.RequireE2E(t)
	ctx := t.Context()
	east := kubetest.Start(t, kubetest.Options{Name: "east"})
	redis := redistest.Start(t)
	dir := t.TempDir()
	p, tokens := startFaultPlane(t, dir, redis.Addr(), "east")
	p.addIngestReplica()
	if err := east.ApplyYAML(ctx, harness.Bookinfo(east.Name)); err != nil {
		t.Fatal(err)
	}
	agentAdmin := p.startAgentIngests(east, tokens["east"], p.addr("ingest")+","+p.addr("ingest-2"))
	for _, svc := range harness.BookinfoServices {
		waitDR(t, ctx, east, svc, p.running())
	}
	// The agent pushes to the first address.
	waitMetric(t, ctx, p.admin("ingest"), `meshplane_ingest_push_clients_connected{cluster="east"}`, "1", p.running())
	waitMetric(t, ctx, p.admin("distribution-1"), `meshplane_distribution_versions_behind{cluster="east"}`, "0", p.running())
	before := resourceVersions(t, ctx, east)
	applied, err := metric(ctx, agentAdmin, `meshplane_agent_objects_total{outcome="applied"}`)
	if err != nil || applied == "" {
		t.Fatalf("agent applied-objects counter: %q, %v", applied, err)
	}

	p.down("ingest", true)
	alive := p.running("ingest")
	waitMetric(t, ctx, p.admin("ingest-2"), `meshplane_ingest_push_clients_connected{cluster="east"}`, "1", alive)
	waitMetric(t, ctx, agentAdmin, `meshplane_agent_connected{stream="push"}`, "1", alive)
	// The resent snapshot has the stored version: nothing new to
	// translate, so nothing is applied again.
	if got, _ := metric(ctx, agentAdmin, `meshplane_agent_objects_total{outcome="applied"}`); got != applied {
		t.Errorf("objects applied went %s -> %s across the ingest failover, want nothing re-applied", applied, got)
	}
	sameVersions(t, "after the ingest failover", before, resourceVersions(t, ctx, east))

	// A change in the cluster flows through the other replica.
	if err := east.Clientset().CoreV1().Services(harness.BookinfoNamespace).Delete(ctx, "ratings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = harness.Wait(ctx, 60*time.Second, "ratings DestinationRule to disappear through ingest-2", func(ctx context.Context) (bool, error) {
		_, err := east.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).Get(ctx, "ratings", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	}, alive...)
	if err != nil {
		t.Fatal(err)
	}
}
