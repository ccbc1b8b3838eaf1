package redistest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Ports are picked at random below the kernel's ephemeral range, so that
// neither outgoing connections nor other harnesses listening on port 0 take a
// server's port while it is stopped between Stop and Restart. Among users of
// this package (in any process) a port is reserved by an flock held for the
// life of the Server.
const (
	portRangeLow      = 20000
	minPortRangeWidth = 1000
)

// portLock is the reservation of one port; nil means none.
type portLock struct {
	file *os.File
}

func (l *portLock) release() {
	if l == nil || l.file == nil {
		return
	}
	unlockFile(l.file)
	_ = l.file.Close()
	l.file = nil
}

// reservePort returns a port that is free now on 127.0.0.1 and locked
// against other users of this package.
func reservePort() (int, *portLock, error) {
	low, high := candidateRange()
	var lastErr error
	for range 50 {
		var port int
		if high-low >= minPortRangeWidth {
			port = low + rand.IntN(high-low)
		} else {
			p, err := kernelPort()
			if err != nil {
				return 0, nil, err
			}
			port = p
		}
		lock, err := lockPort(port)
		if err != nil {
			lastErr = err
			continue
		}
		if lock == nil {
			continue // another Server holds it
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			lock.release()
			lastErr = err
			continue
		}
		_ = ln.Close()
		return port, lock, nil
	}
	if lastErr == nil {
		lastErr = errors.New("no free port found")
	}
	return 0, nil, fmt.Errorf("reserve port: %w", lastErr)
}

// candidateRange returns [low, high): from portRangeLow up to the start of
// the ephemeral port range.
func candidateRange() (int, int) {
	high := 32768 // Linux default start of ip_local_port_range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				high = n
			}
		}
	}
	return portRangeLow, high
}

// kernelPort asks the kernel for a free port.
func kernelPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// lockPort takes the cross-process reservation of port. It returns nil, nil
// when another holder has it.
func lockPort(port int) (*portLock, error) {
	dir := filepath.Join(os.TempDir(), "meshplane-redistest-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	ok, err := tryLockFile(f)
	if err != nil || !ok {
		_ = f.Close()
		return nil, err
	}
	return &portLock{file: f}, nil
}
