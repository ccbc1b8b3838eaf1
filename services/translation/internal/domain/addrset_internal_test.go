package domain

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
)

// TestAddrSet: an address is added once; IPv4 and other addresses are
// kept apart; the table keeps every address across its growth.
func TestAddrSet(t *testing.T) {
	s := newAddrSet(1)
	var added []netip.Addr
	for i := range 1000 {
		a, ok := candidateAddress(fmt.Sprintf("h%d.global", i), 0)
		if !ok {
			continue
		}
		if !s.add(a) {
			// A hash collision between two hosts: the set already has it.
			continue
		}
		added = append(added, a)
	}
	for _, a := range added {
		if s.add(a) {
			t.Fatalf("%s added twice", a)
		}
	}
	if s.n != len(added) {
		t.Errorf("set holds %d addresses, %d were added", s.n, len(added))
	}
	v6 := netip.MustParseAddr("fd00::1")
	if !s.add(v6) || s.add(v6) {
		t.Error("an IPv6 address is not added exactly once")
	}
	zero := netip.AddrFrom4([4]byte{})
	if !s.add(zero) || s.add(zero) {
		t.Error("0.0.0.0 (the table's free mark) is not added exactly once")
	}
}

// mapAddrSet is the plain alternative to addrSet, kept for
// BenchmarkAddrSet: a Go map of IPv4 addresses as numbers.
type mapAddrSet map[uint32]struct{}

func (s mapAddrSet) add(addr netip.Addr) bool {
	b := addr.As4()
	v := binary.BigEndian.Uint32(b[:])
	if _, ok := s[v]; ok {
		return false
	}
	s[v] = struct{}{}
	return true
}

// BenchmarkAddrSet measures addrSet against a Go map at the sizes
// federation gives out in one client cluster (about 9,000 hosts in
// BenchmarkTranslateFederated's clusters, 10,000 at the reference
// estate). docs/benchmarks.md has the figures that keep addrSet.
func BenchmarkAddrSet(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		addrs := make([]netip.Addr, 0, n)
		for i := 0; len(addrs) < n; i++ {
			if a, ok := candidateAddress(fmt.Sprintf("reviews-%d.bookinfo.global", i), 0); ok {
				addrs = append(addrs, a)
			}
		}
		b.Run(fmt.Sprintf("impl=addrSet/N=%d", n), func(b *testing.B) {
			for b.Loop() {
				s := newAddrSet(n)
				for _, a := range addrs {
					s.add(a)
				}
			}
		})
		b.Run(fmt.Sprintf("impl=map/N=%d", n), func(b *testing.B) {
			for b.Loop() {
				s := make(mapAddrSet, n)
				for _, a := range addrs {
					s.add(a)
				}
			}
		})
	}
}
