package kubetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTB records Fatalf and Skipf instead of ending the real test.
type fakeTB struct {
	testing.TB
	mu          sync.Mutex
	fatal, skip string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Skipf(format string, args ...any) {
	f.mu.Lock()
	f.skip = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// runStart calls Start with a fakeTB on its own goroutine, since Fatalf and
// Skipf end it.
func runStart(t *testing.T, opts Options) *fakeTB {
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(f, opts)
	}()
	<-done
	return f
}

func TestStartFailsWhenBinaryMissing(t *testing.T) {
	t.Setenv(EnvSkip, "")
	t.Setenv(EnvKubeAPIServer, filepath.Join(t.TempDir(), "kube-apiserver"))
	f := runStart(t, Options{SkipIstioCRDs: true})
	if f.skip != "" {
		t.Fatalf("skipped (%s); a missing binary must fail the test", f.skip)
	}
	for _, want := range []string{"kube-apiserver not found", "run `make tools` or `bash hack/tools.sh`"} {
		if !strings.Contains(f.fatal, want) {
			t.Errorf("Fatalf message %q does not contain %q", f.fatal, want)
		}
	}
}

func TestStartSkipsOnlyWhenAsked(t *testing.T) {
	t.Setenv(EnvKubeAPIServer, filepath.Join(t.TempDir(), "kube-apiserver"))
	t.Setenv(EnvSkip, "1")
	if f := runStart(t, Options{}); f.skip == "" || f.fatal != "" {
		t.Errorf("%s=1: skip %q, fatal %q; want a skip", EnvSkip, f.skip, f.fatal)
	}
	t.Setenv(EnvSkip, "true")
	if f := runStart(t, Options{}); f.skip != "" || f.fatal == "" {
		t.Errorf("%s=true: skip %q, fatal %q; want a failure", EnvSkip, f.skip, f.fatal)
	}
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-kube-apiserver")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStartErrorHasLogTail(t *testing.T) {
	t.Setenv(EnvKubeAPIServer, writeScript(t, "echo 'E0101 flag provided but not defined: -nope' >&2\nexit 3\n"))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, Options{Name: "broken", SkipIstioCRDs: true})
	if err == nil {
		c.Stop()
		t.Fatal("no error")
	}
	for _, want := range []string{`start cluster "broken"`, "kube-apiserver exited", "exit status 3", "flag provided but not defined: -nope"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
}

func TestStartTimeoutKillsProcessGroup(t *testing.T) {
	// The fake apiserver never becomes ready and has a child of its own.
	t.Setenv(EnvKubeAPIServer, writeScript(t, "sleep 300 &\necho \"child $!\"\nwait\n"))
	logDir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, Options{Name: "hung", SkipIstioCRDs: true, LogDir: logDir})
	if err == nil {
		c.Stop()
		t.Fatal("no error")
	}
	if !strings.Contains(err.Error(), "kube-apiserver not ready") || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("error: %v", err)
	}
	log, err := os.ReadFile(filepath.Join(logDir, "hung-kube-apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`child (\d+)`).FindSubmatch(log)
	if m == nil {
		t.Fatalf("no child pid in log:\n%s", log)
	}
	pid, _ := strconv.Atoi(string(m[1]))
	Eventually(t, 10*time.Second, func(context.Context) (bool, error) {
		return !alive(pid), nil
	}, "child %d of the fake apiserver survived Stop", pid)
}

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// A port taken between picking it and the child binding it makes the child
// fail; the start is retried with fresh ports.
func TestStartRetriesTakenPorts(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port

	var mu sync.Mutex
	calls := 0
	pickPorts = func(n int) ([]int, error) {
		mu.Lock()
		calls++
		call := calls
		mu.Unlock()
		ports, err := pickFreePorts(n)
		// Call 1 is etcd's first try, call 3 the apiserver's first.
		if err == nil && (call == 1 || call == 3) {
			ports[0] = takenPort
		}
		return ports, err
	}
	defer func() { pickPorts = pickFreePorts }()

	c := Start(t, Options{Name: "retry", SkipIstioCRDs: true})
	if calls != 4 {
		t.Errorf("picked ports %d times, want 4 (two tries each for etcd and kube-apiserver)", calls)
	}
	if strings.HasSuffix(c.Host(), ":"+strconv.Itoa(takenPort)) || strings.HasSuffix(c.EtcdURL(), ":"+strconv.Itoa(takenPort)) {
		t.Errorf("cluster uses the taken port %d: %s %s", takenPort, c.Host(), c.EtcdURL())
	}
	if _, err := c.Clientset().Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}
}
