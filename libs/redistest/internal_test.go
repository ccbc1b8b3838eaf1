package redistest

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestLaunchReportsPortInUse(t *testing.T) {
	if os.Getenv(EnvSkipTests) == "1" {
		t.Skip("redis tests skipped")
	}
	binary, err := findBinary("")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	s := &Server{binary: binary, dir: dir, logPath: filepath.Join(dir, logFileName)}
	s.setPort(ln.Addr().(*net.TCPAddr).Port, nil)
	ctx := t.Context()
	if _, err := s.launch(ctx); !errors.Is(err, errPortInUse) {
		t.Fatalf("launch on a taken port: err = %v, want errPortInUse", err)
	}
}

func TestReservePortIsExclusive(t *testing.T) {
	port, lock, err := reservePort()
	if err != nil {
		t.Fatal(err)
	}
	defer lock.release()
	again, err := lockPort(port)
	if err != nil {
		t.Fatal(err)
	}
	if again != nil {
		again.release()
		t.Fatalf("port %d locked twice", port)
	}
	lock.release()
	again, err = lockPort(port)
	if err != nil || again == nil {
		t.Fatalf("lock after release: %v, %v", again, err)
	}
	again.release()
}
