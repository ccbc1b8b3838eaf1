package redistest_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshplane/meshplane/libs/redistest"
)

// waitFor polls cond until it returns nil or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %v: last error: %v", what, timeout, err)
		case <-tick.C:
		}
	}
}

func TestSetGet(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	if !s.Running() {
		t.Fatal("Running() = false after Start")
	}
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr() = %q, want 127.0.0.1:<port>", s.Addr())
	}
	c := s.Client(t)
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	got, err := c.Get(ctx, "k").Result()
	if err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}

	// No persistence: the server is configured with save "" and appendonly no.
	cfg, err := c.ConfigGet(ctx, "save").Result()
	if err != nil || cfg["save"] != "" {
		t.Fatalf("CONFIG GET save = %v, %v; want empty", cfg, err)
	}
	cfg, err = c.ConfigGet(ctx, "appendonly").Result()
	if err != nil || cfg["appendonly"] != "no" {
		t.Fatalf("CONFIG GET appendonly = %v, %v; want no", cfg, err)
	}

	if err := s.FlushAll(ctx); err != nil {
		t.Fatalf("FlushAll: %v", err)
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after FlushAll: err = %v, want redis.Nil", err)
	}
	if _, err := os.Stat(s.LogPath()); err != nil {
		t.Fatalf("log file: %v", err)
	}
}

func TestStopRestartSameAddress(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	addr := s.Addr()
	c := s.Client(t)
	ctx := t.Context()
	if err := c.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	s.Stop()
	if s.Running() {
		t.Fatal("Running() = true after Stop")
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded while the server is stopped")
	}
	s.Stop() // idempotent

	if err := s.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s.Addr() != addr {
		t.Fatalf("Addr() after Restart = %q, want %q", s.Addr(), addr)
	}
	if !s.Running() {
		t.Fatal("Running() = false after Restart")
	}
	// The same client reconnects by itself.
	waitFor(t, 10*time.Second, "client reconnects after restart", func(ctx context.Context) error {
		return c.Ping(ctx).Err()
	})
	// No persistence: the data is gone.
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after restart: err = %v, want redis.Nil", err)
	}
	if err := c.Set(ctx, "k", "after", 0).Err(); err != nil {
		t.Fatalf("SET after restart: %v", err)
	}

	// Restart of a running server works too and keeps the address.
	if err := s.Restart(ctx); err != nil {
		t.Fatalf("second Restart: %v", err)
	}
	waitFor(t, 10*time.Second, "client reconnects after second restart", func(ctx context.Context) error {
		return c.Ping(ctx).Err()
	})
	if s.Addr() != addr {
		t.Fatalf("Addr() after second Restart = %q, want %q", s.Addr(), addr)
	}
}

func TestTwoServersDifferentAddresses(t *testing.T) {
	t.Parallel()
	a := redistest.Start(t)
	b := redistest.Start(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("both servers on %s", a.Addr())
	}
	ctx := t.Context()
	ca, cb := a.Client(t), b.Client(t)
	if err := ca.Set(ctx, "k", "a", 0).Err(); err != nil {
		t.Fatalf("SET a: %v", err)
	}
	if err := cb.Set(ctx, "k", "b", 0).Err(); err != nil {
		t.Fatalf("SET b: %v", err)
	}
	if got := ca.Get(ctx, "k").Val(); got != "a" {
		t.Fatalf("a: GET k = %q, want a", got)
	}
	if got := cb.Get(ctx, "k").Val(); got != "b" {
		t.Fatalf("b: GET k = %q, want b", got)
	}
	// Stopping one leaves the other alone.
	a.Stop()
	if err := cb.Ping(ctx).Err(); err != nil {
		t.Fatalf("b: PING after stopping a: %v", err)
	}
}

func TestKillMakesCommandsFail(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	c := s.Client(t)
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	pid := s.Pid()
	s.Kill()
	if s.Running() || s.Pid() != 0 {
		t.Fatalf("Running() = %v, Pid() = %d after Kill", s.Running(), s.Pid())
	}
	if err := c.Get(ctx, "k").Err(); err == nil || errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Kill: err = %v, want a connection error", err)
	}
	if err := s.FlushAll(ctx); err == nil {
		t.Fatal("FlushAll after Kill succeeded")
	}

	// A crashed server comes back on the same port.
	if err := s.Restart(ctx); err != nil {
		t.Fatalf("Restart after Kill: %v", err)
	}
	if s.Pid() == pid || s.Pid() == 0 {
		t.Fatalf("Pid() after Restart = %d, old %d", s.Pid(), pid)
	}
	waitFor(t, 10*time.Second, "client reconnects after crash", func(ctx context.Context) error {
		return c.Ping(ctx).Err()
	})
}

func TestStartServerAndClose(t *testing.T) {
	t.Parallel()
	if os.Getenv(redistest.EnvSkipTests) == "1" {
		t.Skip("redis tests skipped")
	}
	s, err := redistest.StartServer(t.Context(), redistest.Options{Args: []string{"--databases", "4"}})
	if err != nil {
		t.Fatalf("StartServer: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	dir := s.Dir()
	c := s.NewClient()
	defer c.Close()
	cfg, err := c.ConfigGet(t.Context(), "databases").Result()
	if err != nil || cfg["databases"] != "4" {
		t.Fatalf("CONFIG GET databases = %v, %v; want 4 (extra Args)", cfg, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if s.Running() {
		t.Fatal("Running() after Close")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temp dir %s still exists after Close: %v", dir, err)
	}
	if err := s.Restart(t.Context()); err == nil {
		t.Fatal("Restart after Close succeeded")
	}
}

func TestMissingBinary(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-such-redis-server")
	_, err := redistest.StartServer(t.Context(), redistest.Options{Binary: missing})
	if !errors.Is(err, redistest.ErrNotInstalled) {
		t.Fatalf("err = %v, want ErrNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "apt-get install -y redis-server") || !strings.Contains(err.Error(), "hack/tools.sh") {
		t.Fatalf("error lacks install help: %v", err)
	}
}

func TestStartupFailureIncludesLogTail(t *testing.T) {
	t.Parallel()
	if os.Getenv(redistest.EnvSkipTests) == "1" {
		t.Skip("redis tests skipped")
	}
	_, err := redistest.StartServer(t.Context(), redistest.Options{Args: []string{"--no-such-option", "x"}})
	if err == nil {
		t.Fatal("StartServer with a bad option succeeded")
	}
	if !strings.Contains(err.Error(), "log tail") || !strings.Contains(err.Error(), "no-such-option") {
		t.Fatalf("error lacks the log tail: %v", err)
	}
}

func TestRestartWhilePortTaken(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	s.Stop()
	// Something outside redistest takes the port while the server is down.
	ln, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatalf("listen on the stopped server's port: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err = s.Restart(ctx)
	if err == nil || !strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("Restart with the port taken: err = %v, want address in use with log tail", err)
	}
	if s.Running() {
		t.Fatal("Running() after failed Restart")
	}
	_ = ln.Close()
	if err := s.Restart(t.Context()); err != nil {
		t.Fatalf("Restart after the port was freed: %v", err)
	}
	if err := s.Client(t).Ping(t.Context()).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
}
