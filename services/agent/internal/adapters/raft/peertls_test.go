package raft

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/agent/internal/app"
)

const testTrustDomain = "meshplane.test"

// heldCredentials is a replica's credential store: what PeerTLS reads at
// each handshake, and where replicated credentials land.
type heldCredentials struct {
	mu sync.Mutex
	c  *app.Credentials
}

func (h *heldCredentials) get() (app.Credentials, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c == nil {
		return app.Credentials{}, app.ErrNoCredentials
	}
	return *h.c, nil
}

func (h *heldCredentials) SetCredentials(c app.Credentials) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.c = &c
	return nil
}

func (h *heldCredentials) has() bool {
	_, err := h.get()
	return err == nil
}

func agentCredentials(t testing.TB, ca *pki.CA, cluster string) app.Credentials {
	t.Helper()
	certPEM, keyPEM, err := ca.IssueKeyPair(pki.LeafOptions{ID: pki.ClusterID(testTrustDomain, cluster), TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return app.Credentials{CertPEM: certPEM, KeyPEM: keyPEM, BundlePEM: ca.TrustBundlePEM(), NotAfter: time.Now().Add(time.Hour)}
}

func peerTLS(cluster string, held *heldCredentials, key []byte) *PeerTLS {
	return &PeerTLS{Cluster: cluster, TrustDomain: testTrustDomain, Credentials: held.get, BootstrapKey: key}
}

// tlsGroup starts three replicas of cluster east on loopback, each with
// its own agent certificate, over mutual TLS.
func tlsGroup(t *testing.T, rec *recorder, ca *pki.CA) ([]*tcpMember, []*heldCredentials) {
	t.Helper()
	held := make([]*heldCredentials, 3)
	ms := tcpGroupWith(t, rec.tcpDuty, func(i int, m *tcpMember) {
		c := agentCredentials(t, ca, "east")
		held[i] = &heldCredentials{c: &c}
		m.tls = peerTLS("east", held[i], nil)
	})
	return ms, held
}

// The group forms, replicates and fails over with mutual TLS, and keeps
// doing so after every replica's certificate is renewed.
func TestRaftOverMutualTLS(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	ms, held := tlsGroup(t, rec, ca)
	waitRunning := func(not string) *tcpMember { return waitDuties(t, rec, ms, not) }
	leader := waitRunning("")
	if err := leader.node.Replicate(t.Context(), envoyConfig("tls-1")); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		eventually(t, 10*time.Second, m.id+" receiving tls-1", func() bool { return m.sink.latest().Version == "tls-1" })
	}

	// Every certificate is renewed (new keys); the leader dies, so that
	// the survivors connect anew with the renewed certificates.
	for _, h := range held {
		c := agentCredentials(t, ca, "east")
		if err := h.SetCredentials(c); err != nil {
			t.Fatal(err)
		}
	}
	leader.kill()
	next := waitRunning(leader.id)
	if err := next.node.Replicate(t.Context(), envoyConfig("tls-2")); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m == leader {
			continue
		}
		eventually(t, 10*time.Second, m.id+" receiving tls-2", func() bool { return m.sink.latest().Version == "tls-2" })
	}
	rec.checkNoOverlap(t)
}

