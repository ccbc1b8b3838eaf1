package harness

import (
	"crypto/rand"
	"encoding/hex"
	"net"
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tcpPair is an RPC and an admin listener for one process.
type tcpPair struct{ rpc, admin *net.TCPListener }

func newPair() (*tcpPair, error) {
	rpc, err := Listen()
	if err != nil {
		return nil, err
	}
	admin, err := Listen()
	if err != nil {
		rpc.Close()
		return nil, err
	}
	return &tcpPair{rpc: rpc, admin: admin}, nil
}

func (t *tcpPair) both() []*net.TCPListener { return []*net.TCPListener{t.rpc, t.admin} }

// close closes the parent's copies once the child holds the sockets.
func (t *tcpPair) close() {
	t.rpc.Close()
	t.admin.Close()
}
