package raft

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Discovery lists the Raft addresses (host:port) of the replicas that
// should be members. It may include this node's own address.
type Discovery interface {
	Addresses(ctx context.Context) ([]string, error)
}

// DiscoveryFunc adapts a function to Discovery.
type DiscoveryFunc func(ctx context.Context) ([]string, error)

// Addresses implements Discovery.
func (f DiscoveryFunc) Addresses(ctx context.Context) ([]string, error) { return f(ctx) }

// StaticPeers is a fixed list of addresses.
type StaticPeers []string

// Addresses implements Discovery.
func (s StaticPeers) Addresses(context.Context) ([]string, error) { return slices.Clone(s), nil }

// ParseStaticPeers parses --raft-peers: "id=host:port,..." or
// "host:port,...". The IDs are informative: a node's ID is what it answers
// when probed.
func ParseStaticPeers(s string) (StaticPeers, error) {
	var out StaticPeers
	for p := range strings.SplitSeq(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		addr := p
		if id, a, ok := strings.Cut(p, "="); ok {
			if id == "" {
				return nil, fmt.Errorf("peer %q: empty ID before '='", p)
			}
			addr = a
		}
		if err := checkHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %q: %w", p, err)
		}
		out = append(out, addr)
	}
	return out, nil
}

func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("address %q has no host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("address %q has no valid port", addr)
	}
	return nil
}

// DNSPeers resolves a headless Service: its SRV records when it has any
// (target and port), else its A/AAAA records with Port.
type DNSPeers struct {
	Name     string
	Port     int
	Resolver *net.Resolver
}

// Addresses implements Discovery.
func (d DNSPeers) Addresses(ctx context.Context) ([]string, error) {
	r := d.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	if _, srvs, err := r.LookupSRV(ctx, "", "", d.Name); err == nil && len(srvs) > 0 {
		out := make([]string, 0, len(srvs))
		for _, s := range srvs {
			out = append(out, net.JoinHostPort(strings.TrimSuffix(s.Target, "."), strconv.Itoa(int(s.Port))))
		}
		slices.Sort(out)
		return out, nil
	}
	hosts, err := r.LookupHost(ctx, d.Name)
	if err != nil {
		return nil, fmt.Errorf("resolve raft peers %s: %w", d.Name, err)
	}
	out := make([]string, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, net.JoinHostPort(h, strconv.Itoa(d.Port)))
	}
	slices.Sort(out)
	return out, nil
}
