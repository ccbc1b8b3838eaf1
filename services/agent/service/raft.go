package service

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/agent/internal/adapters/files"
	raftadapter "github.com/meshplane/meshplane/services/agent/internal/adapters/raft"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/prometheus/client_golang/prometheus"
)

// RaftConfig configures the replicas' Raft group. An empty BindAddr turns
// Raft off: the agent is a single replica that always leads.
type RaftConfig struct {
	BindAddr      string
	AdvertiseAddr string
	Dir           string
	// Peers is a static list, "id=host:port,..." or "host:port,...".
	Peers string
	// PeersDNS is a headless Service name, resolved every PeersRefresh.
	PeersDNS        string
	PeersRefresh    time.Duration
	BootstrapExpect int
	MemberTimeout   time.Duration
}

func defaultRaftConfig() RaftConfig {
	return RaftConfig{
		Dir:             "/var/run/meshplane/raft",
		PeersRefresh:    raftadapter.DefaultRefresh,
		BootstrapExpect: 1,
		MemberTimeout:   raftadapter.DefaultMemberTimeout,
	}
}

func (c *RaftConfig) addFlags(f *platform.Flags) {
	f.String(&c.BindAddr, "raft-bind-addr", "address (host:port) of the Raft port; empty: no Raft, this replica is the only one and leads")
	f.String(&c.AdvertiseAddr, "raft-advertise-addr", "address other replicas reach the Raft port at; default the bind address, with $POD_IP for an unspecified host")
	f.String(&c.Dir, "raft-dir", "directory of the Raft log, stable store and snapshots")
	f.String(&c.Peers, "raft-peers", "static Raft peers: id=host:port,... (or host:port,...)")
	f.String(&c.PeersDNS, "raft-peers-dns", "headless Service name whose SRV or A records (with the Raft port) list the peers")
	f.Duration(&c.PeersRefresh, "raft-peers-refresh", "how often the peers are resolved and probed")
	f.Int(&c.BootstrapExpect, "raft-bootstrap-expect", "replicas a new group waits to see before the lowest --replica bootstraps it; set it to the replica count")
	f.Duration(&c.MemberTimeout, "raft-member-timeout", "how long a member may be gone from discovery or unreachable before the leader removes it")
}

func (c *RaftConfig) validate() error {
	if c.BindAddr == "" {
		if c.Peers != "" || c.PeersDNS != "" {
			return errors.New("--raft-peers and --raft-peers-dns need --raft-bind-addr")
		}
		return nil
	}
	var errs []error
	if _, port, err := net.SplitHostPort(c.BindAddr); err != nil || port == "" {
		errs = append(errs, fmt.Errorf("--raft-bind-addr %q must be host:port", c.BindAddr))
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertiseAddr); err != nil {
			errs = append(errs, fmt.Errorf("--raft-advertise-addr %q must be host:port", c.AdvertiseAddr))
		}
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("--raft-dir must not be empty"))
	}
	if c.Peers != "" && c.PeersDNS != "" {
		errs = append(errs, errors.New("set --raft-peers or --raft-peers-dns, not both"))
	}
	if _, err := raftadapter.ParseStaticPeers(c.Peers); err != nil {
		errs = append(errs, fmt.Errorf("--raft-peers: %w", err))
	}
	if c.BootstrapExpect < 1 {
		errs = append(errs, errors.New("--raft-bootstrap-expect must be at least 1"))
	}
	if c.MemberTimeout <= 0 || c.PeersRefresh <= 0 {
		errs = append(errs, errors.New("--raft-member-timeout and --raft-peers-refresh must be positive"))
	}
	return errors.Join(errs...)
}

// advertise returns the address peers dial: the bind address, with
// $POD_IP for an unspecified host.
func (c *RaftConfig) advertise(ln net.Listener) (string, error) {
	if c.AdvertiseAddr != "" {
		return c.AdvertiseAddr, nil
	}
	host, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		podIP := os.Getenv("POD_IP")
		if podIP == "" {
			return "", errors.New("--raft-bind-addr has no host and $POD_IP is not set: set --raft-advertise-addr")
		}
		host = podIP
	}
	return net.JoinHostPort(host, port), nil
}

// WithRaftListener serves the Raft port on ln instead of
// cfg.Raft.BindAddr (tests). Raft must be on (--raft-bind-addr set).
func WithRaftListener(ln net.Listener) Option { return func(a *Agent) { a.raftLn = ln } }

// WithEnvoyConfigSink hands every replica's EnvoyConfig (from the Raft log,
// or from the applied snapshot with one replica) to s: the 9977 servers.
func WithEnvoyConfigSink(s app.EnvoyConfigSink) Option { return func(a *Agent) { a.envoySink = s } }

// logSink is the EnvoyConfigSink when none is plugged in: it logs.
type logSink struct{ log *slog.Logger }

