// Package raft runs the agent replicas' Raft group (hashicorp/raft): it
// elects the leader that runs the once-per-cluster duties, keeps the
// membership in step with the replicas that exist, and replicates the
// EnvoyConfig that every replica serves.
package raft

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/meshplane/meshplane/services/agent/internal/app"
)

// Timing is the Raft clock. docs/design.md explains why LeaderLeaseTimeout
// is well below HeartbeatTimeout: a leader that loses its quorum steps down
// before any follower can even start an election.
type Timing struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
}

// LANTiming is the default: replicas of one cluster, a LAN apart.
func LANTiming() Timing {
	return Timing{
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond,
		CommitTimeout:      20 * time.Millisecond,
	}
}

// Defaults of Options.
const (
	DefaultMemberTimeout = 2 * time.Minute
	DefaultRefresh       = 5 * time.Second
	probeTimeout         = 2 * time.Second
	changeTimeout        = 10 * time.Second
)

// Options configures a Node.
type Options struct {
	// ID is this node's server ID: the pod name.
	ID string
	// Dir keeps the log, the stable store (BoltDB) and the snapshots.
	// Empty keeps everything in memory (tests).
	Dir string
	// Listener is the Raft port (TCP transport). AdvertiseAddr is the
	// address peers dial; empty uses the listener's.
	Listener      net.Listener
	AdvertiseAddr string
	// TLS makes the Raft port mutual TLS (see PeerTLS). The agent always
	// sets it; nil (tests of other behaviour) is plain TCP.
	TLS *PeerTLS
	// Transport replaces the TCP transport (tests: hraft.NewInmemTransport).
	// Its LocalAddr is the advertised address.
	Transport hraft.Transport
	// Prober asks peers who they are. Default: TCPProber.
	Prober Prober
	// Discovery lists the peers; nil means none (a single replica).
	Discovery Discovery
	// BootstrapExpect is how many nodes (this one included) a node
	// without state must see before the lowest ID bootstraps them. Default 1.
	BootstrapExpect int
	// MemberTimeout is how long a member may be missing from discovery or
	// unreachable before the leader removes it. Default 2m.
	MemberTimeout time.Duration
	// Refresh is how often discovery runs. Default 5s.
	Refresh time.Duration
	// Timing defaults to LANTiming.
	Timing Timing
	// SnapshotThreshold is how many entries make a snapshot. Default 64.
	SnapshotThreshold uint64
	// LeaveOnShutdown: when Run ends, a leader hands leadership over, and
	// the node asks the leader to remove it, so that a pod that goes away
	// for good (a rollout) is no dead member for MemberTimeout. TCP only.
	LeaveOnShutdown bool
	// Sink receives every committed EnvoyConfig.
	Sink app.EnvoyConfigSink
	// Credentials receives the agent's credentials that a leader
	// replicated (ReplicateCredentials), sealed with CredentialsKey (32
	// bytes). Both nil: credentials are not replicated.
	Credentials    CredentialsSink
	CredentialsKey []byte
	Log            *slog.Logger
}

// Node is one replica's Raft node.
type Node struct {
	o        Options
	raft     *hraft.Raft
	fsm      *fsm
	addr     string
	closers  []func() error
	notify   chan bool
	observed chan hraft.Observation
	observer *hraft.Observer
	log      *slog.Logger

	// started is set once raft is assigned: probes may arrive before.
	started   atomic.Bool
	leaving   atomic.Bool
	leader    atomic.Bool
	changes   atomic.Uint64
	leaderCh  chan bool
	publishMu sync.Mutex
	poke      chan struct{}
	done      chan struct{}
	stopOnce  sync.Once
	stopErr   error
}

var (
	_ app.Leadership            = (*Node)(nil)
	_ app.EnvoyConfigReplicator = (*Node)(nil)
)

