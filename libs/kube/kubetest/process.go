package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is one child process (etcd or kube-apiserver) in its own process
// group, with stdout and stderr going to a log file.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid after done is closed
}

func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	fmt.Fprintf(logFile, "# %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// A safety net for when the test binary dies without running
		// Stop: the kernel kills the child with it.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, and SIGKILL after grace (at once
// when grace is 0).
func (p *process) stop(grace time.Duration) {
	if p == nil {
		return
	}
	pgid := p.cmd.Process.Pid
	if grace > 0 && !p.exited() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
		}
	}
	// Kill the whole group even when the leader has exited, in case it
	// left children behind; ESRCH is fine.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.done
}

// logTail returns about the last n lines of the process's log.
func (p *process) logTail(n int) string {
	return fileTail(p.logPath, n)
}

func fileTail(path string, n int) string {
	const maxBytes = 16 << 10
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(cannot stat %s: %v)", path, err)
	}
	off := st.Size() - maxBytes
	if off < 0 {
		off = 0
	}
	buf, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(buf, "\n"), []byte("\n"))
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // the first line is probably cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// errAddrInUse marks a start that failed because a port picked by freePort
// was taken in the meantime; the caller retries with new ports.
var errAddrInUse = errors.New("address already in use")

// exitError describes a process that exited before it was ready.
func (p *process) exitError() error {
	tail := p.logTail(40)
	err := fmt.Errorf("%s exited before it was ready (%v); log %s ends with:\n%s", p.name, p.waitErr, p.logPath, tail)
	if strings.Contains(tail, "address already in use") {
		return fmt.Errorf("%w: %w", errAddrInUse, err)
	}
	return err
}

// waitReady polls check until it returns nil, the process exits, or ctx is
// done. The poll interval starts small and backs off, so a fast start is
// noticed quickly.
func (p *process) waitReady(ctx context.Context, check func(context.Context) error) error {
	interval := 20 * time.Millisecond
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = check(cctx)
		cancel()
		if last == nil {
			return nil
		}
		t := time.NewTimer(interval)
		select {
		case <-p.done:
			t.Stop()
			return p.exitError()
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s not ready: %w (last check: %v); log %s ends with:\n%s",
				p.name, ctx.Err(), last, p.logPath, p.logTail(40))
		case <-t.C:
		}
		if interval < 250*time.Millisecond {
			interval = interval * 3 / 2
		}
	}
}

// freePorts asks the kernel for n distinct free loopback ports. Another
// process can take one before the child binds it; startEtcd and
// startAPIServer retry with new ports when that happens. In-process servers
// should pass their listener instead: only child processes need this.
func freePorts(n int) ([]int, error) {
	return pickPorts(n)
}

// pickPorts is replaced in tests to hand out a taken port.
var pickPorts = pickFreePorts

func pickFreePorts(n int) ([]int, error) {
	// Hold the listeners open until every port is chosen, so the ports are
	// distinct.
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