func (s logSink) SetEnvoyConfig(c app.EnvoyConfig) {
	s.log.Info("envoy config received", "version", c.Version, "wasm_filters", len(c.WasmFilters), "access_log_policies", len(c.AccessLogPolicies))
}

// leadership is this replica's view of who leads, and how the EnvoyConfig
// reaches every replica.
type leadership struct {
	app.Leadership
	replicator app.EnvoyConfigReplicator
	// run runs the Raft node (or waits, with one replica).
	run        func(ctx context.Context) error
	status     func() raftadapter.Status
	startDelay time.Duration
	// fenceValid is how long a quorum's confirmation licenses writes
	// (app.WriteFence); 0: no fence (one replica).
	fenceValid time.Duration
	raft       bool
	// replicateCredentials hands the agent's credentials to every replica
	// (nil: not replicated).
	replicateCredentials func(ctx context.Context, c app.Credentials) error
}

// credentialsKey derives the key that seals the agent's credentials in the
// Raft log from the bootstrap token, which every replica mounts: without
// the token nothing in the log reveals the agent's private key.
func (a *Agent) credentialsKey() []byte { return a.tokenKey("meshplane agent raft credentials v1") }

// peerKey binds the bootstrap certificates of replicas that have no
// credentials yet to this cluster's bootstrap token (raftadapter.PeerTLS).
func (a *Agent) peerKey() []byte { return a.tokenKey("meshplane agent raft peer v1") }

// tokenKey derives a key for one purpose (label) from the bootstrap token:
// HMAC-SHA256 of the label under the token; nil without a token.
func (a *Agent) tokenKey(label string) []byte {
	tok, err := a.readToken()
	if err != nil || tok == "" {
		return nil
	}
	m := hmac.New(sha256.New, []byte(tok))
	m.Write([]byte(label))
	return m.Sum(nil)
}

// peerTLS is the Raft port's mutual TLS: the agent certificate of this
// cluster, read from the state directory at each handshake so that a
// renewal is used at once, or the bootstrap certificate before there is
// one.
func (a *Agent) peerTLS() *raftadapter.PeerTLS {
	store := files.Credentials{Dir: a.cfg.StateDir}
	p := &raftadapter.PeerTLS{
		Cluster: a.cfg.Cluster, TrustDomain: a.cfg.TrustDomain,
		Credentials:  func() (app.Credentials, error) { return store.Load(context.Background()) },
		BootstrapKey: a.peerKey(),
		Log:          a.log.With("part", "raft"),
	}
	refused := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "meshplane_agent_raft_peers_refused_total",
		Help: "Connections to the Raft port refused for want of a certificate of this cluster (or of its bootstrap token).",
	})
	if err := a.reg.Register(refused); err == nil {
		p.Refused = refused.Inc
	}
	if _, err := store.Load(context.Background()); err != nil && p.BootstrapKey == nil {
		a.log.Warn("this replica has neither agent credentials nor a bootstrap token: it cannot authenticate to its Raft peers until it registers")
	}
	return p
}

// credentialsSink keeps replicated credentials in this replica's state
// directory, unless what it holds lasts longer.
type credentialsSink struct{ store files.Credentials }

func (s credentialsSink) SetCredentials(c app.Credentials) error {
	ctx := context.Background()
	if cur, err := s.store.Load(ctx); err == nil && cur.NotAfter.After(c.NotAfter) {
		return nil
	}
	return s.store.Save(ctx, c)
}

// replicatingStore is the leader's credential store: what it saves (a
// registration or a renewal) also goes to the other replicas.
type replicatingStore struct {
	files.Credentials
	replicate func(ctx context.Context, c app.Credentials) error
	log       *slog.Logger
}

func (s replicatingStore) Save(ctx context.Context, c app.Credentials) error {
	if err := s.Credentials.Save(ctx, c); err != nil {
		return err
	}
	if s.replicate != nil {
		if err := s.replicate(ctx, c); err != nil {
			s.log.Warn("replicating the agent credentials failed; the next leader may register again", "error", err)
		}
	}
	return nil
}

