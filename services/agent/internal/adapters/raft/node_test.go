package raft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/app"
)

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	platformtest.Eventually(t, d, what, cond)
}

// recorder is a leader duty that records when it runs, per node.
type recorder struct {
	mu  sync.Mutex
	ivs []*interval
}

type interval struct {
	node       string
	start, end time.Time
}

func (r *recorder) duty(node string) app.Duty {
	return app.Duty{Name: "record", Run: func(ctx context.Context) error {
		r.mu.Lock()
		iv := &interval{node: node, start: time.Now()}
		r.ivs = append(r.ivs, iv)
		r.mu.Unlock()
		<-ctx.Done()
		r.mu.Lock()
		iv.end = time.Now()
		r.mu.Unlock()
		return nil
	}}
}

func (r *recorder) tcpDuty(m *tcpMember) app.Duty { return r.duty(m.id) }

// running lists the nodes whose duty runs now.
func (r *recorder) running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, iv := range r.ivs {
		if iv.end.IsZero() {
			out = append(out, iv.node)
		}
	}
	return out
}

func (r *recorder) starts(node string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, iv := range r.ivs {
		if iv.node == node {
			n++
		}
	}
	return n
}

// checkNoOverlap fails when two nodes ran the duties at the same time.
func (r *recorder) checkNoOverlap(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, a := range r.ivs {
		for _, b := range r.ivs[i+1:] {
			aEnd, bEnd := a.end, b.end
			if aEnd.IsZero() {
				aEnd = time.Now()
			}
			if bEnd.IsZero() {
				bEnd = time.Now()
			}
			if a.start.Before(bEnd) && b.start.Before(aEnd) {
				t.Fatalf("%s ran the duties %s-%s while %s ran them %s-%s", a.node, a.start.Format("15:04:05.000"), aEnd.Format("15:04:05.000"), b.node, b.start.Format("15:04:05.000"), bEnd.Format("15:04:05.000"))
			}
		}
	}
}

// sink records the EnvoyConfig versions a replica receives.
type sink struct {
	mu       sync.Mutex
	versions []string
	last     app.EnvoyConfig
}

func (s *sink) SetEnvoyConfig(c app.EnvoyConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions = append(s.versions, c.Version)
	s.last = c
}

func (s *sink) latest() app.EnvoyConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// member is one replica of a test group.
type member struct {
	id     string
	node   *Node
	trans  *hraft.InmemTransport
	sink   *sink
	key    []byte
	creds  *credSink
	cancel context.CancelFunc
	done   chan struct{}
}

// group is a set of in-process replicas on InmemTransport.
type group struct {
	t   *testing.T
	rec *recorder

	mu      sync.Mutex
	members map[string]*member // by address
	addrs   []string
	cut     map[string]bool // partitioned addresses
}

func newGroup(t *testing.T) *group {
	return &group{t: t, rec: &recorder{}, members: map[string]*member{}, cut: map[string]bool{}}
}

// prober probes in-process nodes, honouring partitions.
type prober struct {
	g    *group
	from string
}

func (p prober) Probe(_ context.Context, addr string) (PeerInfo, error) {
	p.g.mu.Lock()
	m, ok := p.g.members[addr]
	cut := p.g.cut[addr] || p.g.cut[p.from]
	var node *Node
	if ok {
		node = m.node
	}
	p.g.mu.Unlock()
	if !ok || cut || node == nil {
		return PeerInfo{}, errors.New("unreachable")
	}
	select {
	case <-m.done:
		return PeerInfo{}, errors.New("down")
	default:
	}
	return node.info(), nil
}

func (g *group) discovery() Discovery {
	return DiscoveryFunc(func(context.Context) ([]string, error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return slices.Clone(g.addrs), nil
	})
}

