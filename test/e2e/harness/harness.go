// Package harness runs Meshplane as separate OS processes against real
// components: real API servers (libs/kube/kubetest), a real redis-server
// (libs/redistest) and real certificates. The e2e tests and the demo share
// it.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Module paths of the commands the harness runs.
const (
	CmdRegistration = "github.com/meshplane/meshplane/services/registration/cmd/registration"
	CmdIngest       = "github.com/meshplane/meshplane/services/ingest/cmd/ingest"
	CmdTranslation  = "github.com/meshplane/meshplane/services/translation/cmd/translation"
	CmdDistribution = "github.com/meshplane/meshplane/services/distribution/cmd/distribution"
	CmdAgent        = "github.com/meshplane/meshplane/services/agent/cmd/agent"
	CmdMeshplane    = "github.com/meshplane/meshplane/cmd/meshplane"
	CmdMeshctl      = "github.com/meshplane/meshplane/cmd/meshctl"
	CmdConsole      = "github.com/meshplane/meshplane/services/console/cmd/console"
)

// AllCommands is every command the harness can run.
var AllCommands = []string{CmdRegistration, CmdIngest, CmdTranslation, CmdDistribution, CmdAgent, CmdMeshplane, CmdMeshctl, CmdConsole}

// ArtifactDir is where tests save what a person looks at after a run
// (the console's screenshots): $MESHPLANE_ARTIFACTS, or test/e2e/artifacts
// in the repository, which git ignores.
func ArtifactDir() string {
	if d := os.Getenv("MESHPLANE_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "test", "e2e", "artifacts")
}

// RepoRoot finds the repository root from this source file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Build compiles pkgs into dir with the workspace's go command, so that the
// processes run exactly the code under test.
func Build(ctx context.Context, dir string, pkgs ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Without symbol tables and DWARF the binaries are about a third
	// smaller: several test packages build a set each, in parallel, and
	// a CI machine's disk is finite. Stack traces keep their names (they
	// come from the pclntab, which stays).
	args := append([]string{"build", "-ldflags=-s -w", "-o", dir + "/"}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = RepoRoot()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out.String())
	}
	return nil
}

// Binary returns the path of a built command in dir.
func Binary(dir, pkg string) string { return filepath.Join(dir, filepath.Base(pkg)) }

// Listen returns a loopback listener on a free port. Processes inherit it
// (see Process), so that no port is ever chosen, closed and re-bound.
func Listen() (*net.TCPListener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return ln.(*net.TCPListener), nil
}

// Process is a child process with its output in a log file.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	mu      sync.Mutex
}

// Spec describes a process to start.
type Spec struct {
	Name   string
	Binary string
	Args   []string
	Env    []string
	LogDir string
	// Listeners are passed as file descriptors 3, 4, ... in order; refer to
	// them in Args as fd:3, fd:4, ...
	Listeners []*net.TCPListener
}

// Start starts a process.
func Start(spec Spec) (*Process, error) {
	if err := os.MkdirAll(spec.LogDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(spec.LogDir, spec.Name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(spec.Binary, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	for _, ln := range spec.Listeners {
		f, err := ln.File()
		if err != nil {
			return nil, fmt.Errorf("pass listener to %s: %w", spec.Name, err)
		}
		defer f.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	p := &Process{Name: spec.Name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits up to 10 s before SIGKILL.
func (p *Process) Stop() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.Kill()
	}
}

// Terminate sends SIGTERM and waits up to timeout for the process to exit
// on its own. If it does not, it is killed and Terminate says so: a
// process that needs killing would hold up a rolling update for its whole
// grace period.
func (p *Process) Terminate(timeout time.Duration) error {
	if p.Exited() {
		return nil
	}
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%s did not exit within %v of SIGTERM and was killed; its log ends with:\n%s", p.Name, time.Since(start).Round(time.Millisecond), p.LogTail(3000))
	}
}

// Kill ends the process at once, as a crash would.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Signal sends sig to the process, for example SIGSTOP and SIGCONT to
// freeze it for a while.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return fmt.Errorf("%s has exited", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

// LogTail returns the last n bytes of the process's log.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Wait waits for cond until the deadline, checking that none of procs has
// exited meanwhile.
func Wait(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error), procs ...*Process) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, 500*time.Millisecond) {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		last = err
		for _, p := range procs {
			if p.Exited() {
				return fmt.Errorf("waiting for %s: process %s exited:\n%s", what, p.Name, p.LogTail(3000))
			}
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("waiting for %s: %v", what, ctx.Err())
			if last != nil {
				msg += fmt.Sprintf(" (last error: %v)", last)
			}
			var tails []string
			for _, p := range procs {
				tails = append(tails, fmt.Sprintf("--- %s ---\n%s", p.Name, p.LogTail(2000)))
			}
			return errors.New(msg + "\n" + strings.Join(tails, "\n"))
		case <-time.After(delay):
		}
	}
}