// probeWith sends a membership probe over conf and reports what came back.
func probeWith(t *testing.T, addr string, conf *tls.Config) (PeerInfo, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var conn net.Conn
	var err error
	if conf == nil {
		conn, err = dialTCP(ctx, addr)
	} else {
		d := tls.Dialer{Config: conf}
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return PeerInfo{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte{probeByte}); err != nil {
		return PeerInfo{}, err
	}
	var info PeerInfo
	err = json.NewDecoder(bufio.NewReader(conn)).Decode(&info)
	return info, err
}

// presenting is a client configuration that presents cert (nil: none) for
// proto and accepts any server: what an intruder would use.
func presenting(proto string, cert *tls.Certificate) *tls.Config {
	conf := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, NextProtos: []string{proto}}
	if cert != nil {
		conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return conf
}

func keyPair(t *testing.T, c app.Credentials) *tls.Certificate {
	t.Helper()
	cert, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &cert
}

// The Raft port admits only this cluster's agents: not a plain
// connection, not TLS without a certificate, not another cluster's agent
// certificate from the same CA, not an east certificate from another CA,
// not a bootstrap certificate bound to another token.
func TestRaftPortRefusesStrangers(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := pki.NewCA("foreign")
	if err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{3}, 32)
	own := agentCredentials(t, ca, "east")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := peerTLS("east", &heldCredentials{c: &own}, key)
	var refused atomic.Int64
	server.Refused = func() { refused.Add(1) }
	n, err := New(Options{ID: "probed", Listener: ln, TLS: server})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	addr := ln.Addr().String()

	// The controls: a replica of east, with its certificate or with the
	// bootstrap token, is answered.
	mate := agentCredentials(t, ca, "east")
	for name, p := range map[string]*PeerTLS{
		"an east agent certificate": peerTLS("east", &heldCredentials{c: &mate}, nil),
		"east's bootstrap token":    peerTLS("east", &heldCredentials{}, key),
	} {
		info, err := TCPProber{TLS: p}.Probe(t.Context(), addr)
		if err != nil || info.ID != "probed" {
			t.Fatalf("a replica with %s was refused: %+v, %v", name, info, err)
		}
	}

	west := agentCredentials(t, ca, "west")
	eastForeign := agentCredentials(t, foreign, "east")
	wrongBoot, err := peerTLS("east", &heldCredentials{}, bytes.Repeat([]byte{4}, 32)).bootstrapCert()
	if err != nil {
		t.Fatal(err)
	}
	westBoot, err := peerTLS("west", &heldCredentials{}, key).bootstrapCert()
	if err != nil {
		t.Fatal(err)
	}
	strangers := map[string]*tls.Config{
		"a plain connection":                          nil,
		"TLS without a certificate":                   presenting(protoCluster, nil),
		"another cluster's agent certificate":         presenting(protoCluster, keyPair(t, west)),
		"an east certificate from another CA":         presenting(protoCluster, keyPair(t, eastForeign)),
		"a bootstrap certificate of another token":    presenting(protoBootstrap, wrongBoot),
		"a bootstrap certificate bound to west":       presenting(protoBootstrap, westBoot),
		"an agent certificate offered as a bootstrap": presenting(protoBootstrap, keyPair(t, mate)),
		"a protocol the port does not speak":          presenting("h2", keyPair(t, mate)),
	}
	for name, conf := range strangers {
		if info, err := probeWith(t, addr, conf); err == nil {
			t.Errorf("%s was answered: %+v", name, info)
		}
	}
	// Each was refused at the handshake, and counted
	// (meshplane_agent_raft_peers_refused_total).
	eventually(t, 5*time.Second, "every stranger counted as refused", func() bool { return refused.Load() >= int64(len(strangers)) })
	// The dialing side refuses a server that is not of its cluster.
	if _, err := (TCPProber{TLS: peerTLS("west", &heldCredentials{c: &west}, nil)}).Probe(t.Context(), addr); err == nil {
		t.Error("a west replica accepted an east server")
	}
}

// A replica without credentials joins with the bootstrap token, receives
// the credentials through Raft, and then authenticates with them.
func TestBootstrapReplicaJoinsAndGetsCredentials(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	key := bytes.Repeat([]byte{5}, 32)
	sealKey := bytes.Repeat([]byte{6}, 32)
	// Two replicas hold credentials; the third has only the token.
	held := make([]*heldCredentials, 3)
	ms := tcpGroupWith(t, rec.tcpDuty, func(i int, m *tcpMember) {
		held[i] = &heldCredentials{}
		if i < 2 {
			c := agentCredentials(t, ca, "east")
			held[i].c = &c
		}
		m.tls, m.creds, m.key = peerTLS("east", held[i], key), held[i], sealKey
	})
	newcomer := ms[2]
	c := agentCredentials(t, ca, "east")
	// The leader, whichever it is, replicates the credentials (a leader
	// without credentials registers first: a test stands in for
	// registration here).
	eventually(t, 20*time.Second, "a leader of all three replicating the credentials", func() bool {
		for i, m := range ms {
			st := m.node.Status()
			if st.State != "Leader" || len(st.Configuration) != 3 {
				continue
			}
			if !held[i].has() {
				_ = held[i].SetCredentials(agentCredentials(t, ca, "east"))
			}
			return m.node.ReplicateCredentials(t.Context(), c) == nil
		}
		return false
	})
	eventually(t, 10*time.Second, "the newcomer holding credentials", held[2].has)
	// It now speaks as an east agent: a replica without the bootstrap
	// token admits it.
	info, err := TCPProber{TLS: peerTLS("east", &heldCredentials{c: &c}, nil)}.Probe(t.Context(), newcomer.node.Address())
	if err != nil || info.ID != newcomer.id {
		t.Fatalf("probing the newcomer with the agent certificate alone: %+v, %v", info, err)
	}
}
