package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// AgentGroupOptions configure StartAgentGroup.
type AgentGroupOptions struct {
	BinDir     string
	Cluster    string
	Token      string
	Kubeconfig string
	// Dir holds each replica's state directory and the logs.
	Dir string
	// Replicas is the group's size (default 3).
	Replicas int
	// Ingest and Distribution replace the plane's addresses (a proxy,
	// several comma-separated).
	Ingest, Distribution string
	// Args are added to every replica's flags.
	Args []string
}

// AgentReplica is one agent process of a Raft group.
type AgentReplica struct {
	Name  string
	Admin string
	Proc  *Process
}

// RaftState is the part of an agent's /debug/raft that tests read.
type RaftState struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Leader string `json:"leader"`
	Term   uint64 `json:"term"`
}

// Raft reads the replica's /debug/raft.
func (r *AgentReplica) Raft(ctx context.Context) (RaftState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Admin+"/debug/raft", nil)
	if err != nil {
		return RaftState{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return RaftState{}, err
	}
	defer resp.Body.Close()
	var st RaftState
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// AgentGroup is a cluster's agent replicas, one Raft group.
type AgentGroup struct {
	Cluster  string
	Replicas []*AgentReplica
}

// Procs returns the replicas' processes.
func (g *AgentGroup) Procs() []*Process {
	out := make([]*Process, len(g.Replicas))
	for i, r := range g.Replicas {
		out[i] = r.Proc
	}
	return out
}

// Stop stops every replica.
func (g *AgentGroup) Stop() {
	for _, r := range g.Replicas {
		r.Proc.Stop()
	}
}

// Leaders asks every live replica and returns those that say they lead,
// and the leader that all live replicas name ("" when they disagree or
// one does not answer).
func (g *AgentGroup) Leaders(ctx context.Context) (lead []*AgentReplica, agreed string) {
	names := map[string]bool{}
	for _, r := range g.Replicas {
		if r.Proc.Exited() {
			continue
		}
		st, err := r.Raft(ctx)
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

// StartAgentGroup starts o.Replicas agent processes of one cluster as a
// Raft group (replicas <cluster>-0, -1, ...) against the plane. Each may
// register with the token when it first leads; the group bootstraps once
// all are up.
func (p *Plane) StartAgentGroup(o AgentGroupOptions) (*AgentGroup, error) {
	n := o.Replicas
	if n == 0 {
		n = 3
	}
	ingest, dist := o.Ingest, o.Distribution
	if ingest == "" {
		ingest = p.Ingest
	}
	if dist == "" {
		dist = p.Distribution
	}
	// The Raft and admin ports are opened here and handed to the agents.
	var raftLns, adminLns []*net.TCPListener
	defer func() {
		for _, ln := range append(raftLns, adminLns...) {
			ln.Close()
		}
	}()
	var peers []string
	for i := range n {
		rl, err := Listen()
		if err != nil {
			return nil, err
		}
		raftLns = append(raftLns, rl)
		al, err := Listen()
		if err != nil {
			return nil, err
		}
		adminLns = append(adminLns, al)
		peers = append(peers, fmt.Sprintf("%s-%d=%s", o.Cluster, i, rl.Addr()))
	}
	g := &AgentGroup{Cluster: o.Cluster}
	for i := range n {
		name := fmt.Sprintf("%s-%d", o.Cluster, i)
		state := filepath.Join(o.Dir, "agent-"+name)
		if err := os.MkdirAll(state, 0o700); err != nil {
			g.Stop()
			return nil, err
		}
		tokenFile := filepath.Join(state, "token")
		if err := os.WriteFile(tokenFile, []byte(o.Token), 0o600); err != nil {
			g.Stop()
			return nil, err
		}
		proc, err := Start(Spec{
			Name: "agent-" + name, Binary: Binary(o.BinDir, CmdAgent), LogDir: filepath.Join(o.Dir, "logs"),
			Args: append([]string{
				"--cluster", o.Cluster, "--kubeconfig", o.Kubeconfig, "--replica", name,
				"--registration-addr", p.Registration, "--ingest-addr", ingest, "--distribution-addr", dist,
				"--relay-ca-file", p.PKI.RootFile(), "--server-name", "localhost", "--trust-domain", p.PKI.TrustDomain,
				"--token-file", tokenFile, "--state-dir", state, "--admin-addr", "fd:3", "--debounce", "50ms",
				// Several agents share this host: no fixed Envoy port.
				"--envoy-addr", "127.0.0.1:0",
				"--raft-bind-addr", "fd:4", "--raft-dir", filepath.Join(state, "raft"),
				"--raft-peers", strings.Join(peers, ","), "--raft-bootstrap-expect", fmt.Sprint(n), "--raft-peers-refresh", "500ms",
			}, o.Args...),
			Listeners: []*net.TCPListener{adminLns[i], raftLns[i]},
		})
		if err != nil {
			g.Stop()
			return nil, err
		}
		g.Replicas = append(g.Replicas, &AgentReplica{Name: name, Admin: adminLns[i].Addr().String(), Proc: proc})
	}
	return g, nil
}