// add creates a replica's transport and lists its address; start runs it.
func (g *group) add(id string) *member {
	addr, trans := hraft.NewInmemTransport(hraft.ServerAddress(id + ".raft"))
	m := &member{id: id, trans: trans, sink: &sink{}, done: make(chan struct{})}
	g.mu.Lock()
	for a, o := range g.members {
		trans.Connect(hraft.ServerAddress(a), o.trans)
		o.trans.Connect(addr, trans)
	}
	g.members[string(addr)] = m
	g.addrs = append(g.addrs, string(addr))
	g.mu.Unlock()
	return m
}

func (g *group) start(m *member, expect int) {
	g.startWith(m, expect, 0)
}

func (g *group) startWith(m *member, expect int, memberTimeout time.Duration) {
	n, err := New(Options{
		ID: m.id, Transport: m.trans, Prober: prober{g: g, from: string(m.trans.LocalAddr())},
		Discovery: g.discovery(), BootstrapExpect: expect, Refresh: 50 * time.Millisecond,
		SnapshotThreshold: 4, Sink: m.sink, MemberTimeout: memberTimeout,
		Credentials: m.creds, CredentialsKey: m.key,
	})
	if err != nil {
		g.t.Fatal(err)
	}
	g.mu.Lock()
	m.node = n
	g.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	duties := app.NewDuties(n, app.DutiesOptions{StartDelay: LANTiming().LeaderLeaseTimeout}, g.rec.duty(m.id))
	var wg sync.WaitGroup
	wg.Go(func() { n.Run(ctx) })
	wg.Go(func() { duties.Run(ctx) })
	go func() { wg.Wait(); close(m.done) }()
	g.t.Cleanup(func() { m.kill() })
}

func (m *member) kill() {
	m.cancel()
	<-m.done
}

func (g *group) partition(m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cut[string(m.trans.LocalAddr())] = true
	m.trans.DisconnectAll()
	for _, o := range g.members {
		o.trans.Disconnect(m.trans.LocalAddr())
	}
}

func (g *group) heal(m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.cut, string(m.trans.LocalAddr()))
	for a, o := range g.members {
		if o != m {
			m.trans.Connect(hraft.ServerAddress(a), o.trans)
			o.trans.Connect(m.trans.LocalAddr(), m.trans)
		}
	}
}

// leaders lists the running members that Raft says lead.
func (g *group) leaders(among ...*member) []string {
	var out []string
	for _, m := range among {
		if m.node.raft.State() == hraft.Leader {
			out = append(out, m.id)
		}
	}
	return out
}

func (g *group) waitRunning(t *testing.T, not string) string {
	t.Helper()
	var who string
	eventually(t, 20*time.Second, "one replica running the duties", func() bool {
		r := g.rec.running()
		if len(r) == 1 && r[0] != not {
			who = r[0]
			return true
		}
		return false
	})
	return who
}

func byID(ms []*member, id string) *member {
	for _, m := range ms {
		if m.id == id {
			return m
		}
	}
	return nil
}

func envoyConfig(version string) app.EnvoyConfig {
	return app.EnvoyConfig{
		Version:     version,
		WasmFilters: []*snapshotv1.WasmFilterConfig{{Name: "filter-" + version}},
	}
}

