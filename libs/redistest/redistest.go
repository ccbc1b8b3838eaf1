// Package redistest runs a real redis-server for tests and demos.
//
// Every Server is a child redis-server process listening on a free loopback
// port, with persistence turned off (--save "" --appendonly no) and its working
// directory and log file in a temporary directory. A Server can be stopped,
// killed (to simulate a crash) and restarted on the same port, so that clients
// holding its address reconnect; outage tests rely on that. Data does not
// survive a restart.
//
// In tests use Start, which registers cleanup and fails the test with
// installation help when redis-server is missing. Elsewhere (a demo program)
// use StartServer and Close.
//
// Environment:
//
//	MESHPLANE_REDIS_SERVER       path of the redis-server binary (default: PATH, then /usr/bin, /usr/local/bin)
//	MESHPLANE_SKIP_REDIS_TESTS=1 makes Start skip the test instead of starting a server
package redistest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Environment variables read by this package.
const (
	EnvServerBinary = "MESHPLANE_REDIS_SERVER"
	EnvSkipTests    = "MESHPLANE_SKIP_REDIS_TESTS"
)

// InstallHelp says how to get redis-server onto this machine.
const InstallHelp = "install it: apt-get install -y redis-server, or run hack/tools.sh " +
	"(or point " + EnvServerBinary + " at a redis-server binary; set " + EnvSkipTests + "=1 to skip Redis tests)"

// ErrNotInstalled is returned (wrapped) by StartServer when no redis-server
// binary can be found.
var ErrNotInstalled = errors.New("redistest: redis-server not found")

const (
	defaultStartTimeout = 15 * time.Second
	defaultStopTimeout  = 5 * time.Second
	maxPortAttempts     = 20
	logTailBytes        = 4 << 10
	logFileName         = "redis-server.log"
)

// Options configure a Server. The zero value is ready to use.
type Options struct {
	// Binary is the redis-server executable. Empty means $MESHPLANE_REDIS_SERVER,
	// then redis-server from PATH, /usr/bin or /usr/local/bin.
	Binary string
	// Dir is the working directory for redis-server (--dir) and its log file.
	// Empty means a new temporary directory that Close removes.
	Dir string
	// Args are extra redis-server arguments appended after the defaults,
	// for example []string{"--maxmemory", "64mb"}. Later arguments win.
	Args []string
	// StartTimeout bounds each start (StartServer, Restart) when the context
	// has no earlier deadline. Zero means 15s.
	StartTimeout time.Duration
	// StopTimeout is how long Stop waits after SIGTERM before it sends
	// SIGKILL. Zero means 5s.
	StopTimeout time.Duration
	// ConfigFile, when set, is a config file given before every argument:
	// Sentinel mode needs one that it can rewrite. A relative path is in
	// Dir; the file is created empty when missing.
	ConfigFile string
}

// Option changes Options; it is used with Start.
type Option func(*Options)

// WithBinary sets Options.Binary.
func WithBinary(path string) Option { return func(o *Options) { o.Binary = path } }

// WithDir sets Options.Dir.
func WithDir(dir string) Option { return func(o *Options) { o.Dir = dir } }

// WithArgs appends to Options.Args.
func WithArgs(args ...string) Option {
	return func(o *Options) { o.Args = append(o.Args, args...) }
}

// WithStartTimeout sets Options.StartTimeout.
func WithStartTimeout(d time.Duration) Option { return func(o *Options) { o.StartTimeout = d } }

// Server is a redis-server child process on a fixed loopback port.
// Its methods are safe for concurrent use; Stop, Kill and Restart hold a lock
// while they run, so Running waits for them.
type Server struct {
	opts    Options
	binary  string
	dir     string
	ownsDir bool
	logPath string
	port    int
	addr    string
	lock    *portLock

	mu     sync.Mutex
	proc   *process
	closed bool
}

