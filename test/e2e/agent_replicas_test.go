package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/test/e2e/harness"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// replica is one agent process of a Raft group.
type replica struct {
	name  string
	admin string
	proc  *harness.Process
}

// raftState is the part of /debug/raft the test reads.
type raftState struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Leader string `json:"leader"`
	Term   uint64 `json:"term"`
}

func (r *replica) raft(ctx context.Context) (raftState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.admin+"/debug/raft", nil)
	if err != nil {
		return raftState{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return raftState{}, err
	}
	defer resp.Body.Close()
	var st raftState
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// leaders asks every live replica and returns the replicas that say they
// lead, and whether all live replicas name the same leader.
func leaders(ctx context.Context, rs []*replica) (lead []*replica, agreed string) {
	names := map[string]bool{}
	for _, r := range rs {
		if r.proc.Exited() {
			continue
		}
		st, err := r.raft(ctx)
		if err != nil {
			return nil, ""
		}
		if st.State == "Leader" {
			lead = append(lead, r)
		}
		names[st.Leader] = true
	}
	if len(names) == 1 {
		for n := range names {
			agreed = n
		}
	}
	return lead, agreed
}

// TestAgentReplicasFailOver runs three agent processes of one cluster as a
// Raft group against a real API server and a real management plane: one
// leader applies; when it is killed another takes over and the cluster
// converges on the next change.
func TestAgentReplicasFailOver(t *testing.T) {
	harness.RequireE2E(t)
	ctx := t.Context()
	dir := t.TempDir()
	east := kubetest.Start(t, kubetest.Options{Name: "east"})
	redis := redistest.Start(t)
	plane, tokens, err := harness.StartPlane(ctx, harness.PlaneOptions{BinDir: binDir, Dir: dir, RedisAddr: redis.Addr(), Clusters: []string{"east"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	if err := east.ApplyYAML(ctx, harness.Bookinfo("east")); err != nil {
		t.Fatal(err)
	}

	// The Raft and admin ports are opened here and handed to the agents.
	const n = 3
	var raftLns, adminLns []*net.TCPListener
	var peers []string
	for i := range n {
		rl, err := harness.Listen()
		if err != nil {
			t.Fatal(err)
		}
		al, err := harness.Listen()
		if err != nil {
			t.Fatal(err)
		}
		raftLns, adminLns = append(raftLns, rl), append(adminLns, al)
		peers = append(peers, fmt.Sprintf("east-%d=%s", i, rl.Addr()))
	}
	procs := append([]*harness.Process{}, plane.Procs...)
	var rs []*replica
	for i := range n {
		name := fmt.Sprintf("east-%d", i)
		state := filepath.Join(dir, "agent-"+name)
		if err := os.MkdirAll(state, 0o700); err != nil {
			t.Fatal(err)
		}
		tokenFile := filepath.Join(state, "token")
		// The harness's tokens are static ones: every replica may
		// register with it when it first leads.
		if err := os.WriteFile(tokenFile, []byte(tokens["east"]), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := harness.Start(harness.Spec{
			Name: "agent-" + name, Binary: harness.Binary(binDir, harness.CmdAgent), LogDir: filepath.Join(dir, "logs"),
			Args: []string{
				"--cluster", "east", "--kubeconfig", east.Kubeconfig(), "--replica", name,
				"--registration-addr", plane.Registration, "--ingest-addr", plane.Ingest, "--distribution-addr", plane.Distribution,
				"--relay-ca-file", plane.PKI.RootFile(), "--server-name", "localhost", "--trust-domain", plane.PKI.TrustDomain,
				"--token-file", tokenFile, "--state-dir", state, "--admin-addr", "fd:3", "--debounce", "50ms",
				"--envoy-addr", "127.0.0.1:0",
				"--raft-bind-addr", "fd:4", "--raft-dir", filepath.Join(state, "raft"),
				"--raft-peers", strings.Join(peers, ","), "--raft-bootstrap-expect", "3", "--raft-peers-refresh", "500ms",
			},
			Listeners: []*net.TCPListener{adminLns[i], raftLns[i]},
		})
		if err != nil {
			t.Fatal(err)
		}
		adminLns[i].Close()
		raftLns[i].Close()
		t.Cleanup(p.Stop)
		procs = append(procs, p)
		rs = append(rs, &replica{name: name, admin: adminLns[i].Addr().String(), proc: p})
	}

	// One leader, named by all; it applies.
	var first *replica
	err = harness.Wait(ctx, 60*time.Second, "one leader named by every replica", func(ctx context.Context) (bool, error) {
		lead, agreed := leaders(ctx, rs)
		if len(lead) == 1 && agreed == lead[0].name {
			first = lead[0]
			return true, nil
		}
		return false, nil
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range harness.BookinfoServices {
		waitDR(t, ctx, east, svc, procs)
	}

	// Kill the leader: another replica takes over and applies the next
	// change (a deleted Service loses its DestinationRule).
	first.proc.Kill()
	var live []*harness.Process
	for _, p := range procs {
		if p != first.proc {
			live = append(live, p)
		}
	}
	var second *replica
	err = harness.Wait(ctx, 60*time.Second, "a new leader named by the two others", func(ctx context.Context) (bool, error) {
		lead, agreed := leaders(ctx, rs)
		if len(lead) == 1 && lead[0] != first && agreed == lead[0].name {
			second = lead[0]
			return true, nil
		}
		return false, nil
	}, live...)
	if err != nil {
		t.Fatal(err)
	}
	if err := east.Clientset().CoreV1().Services(harness.BookinfoNamespace).Delete(ctx, "ratings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = harness.Wait(ctx, 90*time.Second, "the new leader deleting the ratings DestinationRule", func(ctx context.Context) (bool, error) {
		_, err := east.Dynamic().Resource(destinationRules).Namespace(harness.BookinfoNamespace).Get(ctx, "ratings", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}, live...)
	if err != nil {
		t.Fatal(err)
	}
	if lead, _ := leaders(ctx, rs); len(lead) != 1 || lead[0] != second {
		t.Fatalf("after the failover %d replicas lead, want only %s", len(lead), second.name)
	}
	logs := second.proc.LogTail(1 << 20)
	if !strings.Contains(logs, `"msg":"leading: starting the leader duties"`) {
		t.Errorf("%s did not log starting the leader duties", second.name)
	}
	// The first leader's credentials reached it through the Raft log: it
	// did not register again.
	if !strings.Contains(logs, `"msg":"using stored agent certificate"`) || strings.Contains(logs, `"msg":"registered"`) {
		t.Errorf("%s registered again instead of using the replicated credentials", second.name)
	}
}