func TestThreeReplicasLeadOneAtATime(t *testing.T) {
	g := newGroup(t)
	ms := []*member{g.add("agent-a"), g.add("agent-b"), g.add("agent-c")}
	for _, m := range ms {
		g.start(m, 3)
	}

	// Exactly one replica runs the duties.
	first := byID(ms, g.waitRunning(t, ""))
	if l := g.leaders(ms...); len(l) != 1 || l[0] != first.id {
		t.Fatalf("raft leaders %v, duties on %s", l, first.id)
	}

	// The leader's EnvoyConfig reaches every replica's sink.
	if err := first.node.Replicate(t.Context(), envoyConfig("v1")); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		eventually(t, 10*time.Second, m.id+" receiving v1", func() bool { return m.sink.latest().Version == "v1" })
		if got := m.sink.latest().WasmFilters; len(got) != 1 || got[0].GetName() != "filter-v1" {
			t.Fatalf("%s got wasm filters %v", m.id, got)
		}
	}
	// A follower cannot replicate.
	for _, m := range ms {
		if m != first {
			if err := m.node.Replicate(t.Context(), envoyConfig("v-follower")); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("Replicate on follower %s: %v, want ErrNotLeader", m.id, err)
			}
		}
	}

	// Partition the leader: it stops its duties before another starts them.
	g.partition(first)
	second := byID(ms, g.waitRunning(t, first.id))
	g.rec.checkNoOverlap(t)
	if first.node.IsLeader() {
		t.Fatalf("the partitioned %s still thinks it leads", first.id)
	}

	// Rejoin: still one leader, and the old one follows it.
	g.heal(first)
	eventually(t, 20*time.Second, "the healed replica following "+second.id, func() bool {
		st := first.node.Status()
		return st.State == "Follower" && st.Leader == second.id
	})
	if l := g.leaders(ms...); len(l) != 1 || l[0] != second.id {
		t.Fatalf("after healing, raft leaders %v, want [%s]", l, second.id)
	}
	if r := g.rec.running(); len(r) != 1 || r[0] != second.id {
		t.Fatalf("after healing, duties run on %v, want [%s]", r, second.id)
	}
	g.rec.checkNoOverlap(t)

	// Kill the leader: another takes over and runs the duties.
	before := g.rec.starts(first.id) + g.rec.starts(second.id)
	second.kill()
	third := byID(ms, g.waitRunning(t, second.id))
	if third == second {
		t.Fatal("the killed replica runs the duties")
	}
	if after := g.rec.starts(first.id) + g.rec.starts(second.id); third != first && after != before {
		t.Fatalf("duty starts on the others changed from %d to %d", before, after)
	}
	g.rec.checkNoOverlap(t)

	// A late joiner is added by the leader and gets the EnvoyConfig from
	// a snapshot or the log.
	for i := 2; i <= 8; i++ {
		if err := third.node.Replicate(t.Context(), envoyConfig(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := third.node.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	late := g.add("agent-d")
	g.start(late, 3)
	eventually(t, 20*time.Second, "the late joiner receiving v8", func() bool { return late.sink.latest().Version == "v8" })
	eventually(t, 10*time.Second, "the late joiner in the configuration", func() bool {
		for _, s := range third.node.Status().Configuration {
			if s.ID == late.id && s.Suffrage == "Voter" {
				return true
			}
		}
		return false
	})
	if r := g.rec.running(); len(r) != 1 || r[0] != third.id {
		t.Fatalf("after the late join, duties run on %v, want [%s]", r, third.id)
	}
}

func TestSingleReplicaLeadsAlone(t *testing.T) {
	g := newGroup(t)
	m := g.add("solo")
	n, err := New(Options{ID: m.id, Transport: m.trans, Sink: m.sink, Refresh: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m.node = n
	ctx, cancel := context.WithCancel(context.Background())
	duties := app.NewDuties(n, app.DutiesOptions{}, g.rec.duty(m.id))
	var wg sync.WaitGroup
	wg.Go(func() { n.Run(ctx) })
	wg.Go(func() { duties.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	g.waitRunning(t, "")
	if err := n.Replicate(t.Context(), envoyConfig("solo-1")); err != nil {
		t.Fatal(err)
	}
	if got := m.sink.latest().Version; got != "solo-1" {
		t.Fatalf("sink has %q, want solo-1", got)
	}
	st := n.Status()
	if st.Leader != "solo" || st.State != "Leader" || len(st.Configuration) != 1 || st.EnvoyConfigVersion != "solo-1" {
		t.Fatalf("status %+v", st)
	}
}

// tcpMember is a replica on a real TCP transport with BoltDB stores.
type tcpMember struct {
	id     string
	leave  bool
	tls    *PeerTLS
	creds  CredentialsSink
	key    []byte
	dir    string
	ln     net.Listener
	node   *Node
	sink   *sink
	cancel context.CancelFunc
	done   chan struct{}
}

func startTCP(t testing.TB, duty func(m *tcpMember) app.Duty, m *tcpMember, peers Discovery, expect int) {
	t.Helper()
	if m.ln == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		m.ln = ln
	}
	n, err := New(Options{ID: m.id, Dir: m.dir, Listener: m.ln, Discovery: peers, BootstrapExpect: expect, Refresh: 100 * time.Millisecond, Sink: m.sink, LeaveOnShutdown: m.leave, TLS: m.tls, Credentials: m.creds, CredentialsKey: m.key})
	if err != nil {
		t.Fatal(err)
	}
	m.node = n
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel, m.done = cancel, make(chan struct{})
	duties := app.NewDuties(n, app.DutiesOptions{StartDelay: LANTiming().LeaderLeaseTimeout}, duty(m))
	var wg sync.WaitGroup
	wg.Go(func() { n.Run(ctx) })
	wg.Go(func() { duties.Run(ctx) })
	go func() { wg.Wait(); close(m.done) }()
}

func (m *tcpMember) kill() {
	if m.cancel != nil {
		m.cancel()
		<-m.done
		m.cancel = nil
	}
}

// tcpGroup starts three replicas on loopback with real TCP, probing each
// other over the Raft port.
func tcpGroup(t testing.TB, duty func(m *tcpMember) app.Duty) []*tcpMember {
	return tcpGroupLeaving(t, duty, false)
}

func tcpGroupLeaving(t testing.TB, duty func(m *tcpMember) app.Duty, leave bool) []*tcpMember {
	return tcpGroupWith(t, duty, func(_ int, m *tcpMember) { m.leave = leave })
}

// tcpGroupWith is tcpGroup with each member set up by setup before it
// starts.
func tcpGroupWith(t testing.TB, duty func(m *tcpMember) app.Duty, setup func(i int, m *tcpMember)) []*tcpMember {
	t.Helper()
	var ms []*tcpMember
	var addrs StaticPeers
	for i, id := range []string{"agent-0", "agent-1", "agent-2"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		m := &tcpMember{id: id, dir: t.TempDir(), ln: ln, sink: &sink{}}
		setup(i, m)
		ms = append(ms, m)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, m := range ms {
		startTCP(t, duty, m, addrs, 3)
	}
	t.Cleanup(func() {
		for _, m := range ms {
			m.kill()
		}
	})
	return ms
}

// waitDuties waits until exactly one member, not the one named not, runs
// the duties, and returns it.
func waitDuties(t *testing.T, rec *recorder, ms []*tcpMember, not string) *tcpMember {
	t.Helper()
	var who string
	eventually(t, 20*time.Second, "one replica running the duties", func() bool {
		r := rec.running()
		if len(r) == 1 && r[0] != not {
			who = r[0]
			return true
		}
		return false
	})
	for _, m := range ms {
		if m.id == who {
			return m
		}
	}
	t.Fatalf("the duties run on %q, none of the members", who)
	return nil
}

func TestTCPReplicasFailOverAndRestartFromDisk(t *testing.T) {
	rec := &recorder{}
	ms := tcpGroup(t, rec.tcpDuty)
	waitRunning := func(not string) *tcpMember { return waitDuties(t, rec, ms, not) }
	leader := waitRunning("")
	if err := leader.node.Replicate(t.Context(), envoyConfig("tcp-1")); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		eventually(t, 10*time.Second, m.id+" receiving tcp-1", func() bool { return m.sink.latest().Version == "tcp-1" })
	}

	leader.kill()
	next := waitRunning(leader.id)
	rec.checkNoOverlap(t)
	if err := next.node.Replicate(t.Context(), envoyConfig("tcp-2")); err != nil {
		t.Fatal(err)
	}

	// The killed replica restarts from its BoltDB state on the same port:
	// it does not bootstrap again, follows the new leader and catches up.
	addr := leader.ln.Addr().String()
	// The old socket may take a moment to go; wait for the port, and fail
	// (not skip) if it never frees.
	var ln net.Listener
	var lnErr error
	eventually(t, 10*time.Second, "listening on "+addr+" again (last error: see below)", func() bool {
		ln, lnErr = net.Listen("tcp", addr)
		if lnErr != nil {
			t.Logf("listen on %s: %v", addr, lnErr)
		}
		return lnErr == nil
	})
	leader.ln, leader.sink = ln, &sink{}
	var peers StaticPeers
	for _, m := range ms {
		peers = append(peers, m.node.Address())
	}
	startTCP(t, rec.tcpDuty, leader, peers, 3)
	eventually(t, 20*time.Second, "the restarted replica catching up to tcp-2", func() bool { return leader.sink.latest().Version == "tcp-2" })
	if st := leader.node.Status(); st.Leader != next.id {
		t.Fatalf("the restarted replica follows %q, want %s", st.Leader, next.id)
	}
	if r := rec.running(); len(r) != 1 || r[0] != next.id {
		t.Fatalf("duties run on %v, want [%s]", r, next.id)
	}
}

func TestProbeOverRaftPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Options{ID: "probed", Listener: ln})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	info, err := TCPProber{}.Probe(t.Context(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != "probed" || info.Address != ln.Addr().String() || info.HasState {
		t.Fatalf("probe answered %+v", info)
	}
}

func TestParseStaticPeers(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "a=10.0.0.1:7000, b=10.0.0.2:7000", want: []string{"10.0.0.1:7000", "10.0.0.2:7000"}},
		{in: "agent-0.agent-raft:7000", want: []string{"agent-0.agent-raft:7000"}},
		{in: "", want: nil},
		{in: "=10.0.0.1:7000", wantErr: true},
		{in: "a=10.0.0.1", wantErr: true},
		{in: "a=:7000", wantErr: true},
		{in: "a=h:99999", wantErr: true},
	} {
		got, err := ParseStaticPeers(tc.in)
		if (err != nil) != tc.wantErr {
			t.Fatalf("ParseStaticPeers(%q) error %v, want error %v", tc.in, err, tc.wantErr)
		}
		if !tc.wantErr && !slices.Equal(got, tc.want) {
			t.Fatalf("ParseStaticPeers(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without an ID succeeded")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := New(Options{ID: "x", Listener: ln, AdvertiseAddr: "0.0.0.0:7000"}); err == nil {
		t.Fatal("New with an unspecified advertise address succeeded")
	}
}

func configIDs(n *Node) []string {
	var ids []string
	for _, s := range n.Status().Configuration {
		ids = append(ids, s.ID)
	}
	return ids
}

// Replicas that stop (a rollout) leave the group at once, the leader
// handing leadership over first, rather than stay dead members for the
// member timeout.
func TestGracefulStopLeavesTheGroup(t *testing.T) {
	rec := &recorder{}
	ms := tcpGroupLeaving(t, rec.tcpDuty, true)
	var leader *tcpMember
	eventually(t, 20*time.Second, "a leader running the duties", func() bool {
		r := rec.running()
		for _, m := range ms {
			if len(r) == 1 && m.id == r[0] {
				leader = m
			}
		}
		return leader != nil
	})
	var follower *tcpMember
	for _, m := range ms {
		if m != leader {
			follower = m
			break
		}
	}
	follower.kill()
	eventually(t, 10*time.Second, "the stopped follower gone from the configuration", func() bool {
		return !slices.Contains(configIDs(leader.node), follower.id) && len(configIDs(leader.node)) == 2
	})

	leader.kill()
	var last *tcpMember
	for _, m := range ms {
		if m != leader && m != follower {
			last = m
		}
	}
	eventually(t, 20*time.Second, "the last replica leading alone", func() bool {
		r := rec.running()
		return len(r) == 1 && r[0] == last.id && slices.Equal(configIDs(last.node), []string{last.id})
	})
	rec.checkNoOverlap(t)
}

func TestDNSPeersFallBackToAddressRecords(t *testing.T) {
	addrs, err := DNSPeers{Name: "localhost", Port: 7000}.Addresses(t.Context())
	if err != nil {
		t.Fatalf("localhost does not resolve: %v; this test needs a resolver that knows localhost (an /etc/hosts entry)", err)
	}
	if !slices.Contains(addrs, "127.0.0.1:7000") && !slices.Contains(addrs, "[::1]:7000") {
		t.Fatalf("addresses %v hold no loopback with port 7000", addrs)
	}
	if _, err := (DNSPeers{Name: "no-such-peers.invalid", Port: 7000}).Addresses(t.Context()); err == nil {
		t.Fatal("an unresolvable name gave no error")
	}
}

// The leader removes a member that stays unreachable for longer than the
// member timeout, and adds it back when it answers again.
func TestLeaderRemovesMembersGoneTooLong(t *testing.T) {
	g := newGroup(t)
	ms := []*member{g.add("agent-a"), g.add("agent-b"), g.add("agent-c")}
	for _, m := range ms {
		g.startWith(m, 3, 300*time.Millisecond)
	}
	leader := byID(ms, g.waitRunning(t, ""))
	var gone *member
	for _, m := range ms {
		if m != leader {
			gone = m
			break
		}
	}
	g.partition(gone)
	eventually(t, 20*time.Second, gone.id+" removed from the configuration", func() bool {
		ids := configIDs(leader.node)
		return len(ids) == 2 && !slices.Contains(ids, gone.id)
	})
	g.heal(gone)
	eventually(t, 20*time.Second, gone.id+" added back", func() bool {
		return slices.Contains(configIDs(leader.node), gone.id)
	})
	if r := g.rec.running(); len(r) != 1 {
		t.Fatalf("duties run on %v", r)
	}
	g.rec.checkNoOverlap(t)
}

// Nobody is removed while discovery itself fails.
func TestDiscoveryOutageRemovesNobody(t *testing.T) {
	g := newGroup(t)
	ms := []*member{g.add("agent-a"), g.add("agent-b"), g.add("agent-c")}
	var fail sync.Mutex
	failing := false
	disc := g.discovery()
	for _, m := range ms {
		n, err := New(Options{
			ID: m.id, Transport: m.trans, Prober: prober{g: g, from: string(m.trans.LocalAddr())},
			Discovery: DiscoveryFunc(func(ctx context.Context) ([]string, error) {
				fail.Lock()
				defer fail.Unlock()
				if failing {
					return nil, errors.New("dns down")
				}
				return disc.Addresses(ctx)
			}),
			BootstrapExpect: 3, Refresh: 50 * time.Millisecond, MemberTimeout: 100 * time.Millisecond, Sink: m.sink,
		})
		if err != nil {
			t.Fatal(err)
		}
		g.mu.Lock()
		m.node = n
		g.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { n.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	eventually(t, 20*time.Second, "a leader with three members", func() bool {
		for _, m := range ms {
			if m.node.IsLeader() && len(configIDs(m.node)) == 3 {
				return true
			}
		}
		return false
	})
	fail.Lock()
	failing = true
	fail.Unlock()
	// Many refresh rounds, each longer than the member timeout.
	var leader *member
	for _, m := range ms {
		if m.node.IsLeader() {
			leader = m
		}
	}
	// Membership must hold for the whole second: check it on every tick.
	window := time.NewTimer(time.Second)
	defer window.Stop()
	tick := time.NewTicker(platformtest.PollInterval)
	defer tick.Stop()
	for {
		if ids := configIDs(leader.node); len(ids) != 3 {
			t.Fatalf("members %v during a discovery outage", ids)
		}
		select {
		case <-tick.C:
			continue
		case <-window.C:
		}
		break
	}
}

// credSink records the credentials a replica receives.
type credSink struct {
	mu   sync.Mutex
	last app.Credentials
}

func (c *credSink) SetCredentials(cr app.Credentials) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = cr
	return nil
}

func (c *credSink) cert() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.last.CertPEM)
}

// The leader's credentials reach every replica that holds the same key,
// late joiners included, and never rest in the log in the clear.
func TestCredentialsReachEveryReplicaSealed(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	g := newGroup(t)
	ms := []*member{g.add("agent-a"), g.add("agent-b"), g.add("agent-c")}
	for _, m := range ms {
		m.key, m.creds = key, &credSink{}
	}
	// A replica with another key (another bootstrap token) cannot read them.
	stranger := ms[2]
	stranger.key = bytes.Repeat([]byte{9}, 32)
	for _, m := range ms {
		g.start(m, 3)
	}
	leader := byID(ms, g.waitRunning(t, ""))
	cred := app.Credentials{CertPEM: []byte("CERT-1"), KeyPEM: []byte("-----BEGIN EC PRIVATE KEY-----\nsecret\n"), BundlePEM: []byte("CA"), NotAfter: time.Now().Add(time.Hour).UTC()}
	if err := leader.node.ReplicateCredentials(t.Context(), cred); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m == stranger {
			continue
		}
		eventually(t, 10*time.Second, m.id+" receiving the credentials", func() bool { return m.creds.cert() == "CERT-1" })
		m.creds.mu.Lock()
		got := m.creds.last
		m.creds.mu.Unlock()
		if string(got.KeyPEM) != string(cred.KeyPEM) || !got.NotAfter.Equal(cred.NotAfter) {
			t.Fatalf("%s got %+v", m.id, got)
		}
	}
	// The stranger has applied the entry (its envoy config shows it is in
	// step) but its sink got nothing.
	if err := leader.node.Replicate(t.Context(), envoyConfig("after-creds")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the stranger in step", func() bool { return stranger.sink.latest().Version == "after-creds" })
	if c := stranger.creds.cert(); c != "" {
		t.Fatalf("a replica with another key got credentials %q", c)
	}
	leader.node.fsm.mu.Lock()
	raw := slices.Clone(leader.node.fsm.latest[entryCredentials])
	leader.node.fsm.mu.Unlock()
	if len(raw) == 0 || bytes.Contains(raw, []byte("PRIVATE KEY")) || bytes.Contains(raw, []byte("CERT-1")) {
		t.Fatalf("the credentials entry is not sealed: %q", raw)
	}

	// A late joiner gets them from a snapshot.
	if err := leader.node.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	late := g.add("agent-d")
	late.key, late.creds = key, &credSink{}
	g.start(late, 3)
	eventually(t, 20*time.Second, "the late joiner receiving the credentials", func() bool { return late.creds.cert() == "CERT-1" })
	if err := late.node.ReplicateCredentials(t.Context(), cred); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ReplicateCredentials on a follower: %v, want ErrNotLeader", err)
	}
}

func TestCredentialsSealing(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	c := app.Credentials{CertPEM: []byte("c"), KeyPEM: []byte("k"), BundlePEM: []byte("b")}
	sealed, err := encryptCredentials(key, c)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decryptCredentials(key, sealed); err != nil || string(got.KeyPEM) != "k" {
		t.Fatalf("decrypt: %+v, %v", got, err)
	}
	if _, err := decryptCredentials(bytes.Repeat([]byte{2}, 32), sealed); err == nil {
		t.Fatal("decrypted with another key")
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := decryptCredentials(key, sealed); err == nil {
		t.Fatal("decrypted a tampered entry")
	}
	if _, err := encryptCredentials([]byte("short"), c); err == nil {
		t.Fatal("sealed with a short key")
	}
}