// process is one run of redis-server.
type process struct {
	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{} // closed once the process has exited and been reaped
	err     error         // the result of cmd.Wait; read after done is closed
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start starts a Server for the test and stops it and removes its files
// when the test ends. If the test failed, the server log tail is logged.
//
// Start fails the test (t.Fatalf) when redis-server is missing or does not
// start. It skips the test only when MESHPLANE_SKIP_REDIS_TESTS=1.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	if os.Getenv(EnvSkipTests) == "1" {
		t.Skipf("redistest: %s=1, skipping test that needs redis-server", EnvSkipTests)
	}
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	ctx := t.Context()
	s, err := StartServer(ctx, o)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("redistest: %s log tail (%s):\n%s", s.Addr(), s.LogPath(), s.LogTail())
		}
		if err := s.Close(); err != nil {
			t.Errorf("redistest: close %s: %v", s.Addr(), err)
		}
	})
	return s
}

// StartServer starts redis-server on a free loopback port and waits until it
// answers PING. Call Close when done. It returns an error wrapping
// ErrNotInstalled when no redis-server binary is found.
func StartServer(ctx context.Context, opts Options) (*Server, error) {
	binary, err := findBinary(opts.Binary)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, binary: binary, dir: opts.Dir}
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "redistest-"); err != nil {
			return nil, fmt.Errorf("redistest: %w", err)
		}
		s.ownsDir = true
	} else if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s.logPath = filepath.Join(s.dir, logFileName)
	if opts.ConfigFile != "" {
		f, err := os.OpenFile(s.configPath(), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("redistest: config file: %w", err)
		}
		_ = f.Close()
	}

	ctx, cancel := s.startContext(ctx)
	defer cancel()

	var lastErr error
	for attempt := 0; attempt < maxPortAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			break
		}
		port, lock, err := reservePort()
		if err != nil {
			lastErr = err
			continue
		}
		s.setPort(port, lock)
		p, err := s.launch(ctx)
		if err == nil {
			s.proc = p
			return s, nil
		}
		lastErr = err
		s.releasePort()
		if !errors.Is(err, errPortInUse) {
			break
		}
	}
	if lastErr == nil {
		lastErr = ctx.Err()
	}
	if s.ownsDir {
		_ = os.RemoveAll(s.dir)
	}
	return nil, fmt.Errorf("redistest: start redis-server: %w", lastErr)
}

// Addr returns "127.0.0.1:<port>". It does not change across Restart.
func (s *Server) Addr() string { return s.addr }

// Port returns the TCP port. It does not change across Restart.
func (s *Server) Port() int { return s.port }

// Dir returns the working directory of redis-server.
func (s *Server) Dir() string { return s.dir }

// LogPath returns the file that receives redis-server's stdout and stderr,
// across restarts.
func (s *Server) LogPath() string { return s.logPath }

// LogTail returns the last few kilobytes of the log file.
func (s *Server) LogTail() string { return readTail(s.logPath, logTailBytes) }

// Running reports whether the redis-server process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.exited()
}

// Pid returns the process id of the current redis-server, or 0 when none runs.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Stop shuts redis-server down (SIGTERM, then SIGKILL after
// Options.StopTimeout) and waits for it to exit. The port stays reserved for
// Restart. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGTERM)
}

// Kill sends SIGKILL, as a crash would, and waits for the process to exit.
// The port stays reserved for Restart.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGKILL)
}

// Restart starts redis-server again on the same port, stopping it first if
// it runs, and waits until it answers PING. The data set starts empty.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("redistest: restart: server is closed")
	}
	s.stopLocked(syscall.SIGTERM)
	ctx, cancel := s.startContext(ctx)
	defer cancel()

	// The port is ours (flock), but a process outside redistest may have
	// bound it meanwhile. Retry while that lasts, within the deadline.
	backoff := newBackoff()
	var inUse error
	for {
		p, err := s.launch(ctx)
		if err == nil {
			s.proc = p
			return nil
		}
		if errors.Is(err, errPortInUse) {
			inUse = err
		} else if ctx.Err() == nil || inUse == nil {
			return fmt.Errorf("redistest: restart on %s: %w", s.addr, err)
		}
		// The deadline may end an attempt before redis-server reached bind;
		// the port conflict seen before is the better explanation then.
		if werr := backoff.wait(ctx, nil); werr != nil || ctx.Err() != nil {
			return fmt.Errorf("redistest: restart on %s: %w (gave up: %v)", s.addr, inUse, context.Cause(ctx))
		}
	}
}

