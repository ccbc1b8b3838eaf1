//go:build unix

package platform

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// ListenAddr reads an inherited socket's address without closing it: Listen
// on the same fd:N works afterwards, on that address.
func TestListenAddrOfAnInheritedSocket(t *testing.T) {
	if os.Getenv("MESHPLANE_LISTENADDR_CHILD") == "1" {
		addr, err := ListenAddr("fd:3")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := Listen(t.Context(), "fd:3")
		if err != nil {
			t.Fatalf("Listen after ListenAddr: %v", err)
		}
		defer ln.Close()
		if ln.Addr().String() != addr {
			t.Fatalf("ListenAddr = %s, Listen's address = %s", addr, ln.Addr())
		}
		os.Stdout.WriteString("addr=" + addr + "\n")
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestListenAddrOfAnInheritedSocket$", "-test.v")
	cmd.Env = append(os.Environ(), "MESHPLANE_LISTENADDR_CHILD=1")
	cmd.ExtraFiles = []*os.File{f}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if want := "addr=" + ln.Addr().String(); !strings.Contains(string(out), want) {
		t.Fatalf("child printed %q, want %q", out, want)
	}
	if got, err := ListenAddr("127.0.0.1:9443"); err != nil || got != "127.0.0.1:9443" {
		t.Fatalf("ListenAddr(host:port) = %q, %v", got, err)
	}
}
