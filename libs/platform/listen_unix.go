//go:build unix

package platform

import (
	"fmt"
	"net"
	"syscall"
)

// ListenAddr is the address Listen(addr) listens on, without listening: addr
// itself, or for fd:N the address of the inherited socket (asked of the
// kernel, leaving the descriptor open for Listen). A component that dials
// its own process's server, as the all-in-one's console does, needs it.
func ListenAddr(addr string) (string, error) {
	fd, ok := inheritedFD(addr)
	if !ok {
		return addr, nil
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return "", fmt.Errorf("%s: %w", addr, err)
	}
	switch sa := sa.(type) {
	case *syscall.SockaddrInet4:
		return (&net.TCPAddr{IP: net.IP(sa.Addr[:]), Port: sa.Port}).String(), nil
	case *syscall.SockaddrInet6:
		return (&net.TCPAddr{IP: net.IP(sa.Addr[:]), Port: sa.Port}).String(), nil
	default:
		return "", fmt.Errorf("%s is not a TCP socket", addr)
	}
}