// New starts a node. It does not bootstrap or join: Run does.
func New(o Options) (*Node, error) {
	if o.ID == "" {
		return nil, errors.New("raft: the node needs an ID (--replica-name)")
	}
	if o.Transport == nil && o.Listener == nil {
		return nil, errors.New("raft: neither a listener nor a transport")
	}
	o.BootstrapExpect = max(o.BootstrapExpect, 1)
	o.MemberTimeout = cmp.Or(o.MemberTimeout, DefaultMemberTimeout)
	o.Refresh = cmp.Or(o.Refresh, DefaultRefresh)
	if o.Timing == (Timing{}) {
		o.Timing = LANTiming()
	}
	o.SnapshotThreshold = cmp.Or(o.SnapshotThreshold, 64)
	if o.Prober == nil {
		o.Prober = TCPProber{TLS: o.TLS}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.TLS != nil && o.TLS.Log == nil {
		o.TLS.Log = o.Log
	}
	n := &Node{
		o: o, log: o.Log.With("raft_id", o.ID),
		notify: make(chan bool, 16), observed: make(chan hraft.Observation, 16),
		leaderCh: make(chan bool, 1), poke: make(chan struct{}, 1), done: make(chan struct{}),
	}
	n.fsm = &fsm{sink: o.Sink, creds: o.Credentials, key: o.CredentialsKey, log: n.log, latest: map[byte][]byte{}}
	if o.CredentialsKey != nil && len(o.CredentialsKey) != 32 {
		return nil, errors.New("raft: the credentials key must be 32 bytes")
	}
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: logWriter{n.log}, DisableTime: true})

	conf := hraft.DefaultConfig()
	conf.LocalID = hraft.ServerID(o.ID)
	conf.HeartbeatTimeout = o.Timing.HeartbeatTimeout
	conf.ElectionTimeout = o.Timing.ElectionTimeout
	conf.LeaderLeaseTimeout = o.Timing.LeaderLeaseTimeout
	conf.CommitTimeout = o.Timing.CommitTimeout
	conf.SnapshotThreshold = o.SnapshotThreshold
	conf.TrailingLogs = 2 * o.SnapshotThreshold
	conf.SnapshotInterval = 30 * time.Second
	// A removed replica that comes back is added again by the leader; it
	// must keep running to be.
	conf.ShutdownOnRemove = false
	conf.NotifyCh = n.notify
	conf.Logger = hlog
	if err := hraft.ValidateConfig(conf); err != nil {
		return nil, fmt.Errorf("raft config: %w", err)
	}

	var (
		logs   hraft.LogStore
		stable hraft.StableStore
		snaps  hraft.SnapshotStore
	)
	if o.Dir == "" {
		mem := hraft.NewInmemStore()
		logs, stable, snaps = mem, mem, hraft.NewInmemSnapshotStore()
	} else {
		if err := os.MkdirAll(o.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("raft dir: %w", err)
		}
		bolt, err := raftboltdb.NewBoltStore(filepath.Join(o.Dir, "raft.db"))
		if err != nil {
			return nil, fmt.Errorf("raft store in %s: %w", o.Dir, err)
		}
		n.closers = append(n.closers, bolt.Close)
		logs, stable = bolt, bolt
		fs, err := hraft.NewFileSnapshotStoreWithLogger(o.Dir, 2, hlog)
		if err != nil {
			n.close()
			return nil, fmt.Errorf("raft snapshots in %s: %w", o.Dir, err)
		}
		snaps = fs
	}

	trans := o.Transport
	if trans == nil {
		adv := o.AdvertiseAddr
		if adv == "" {
			adv = o.Listener.Addr().String()
		}
		advAddr, err := net.ResolveTCPAddr("tcp", adv)
		if err != nil {
			n.close()
			return nil, fmt.Errorf("raft advertise address %q: %w", adv, err)
		}
		if advAddr.IP == nil || advAddr.IP.IsUnspecified() {
			n.close()
			return nil, fmt.Errorf("raft advertise address %q is not one peers can dial: set --raft-advertise-addr", adv)
		}
		n.addr = advAddr.String()
		ln, dial := o.Listener, dialFunc(dialTCP)
		var refused func(net.Addr, error)
		if o.TLS != nil {
			ln, dial, refused = o.TLS.listen(ln), o.TLS.dial, o.TLS.refused
		}
		stream := newStreamLayer(ln, dial, refused, advAddr, n.info, n.removeOnRequest)
		nt := hraft.NewNetworkTransportWithConfig(&hraft.NetworkTransportConfig{Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog})
		n.closers = append(n.closers, nt.Close)
		trans = nt
	}
	if o.Transport != nil {
		n.addr = string(trans.LocalAddr())
	}

	r, err := hraft.NewRaft(conf, n.fsm, logs, stable, snaps, trans)
	if err != nil {
		n.close()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
	n.started.Store(true)
	n.observer = hraft.NewObserver(n.observed, false, func(o *hraft.Observation) bool {
		_, ok := o.Data.(hraft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(n.observer)
	go n.watch()
	return n, nil
}

// Address is the address peers reach this node at.
func (n *Node) Address() string { return n.addr }

// ID is this node's server ID.
func (n *Node) ID() string { return n.o.ID }

func (n *Node) info() PeerInfo {
	return PeerInfo{ID: n.o.ID, Address: n.addr, HasState: n.started.Load() && n.hasState(), Leaving: n.leaving.Load()}
}

func (n *Node) hasState() bool { return n.raft.LastIndex() > 0 }

// watch turns Raft's notifications into LeaderCh values, logs and counts.
func (n *Node) watch() {
	lastLeader := ""
	for {
		select {
		case <-n.done:
			return
		case v := <-n.notify:
			n.leader.Store(v)
			if v {
				n.log.Info("raft: this replica leads", "term", n.raft.CurrentTerm())
				select {
				case n.poke <- struct{}{}:
				default:
				}
			} else {
				n.log.Info("raft: this replica no longer leads", "term", n.raft.CurrentTerm())
			}
			n.publish(v)
		case o := <-n.observed:
			lo := o.Data.(hraft.LeaderObservation)
			id := string(lo.LeaderID)
			if id != lastLeader {
				if id != "" {
					n.changes.Add(1)
					n.log.Info("raft: leader changed", "leader", id, "leader_address", string(lo.LeaderAddr), "term", n.raft.CurrentTerm())
				} else {
					n.log.Info("raft: no leader", "previous", lastLeader)
				}
				lastLeader = id
			}
		}
	}
}

// publish puts v in LeaderCh, which holds only the latest value. It never
// blocks: watch and Shutdown both publish.
func (n *Node) publish(v bool) {
	n.publishMu.Lock()
	defer n.publishMu.Unlock()
	select {
	case <-n.leaderCh:
	default:
	}
	n.leaderCh <- v
}

// LeaderCh implements app.Leadership. It has one reader: the duty runner.
func (n *Node) LeaderCh() <-chan bool { return n.leaderCh }

// IsLeader implements app.Leadership.
func (n *Node) IsLeader() bool { return n.leader.Load() }

// VerifyLeader implements app.Leadership: a round trip to a quorum.
func (n *Node) VerifyLeader(ctx context.Context) error {
	return wait(ctx, n.raft.VerifyLeader())
}

// ErrNotLeader is returned by Replicate on a follower.
var ErrNotLeader = errors.New("raft: this replica does not lead")

// Replicate implements app.EnvoyConfigReplicator: it appends c to the log
// and returns once a quorum holds it; every replica's sink gets it when
// the entry commits there.
func (n *Node) Replicate(ctx context.Context, c app.EnvoyConfig) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if c.Version != "" && c.Version == n.fsm.Version() {
		return nil
	}
	data, err := encodeEnvoyConfig(c)
	if err != nil {
		return err
	}
	timeout := changeTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := wait(ctx, n.raft.Apply(data, timeout)); err != nil {
		return fmt.Errorf("replicate envoy config %s: %w", c.Version, err)
	}
	return nil
}

// ReplicateCredentials appends the agent's credentials to the log, sealed
// with the credentials key, so that any replica that comes to lead uses
// them rather than registering again. A follower returns ErrNotLeader.
func (n *Node) ReplicateCredentials(ctx context.Context, c app.Credentials) error {
	if n.o.CredentialsKey == nil {
		return errors.New("raft: no credentials key")
	}
	if !n.IsLeader() {
		return ErrNotLeader
	}
	data, err := encryptCredentials(n.o.CredentialsKey, c)
	if err != nil {
		return err
	}
	timeout := changeTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := wait(ctx, n.raft.Apply(data, timeout)); err != nil {
		return fmt.Errorf("replicate agent credentials: %w", err)
	}
	return nil
}

func wait(ctx context.Context, f hraft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// removeOnRequest serves a peer's request to leave.
func (n *Node) removeOnRequest(id string) error {
	if !n.started.Load() || !n.IsLeader() {
		return ErrNotLeader
	}
	if id == n.o.ID {
		return errors.New("the leader does not remove itself on request")
	}
	if err := n.raft.RemoveServer(hraft.ServerID(id), 0, changeTimeout).Error(); err != nil {
		return err
	}
	n.log.Info("raft: membership changed", "change", "left", "peer", id)
	return nil
}

// leave hands leadership over (when leading) and asks the leader to
// remove this node. It gives up after a few seconds: the leader removes a
// node that stays away anyway, after MemberTimeout.
func (n *Node) leave() {
	n.leaving.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n.IsLeader() {
		if err := wait(ctx, n.raft.LeadershipTransfer()); err != nil {
			n.log.Warn("raft: handing leadership over failed", "error", err)
		}
	}
	for ctx.Err() == nil {
		addr, id := n.raft.LeaderWithID()
		if addr != "" && string(id) != n.o.ID {
			dial := dialFunc(dialTCP)
			if n.o.TLS != nil {
				dial = n.o.TLS.dial
			}
			err := askLeave(ctx, dial, string(addr), n.o.ID)
			if err == nil {
				n.log.Info("raft: left the group", "leader", string(id))
				return
			}
			n.log.Debug("raft: leave not accepted yet", "leader", string(id), "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	n.log.Warn("raft: could not leave the group; the leader removes this replica after the member timeout")
}

// Run bootstraps (when the rule allows), then keeps the membership in step
// with discovery while this node leads, until ctx ends; then it leaves
// the group (LeaveOnShutdown) and shuts the node down.
func (n *Node) Run(ctx context.Context) error {
	defer n.Shutdown()
	defer func() {
		if n.o.LeaveOnShutdown && n.o.Transport == nil && n.hasState() {
			n.leave()
		}
	}()
	lastSeen := map[hraft.ServerID]time.Time{}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-n.done:
			return nil
		case <-t.C:
		case <-n.poke:
		}
		n.reconcile(ctx, lastSeen)
		t.Reset(n.o.Refresh)
	}
}

// seen lists the other nodes that discovery names and that answer a probe.
func (n *Node) seen(ctx context.Context) ([]PeerInfo, error) {
	if n.o.Discovery == nil {
		return nil, nil
	}
	addrs, err := n.o.Discovery.Addresses(ctx)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	byID := map[string]PeerInfo{}
	for _, a := range addrs {
		if a == n.addr {
			continue
		}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			info, err := n.o.Prober.Probe(pctx, a)
			if err != nil {
				n.log.Debug("raft: peer did not answer", "address", a, "error", err)
				return
			}
			if info.Leaving {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if info.ID == n.o.ID {
				return
			}
			if prev, ok := byID[info.ID]; !ok || prev.Address > info.Address {
				byID[info.ID] = info
			}
		})
	}
	wg.Wait()
	out := make([]PeerInfo, 0, len(byID))
	for _, p := range byID {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b PeerInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func (n *Node) reconcile(ctx context.Context, lastSeen map[hraft.ServerID]time.Time) {
	peers, err := n.seen(ctx)
	if err != nil {
		// Nobody is removed on a discovery outage.
		n.log.Warn("raft: peer discovery failed", "error", err)
		return
	}
	if !n.hasState() {
		n.maybeBootstrap(peers)
		return
	}
	if !n.IsLeader() {
		clear(lastSeen)
		return
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		n.log.Warn("raft: reading the configuration failed", "error", err)
		return
	}
	now := time.Now()
	byID := map[hraft.ServerID]PeerInfo{}
	for _, p := range peers {
		byID[hraft.ServerID(p.ID)] = p
	}
	members := map[hraft.ServerID]bool{}
	for _, s := range cf.Configuration().Servers {
		members[s.ID] = true
		if s.ID == hraft.ServerID(n.o.ID) {
			continue
		}
		if p, ok := byID[s.ID]; ok {
			lastSeen[s.ID] = now
			if hraft.ServerAddress(p.Address) != s.Address {
				n.changeMember("moved", p, n.raft.AddVoter(s.ID, hraft.ServerAddress(p.Address), 0, changeTimeout))
			}
			continue
		}
		first, ok := lastSeen[s.ID]
		if !ok {
			lastSeen[s.ID] = now
			continue
		}
		if now.Sub(first) > n.o.MemberTimeout {
			n.changeMember("removed", PeerInfo{ID: string(s.ID), Address: string(s.Address)}, n.raft.RemoveServer(s.ID, 0, changeTimeout))
			delete(lastSeen, s.ID)
		}
	}
	for id := range lastSeen {
		if !members[id] {
			delete(lastSeen, id)
		}
	}
	for _, p := range peers {
		if !members[hraft.ServerID(p.ID)] {
			n.changeMember("added", p, n.raft.AddVoter(hraft.ServerID(p.ID), hraft.ServerAddress(p.Address), 0, changeTimeout))
		}
	}
}

func (n *Node) changeMember(what string, p PeerInfo, f hraft.IndexFuture) {
	if err := f.Error(); err != nil {
		n.log.Warn("raft: membership change failed", "change", what, "peer", p.ID, "address", p.Address, "error", err)
		return
	}
	n.log.Info("raft: membership changed", "change", what, "peer", p.ID, "address", p.Address)
}

// maybeBootstrap applies the bootstrap rule (docs/design.md): a node
// without state bootstraps only when no node it sees has state, when it
// sees at least BootstrapExpect nodes (itself included), and when its ID
// is the lowest of them. The configuration is every node it sees.
func (n *Node) maybeBootstrap(peers []PeerInfo) {
	for _, p := range peers {
		if p.HasState {
			n.log.Debug("raft: waiting to be added by the existing group", "seen", p.ID)
			return
		}
	}
	if len(peers)+1 < n.o.BootstrapExpect {
		n.log.Info("raft: waiting for peers before bootstrapping", "seen", len(peers)+1, "expect", n.o.BootstrapExpect)
		return
	}
	servers := []hraft.Server{{ID: hraft.ServerID(n.o.ID), Address: hraft.ServerAddress(n.addr), Suffrage: hraft.Voter}}
	for _, p := range peers {
		if p.ID < n.o.ID {
			return // the lowest ID bootstraps
		}
		servers = append(servers, hraft.Server{ID: hraft.ServerID(p.ID), Address: hraft.ServerAddress(p.Address), Suffrage: hraft.Voter})
	}
	if err := n.raft.BootstrapCluster(hraft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, hraft.ErrCantBootstrap) {
		n.log.Warn("raft: bootstrap failed", "error", err)
		return
	}
	ids := make([]string, len(servers))
	for i, s := range servers {
		ids[i] = string(s.ID)
	}
	n.log.Info("raft: bootstrapped the group", "servers", strings.Join(ids, ","))
}

// Server is one member of the configuration.
type Server struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
}

// Status is the node as /debug/raft and the metrics show it.
type Status struct {
	ID                 string   `json:"id"`
	Address            string   `json:"address"`
	State              string   `json:"state"`
	Term               uint64   `json:"term"`
	Leader             string   `json:"leader"`
	LeaderAddress      string   `json:"leaderAddress"`
	LastIndex          uint64   `json:"lastIndex"`
	CommitIndex        uint64   `json:"commitIndex"`
	AppliedIndex       uint64   `json:"appliedIndex"`
	LastContact        string   `json:"lastContact,omitempty"`
	Configuration      []Server `json:"configuration"`
	LeaderChanges      uint64   `json:"leaderChanges"`
	EnvoyConfigVersion string   `json:"envoyConfigVersion"`
}

// Status reports the node's state.
func (n *Node) Status() Status {
	addr, id := n.raft.LeaderWithID()
	st := Status{
		ID: n.o.ID, Address: n.addr, State: n.raft.State().String(), Term: n.raft.CurrentTerm(),
		Leader: string(id), LeaderAddress: string(addr),
		LastIndex: n.raft.LastIndex(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.raft.AppliedIndex(),
		LeaderChanges: n.changes.Load(), EnvoyConfigVersion: n.fsm.Version(), Configuration: []Server{},
	}
	if lc := n.raft.LastContact(); !lc.IsZero() && !n.IsLeader() {
		st.LastContact = time.Since(lc).Round(time.Millisecond).String()
	}
	if cf := n.raft.GetConfiguration(); cf.Error() == nil {
		for _, s := range cf.Configuration().Servers {
			st.Configuration = append(st.Configuration, Server{ID: string(s.ID), Address: string(s.Address), Suffrage: s.Suffrage.String()})
		}
	}
	return st
}

// Shutdown stops the node: it leaves no goroutine behind and closes its
// stores. It is safe to call more than once.
func (n *Node) Shutdown() error {
	n.stopOnce.Do(func() {
		n.raft.DeregisterObserver(n.observer)
		// watch keeps draining NotifyCh, which Raft blocks on, until
		// Raft has stopped.
		n.stopErr = n.raft.Shutdown().Error()
		close(n.done)
		n.close()
		if n.leader.Swap(false) {
			n.publish(false)
		}
	})
	return n.stopErr
}

func (n *Node) close() {
	for _, c := range slices.Backward(n.closers) {
		c()
	}
}

// logWriter passes hashicorp/raft's own log lines (warnings and worse) to
// slog.
type logWriter struct{ log *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Warn("raft", "detail", strings.TrimSpace(string(p)))
	return len(p), nil
}
