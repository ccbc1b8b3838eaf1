package platform

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Listen listens on addr: host:port, or fd:N for a listening socket the
// parent process passed as file descriptor N (socket activation). Passing
// the socket lets a supervisor or a test bind the port itself, so there is
// no window in which another process can take it.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	if fd, ok := inheritedFD(addr); ok {
		f := os.NewFile(uintptr(fd), addr)
		if f == nil {
			return nil, fmt.Errorf("%s is not an open file descriptor", addr)
		}
		defer f.Close()
		ln, err := net.FileListener(f)
		if err != nil {
			return nil, fmt.Errorf("use inherited socket %s: %w", addr, err)
		}
		return ln, nil
	}
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}

func inheritedFD(addr string) (int, bool) {
	rest, ok := strings.CutPrefix(addr, "fd:")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 3 {
		return 0, false
	}
	return n, true
}
