package raft

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"
)

// probeByte opens a membership probe on the Raft port, and leaveByte a
// request to leave the group. hashicorp/raft's own RPCs start with a type
// byte below 8, so they never mix.
const (
	probeByte = 'M'
	leaveByte = 'L'
)

// leaveRequest asks the leader to remove a server; leaveReply answers.
type leaveRequest struct {
	ID string `json:"id"`
}

type leaveReply struct {
	Error string `json:"error,omitempty"`
}

// dialFunc opens a connection to a peer's Raft port.
type dialFunc func(ctx context.Context, addr string) (net.Conn, error)

// dialTCP is the plain dialer, for tests of a port without TLS.
func dialTCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// askLeave asks the node at addr (the leader) to remove id.
func askLeave(ctx context.Context, dial dialFunc, addr, id string) error {
	conn, err := dial(ctx, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte{leaveByte}); err != nil {
		return err
	}
	if err := json.NewEncoder(conn).Encode(leaveRequest{ID: id}); err != nil {
		return err
	}
	var r leaveReply
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&r); err != nil {
		return fmt.Errorf("leave via %s: %w", addr, err)
	}
	if r.Error != "" {
		return fmt.Errorf("leave via %s: %s", addr, r.Error)
	}
	return nil
}

// PeerInfo is what a node says about itself when probed.
type PeerInfo struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	// HasState: the node holds Raft state (it bootstrapped, or a leader
	// has replicated to it). A node without state never bootstraps while
	// it can see one that has.
	HasState bool `json:"hasState"`
	// Leaving: the node is shutting down and must not be added back.
	Leaving bool `json:"leaving,omitempty"`
}

// Prober asks the node at addr who it is.
type Prober interface {
	Probe(ctx context.Context, addr string) (PeerInfo, error)
}

// TCPProber probes over the Raft port, with mutual TLS when TLS is set.
type TCPProber struct {
	TLS *PeerTLS
}

// Probe implements Prober.
func (p TCPProber) Probe(ctx context.Context, addr string) (PeerInfo, error) {
	dial := dialFunc(dialTCP)
	if p.TLS != nil {
		dial = p.TLS.dial
	}
	conn, err := dial(ctx, addr)
	if err != nil {
		return PeerInfo{}, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	} else {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
	}
	if _, err := conn.Write([]byte{probeByte}); err != nil {
		return PeerInfo{}, err
	}
	var info PeerInfo
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&info); err != nil {
		return PeerInfo{}, fmt.Errorf("probe %s: %w", addr, err)
	}
	if info.ID == "" {
		return PeerInfo{}, fmt.Errorf("probe %s: the node sent no ID", addr)
	}
	return info, nil
}

// streamLayer is a TCP StreamLayer for hashicorp/raft's NetworkTransport
// that also answers membership probes on the same port.
type streamLayer struct {
	ln   net.Listener
	dial dialFunc
	// refused is told of every failed TLS handshake (nil: plain TCP).
	refused   func(remote net.Addr, err error)
	advertise net.Addr
	info      func() PeerInfo
	leave     func(id string) error

	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

func newStreamLayer(ln net.Listener, dial dialFunc, refused func(net.Addr, error), advertise net.Addr, info func() PeerInfo, leave func(id string) error) *streamLayer {
	s := &streamLayer{ln: ln, dial: dial, refused: refused, advertise: advertise, info: info, leave: leave, conns: make(chan net.Conn), closed: make(chan struct{})}
	go s.acceptLoop()
	return s
}

func (s *streamLayer) acceptLoop() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.Close()
			return
		}
		go s.sniff(c)
	}
}

// sniff reads the first byte: a probe is answered here, anything else is
// handed to Raft with the byte put back.
func (s *streamLayer) sniff(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if tc, ok := c.(*tls.Conn); ok {
		if err := tc.Handshake(); err != nil {
			if s.refused != nil {
				s.refused(c.RemoteAddr(), err)
			}
			c.Close()
			return
		}
	}
	br := bufio.NewReader(c)
	b, err := br.Peek(1)
	if err != nil {
		c.Close()
		return
	}
	switch b[0] {
	case probeByte:
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		json.NewEncoder(c).Encode(s.info())
		c.Close()
		return
	case leaveByte:
		defer c.Close()
		br.Discard(1)
		var req leaveRequest
		if err := json.NewDecoder(br).Decode(&req); err != nil || req.ID == "" {
			return
		}
		c.SetWriteDeadline(time.Now().Add(15 * time.Second))
		var reply leaveReply
		if err := s.leave(req.ID); err != nil {
			reply.Error = err.Error()
		}
		json.NewEncoder(c).Encode(reply)
		return
	}
	c.SetReadDeadline(time.Time{})
	select {
	case s.conns <- &bufferedConn{Conn: c, r: br}:
	case <-s.closed:
		c.Close()
	}
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// Accept implements net.Listener.
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (s *streamLayer) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		err = s.ln.Close()
	})
	return err
}

// Addr implements net.Listener: the address peers dial.
func (s *streamLayer) Addr() net.Addr { return s.advertise }

// Dial implements hraft.StreamLayer.
func (s *streamLayer) Dial(address hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.dial(ctx, string(address))
}

var _ hraft.StreamLayer = (*streamLayer)(nil)