func (a *Agent) newLeadership() (*leadership, error) {
	sink := a.envoySink
	if sink == nil {
		sink = logSink{a.log.With("sink", "envoy-config")}
	}
	rc := a.cfg.Raft
	if rc.BindAddr == "" {
		return &leadership{
			Leadership: app.AlwaysLeader{},
			replicator: app.LocalEnvoyConfig{Sink: sink},
			run:        func(ctx context.Context) error { <-ctx.Done(); return nil },
			status: func() raftadapter.Status {
				return raftadapter.Status{ID: a.cfg.Replica, State: "Leader", Leader: a.cfg.Replica, Configuration: []raftadapter.Server{{ID: a.cfg.Replica, Suffrage: "Voter"}}}
			},
		}, nil
	}
	ln := a.raftLn
	if ln == nil {
		var err error
		if ln, err = platform.Listen(context.Background(), rc.BindAddr); err != nil {
			return nil, fmt.Errorf("raft port: %w", err)
		}
	}
	adv, err := rc.advertise(ln)
	if err != nil {
		ln.Close()
		return nil, err
	}
	var disc raftadapter.Discovery
	switch {
	case rc.Peers != "":
		disc, _ = raftadapter.ParseStaticPeers(rc.Peers)
	case rc.PeersDNS != "":
		_, port, _ := net.SplitHostPort(adv)
		p, _ := strconv.Atoi(port)
		disc = raftadapter.DNSPeers{Name: rc.PeersDNS, Port: p}
	}
	timing := raftadapter.LANTiming()
	key := a.credentialsKey()
	var creds raftadapter.CredentialsSink
	if key != nil {
		creds = credentialsSink{files.Credentials{Dir: a.cfg.StateDir}}
	} else {
		a.log.Info("no bootstrap token: the agent credentials are not replicated; each replica registers when it first leads")
	}
	node, err := raftadapter.New(raftadapter.Options{
		ID: a.cfg.Replica, Dir: rc.Dir, Listener: ln, AdvertiseAddr: adv,
		Discovery: disc, BootstrapExpect: rc.BootstrapExpect, MemberTimeout: rc.MemberTimeout, Refresh: rc.PeersRefresh,
		Timing: timing, Sink: sink, Log: a.log.With("part", "raft"), LeaveOnShutdown: true,
		Credentials: creds, CredentialsKey: key, TLS: a.peerTLS(),
	})
	if err != nil {
		ln.Close()
		return nil, err
	}
	a.log.Info("raft started", "id", a.cfg.Replica, "address", adv, "dir", rc.Dir)
	l := &leadership{
		Leadership: node, replicator: node, run: node.Run, status: node.Status,
		// The old leader's lease: a leader cut off from its quorum has
		// stepped down, and stopped its duties, by then.
		startDelay: timing.LeaderLeaseTimeout,
		// A follower that answered the confirmation refuses to elect
		// another leader for its heartbeat timeout, and the new leader
		// then waits startDelay: half the heartbeat timeout leaves the
		// rest, and startDelay, for the write in flight.
		fenceValid: timing.HeartbeatTimeout / 2,
		raft:       true,
	}
	if key != nil {
		l.replicateCredentials = node.ReplicateCredentials
	}
	return l, nil
}

// memberReady reports whether a Raft replica is ready: it is a member of
// the configuration and knows the leader. A rollout then replaces the next
// replica only once the new one has joined.
func memberReady(st raftadapter.Status) bool {
	if st.Leader == "" {
		return false
	}
	for _, s := range st.Configuration {
		if s.ID == st.ID {
			return true
		}
	}
	return false
}

// followReadiness keeps /readyz in step with memberReady until ctx ends.
func followReadiness(ctx context.Context, admin *adminServer, status func() raftadapter.Status) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		admin.setReady(memberReady(status()))
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// raftCollector exports the node's state at each scrape.
type raftCollector struct {
	status                             func() raftadapter.Status
	leader, term, peers, changes, info *prometheus.Desc
}

func newRaftCollector(status func() raftadapter.Status) *raftCollector {
	return &raftCollector{
		status:  status,
		leader:  prometheus.NewDesc("meshplane_agent_raft_leader", "1 on the replica that leads (and runs the leader duties).", nil, nil),
		term:    prometheus.NewDesc("meshplane_agent_raft_term", "Current Raft term.", nil, nil),
		peers:   prometheus.NewDesc("meshplane_agent_raft_peers", "Servers in the Raft configuration, this one included.", nil, nil),
		changes: prometheus.NewDesc("meshplane_agent_raft_leader_changes_total", "Times this replica saw a new leader.", nil, nil),
		info:    prometheus.NewDesc("meshplane_agent_raft_leader_info", "1, labelled with the current leader's replica name (empty: none known).", []string{"leader"}, nil),
	}
}

func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leader, c.term, c.peers, c.changes, c.info} {
		ch <- d
	}
}

func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.status()
	leader := 0.0
	if st.State == "Leader" {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(c.term, prometheus.GaugeValue, float64(st.Term))
	ch <- prometheus.MustNewConstMetric(c.peers, prometheus.GaugeValue, float64(len(st.Configuration)))
	ch <- prometheus.MustNewConstMetric(c.changes, prometheus.CounterValue, float64(st.LeaderChanges))
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, st.Leader)
}

// raftHandler serves /debug/raft: state, term, leader, configuration and
// indexes, as JSON.
func raftHandler(status func() raftadapter.Status) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(status())
	}
}