// FlushAll deletes every key in every database.
func (s *Server) FlushAll(ctx context.Context) error {
	c := s.newAdminClient()
	defer c.Close()
	if err := c.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("redistest: FLUSHALL on %s: %w", s.addr, err)
	}
	return nil
}

// NewClient returns a new client for this server with go-redis defaults. The
// caller closes it. It reconnects by itself after Restart; note that once a
// go-redis pool has failed to dial, it keeps returning the last dial error
// until its background probe (once a second) gets through, so wait for
// reconnection with a deadline of a few seconds.
func (s *Server) NewClient() redis.UniversalClient {
	return redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{s.addr}})
}

// Client returns a new client for this server that is closed when the test
// ends.
func (s *Server) Client(t testing.TB) redis.UniversalClient {
	t.Helper()
	c := s.NewClient()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Close stops redis-server, releases the port and removes the working
// directory if StartServer created it. Close is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.stopLocked(syscall.SIGTERM)
	s.lock.release()
	if s.ownsDir {
		return os.RemoveAll(s.dir)
	}
	return nil
}

func (s *Server) setPort(port int, lock *portLock) {
	s.port = port
	s.lock = lock
	s.addr = "127.0.0.1:" + strconv.Itoa(port)
}

func (s *Server) releasePort() {
	s.lock.release()
	s.lock, s.port, s.addr = nil, 0, ""
}

func (s *Server) startContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := s.opts.StartTimeout
	if d <= 0 {
		d = defaultStartTimeout
	}
	return context.WithTimeout(ctx, d)
}

func (s *Server) args() []string {
	var args []string
	if s.opts.ConfigFile != "" {
		args = append(args, s.configPath())
	}
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--logfile", "",
	)
	return append(args, s.opts.Args...)
}

func (s *Server) configPath() string {
	if filepath.IsAbs(s.opts.ConfigFile) {
		return s.opts.ConfigFile
	}
	return filepath.Join(s.dir, s.opts.ConfigFile)
}

var errPortInUse = errors.New("port in use")

// launch starts one redis-server on s.port and waits until it answers PING.
// It returns an error wrapping errPortInUse when the port was taken.
func (s *Server) launch(ctx context.Context) (*process, error) {
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	logStart, _ := logFile.Seek(0, io.SeekEnd)
	fmt.Fprintf(logFile, "--- redistest: starting %s %s\n", s.binary, strings.Join(quoteArgs(s.args()), " "))

	cmd := exec.Command(s.binary, s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, err
	}
	p := &process{cmd: cmd, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()

	err = s.waitReady(ctx, p)
	if err == nil {
		return p, nil
	}
	p.signalAndWait(syscall.SIGKILL, 0)
	runLog := readFrom(s.logPath, logStart)
	if strings.Contains(runLog, "Address already in use") {
		err = fmt.Errorf("%w: %s: %v", errPortInUse, s.addr, err)
	}
	return nil, fmt.Errorf("%w\n--- log tail (%s) ---\n%s", err, s.logPath, tail(runLog, logTailBytes))
}

// waitReady polls until the process answers PING, exits, or ctx ends. It
// also checks that the answering server is this process, not another one
// that holds the port.
//
// Each probe first dials TCP and then uses a fresh go-redis client: a
// go-redis pool that failed to dial reports its last dial error until a
// background probe (once a second) gets through, which would delay readiness.
func (s *Server) waitReady(ctx context.Context, p *process) error {
	backoff := newBackoff()
	var lastErr error
	for {
		lastErr = s.probe(ctx, p)
		if lastErr == nil || errors.Is(lastErr, errPortInUse) {
			return lastErr
		}
		if err := backoff.wait(ctx, p.done); err != nil {
			if p.exited() {
				return fmt.Errorf("redis-server exited before it was ready: %v", p.err)
			}
			return fmt.Errorf("redis-server not ready on %s: %w (last probe: %v)", s.addr, err, lastErr)
		}
	}
}

func (s *Server) probe(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return err
	}
	_ = conn.Close()

	c := s.newAdminClient()
	defer c.Close()
	go func() {
		// Give up at once when the process exits: whatever answers then
		// is not ours. Closing the client interrupts a blocked read.
		select {
		case <-p.done:
			_ = c.Close()
		case <-ctx.Done():
		}
	}()
	if err := c.Ping(ctx).Err(); err != nil {
		return err
	}
	got, err := serverPid(ctx, c)
	if err != nil {
		return err
	}
	if pid := p.cmd.Process.Pid; got != pid {
		return fmt.Errorf("%w: another redis-server (pid %d) answers on %s", errPortInUse, got, s.addr)
	}
	return nil
}

