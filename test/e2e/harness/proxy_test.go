package harness

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"
)

// echo serves lines back on a free loopback port.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn) (time.Duration, error) {
	start := time.Now()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return time.Since(start), err
}

func TestProxyCutsAndDelays(t *testing.T) {
	p, err := StartProxy(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := roundTrip(c); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	p.Delay(150 * time.Millisecond)
	if took, err := roundTrip(c); err != nil || took < 300*time.Millisecond {
		t.Fatalf("a delayed round trip took %v (%v); want at least 2 x 150ms", took, err)
	}
	p.Delay(0)

	p.Cut(500 * time.Millisecond)
	if _, err := roundTrip(c); err == nil {
		t.Fatal("a connection survived the cut")
	}
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		if _, err := roundTrip(c2); err == nil {
			t.Fatal("a new connection was served during the cut")
		}
		c2.Close()
	}
	// Once the cut is over, a new connection is served again.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c3, err := net.Dial("tcp", p.Addr())
		if err == nil {
			_, err = roundTrip(c3)
			c3.Close()
		}
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not served again within 3s of a 500ms cut: %v", err)
		case <-tick.C:
		}
	}
}