// newAdminClient returns a single-connection client that does not retry.
func (s *Server) newAdminClient() *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:            s.addr,
		DialTimeout:     time.Second,
		ReadTimeout:     5 * time.Second,
		WriteTimeout:    5 * time.Second,
		MaxRetries:      -1,
		DialerRetries:   1,
		PoolSize:        1,
		DisableIdentity: true,
		// Honour the caller's deadline on reads and writes too.
		ContextTimeoutEnabled: true,
	})
}

func serverPid(ctx context.Context, c *redis.Client) (int, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

func (s *Server) stopLocked(sig syscall.Signal) {
	if s.proc == nil {
		return
	}
	grace := s.opts.StopTimeout
	if grace <= 0 {
		grace = defaultStopTimeout
	}
	s.proc.signalAndWait(sig, grace)
	s.proc = nil
}

// signalAndWait sends sig and waits for exit; if the process is still alive
// after grace (when sig is not SIGKILL), it sends SIGKILL and waits.
func (p *process) signalAndWait(sig syscall.Signal, grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	if sig != syscall.SIGKILL {
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-p.done:
			return
		case <-timer.C:
			_ = p.cmd.Process.Kill()
		}
	}
	<-p.done
}

func findBinary(explicit string) (string, error) {
	if explicit == "" {
		explicit = os.Getenv(EnvServerBinary)
	}
	if explicit != "" {
		path, err := exec.LookPath(explicit)
		if err != nil {
			return "", fmt.Errorf("%w: %q: %v; %s", ErrNotInstalled, explicit, err, InstallHelp)
		}
		return path, nil
	}
	if path, err := exec.LookPath("redis-server"); err == nil {
		return path, nil
	}
	for _, path := range []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server"} {
		if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	return "", fmt.Errorf("%w in PATH, /usr/bin or /usr/local/bin; %s", ErrNotInstalled, InstallHelp)
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'") {
			a = strconv.Quote(a)
		}
		out[i] = a
	}
	return out
}

// readTail returns the last n bytes of the file at path.
func readTail(path string, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "(no log)"
		}
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return tail(string(b), n)
}

// readFrom returns the file's content from offset on.
func readFrom(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	if offset < 0 || offset > int64(len(b)) {
		offset = 0
	}
	return string(b[offset:])
}

func tail(s string, n int64) string {
	if int64(len(s)) <= n {
		return s
	}
	s = s[int64(len(s))-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return "...\n" + s
}

// backoff paces polling: 2ms doubling to 100ms.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 2 * time.Millisecond} }

// wait returns nil after the current interval, or an error when ctx ends or
// stop is closed first.
func (b *backoff) wait(ctx context.Context, stop <-chan struct{}) error {
	timer := time.NewTimer(b.d)
	defer timer.Stop()
	if b.d *= 2; b.d > 100*time.Millisecond {
		b.d = 100 * time.Millisecond
	}
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errors.New("process exited")
	}
}
