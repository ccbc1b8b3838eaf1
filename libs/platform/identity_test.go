package platform_test

import (
	"context"
	"crypto/x509"
	"math/big"
	"net/url"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/meshplane/meshplane/libs/platform"
)

func TestParseSPIFFEID(t *testing.T) {
	tests := []struct {
		uri  string
		want platform.Identity // zero: must fail
	}{
		{"spiffe://test.local/cluster/east", platform.Identity{Kind: platform.KindCluster, Name: "east", TrustDomain: "test.local"}},
		{"spiffe://test.local/service/ingest", platform.Identity{Kind: platform.KindService, Name: "ingest", TrustDomain: "test.local"}},
		{"spiffe://td/cluster/us-east-1a", platform.Identity{Kind: platform.KindCluster, Name: "us-east-1a", TrustDomain: "td"}},
		// Names are DNS labels: they end up in Kubernetes label values and
		// Redis keys.
		{"spiffe://td/cluster/Us-East_1.a", platform.Identity{}},
		{"spiffe://test.local/user/alice", platform.Identity{}},
		{"spiffe://test.local/cluster", platform.Identity{}},
		{"spiffe://test.local/cluster/", platform.Identity{}},
		{"spiffe://test.local/cluster/east/extra", platform.Identity{}},
		{"spiffe://test.local/cluster/..", platform.Identity{}},
		{"spiffe://test.local/cluster/a%2Fb", platform.Identity{}},
		{"spiffe://test.local/cluster/east?x=1", platform.Identity{}},
		{"spiffe://test.local/cluster/east#f", platform.Identity{}},
		{"spiffe://test.local:443/cluster/east", platform.Identity{}},
		{"spiffe://u@test.local/cluster/east", platform.Identity{}},
		{"spiffe://Test.Local/cluster/east", platform.Identity{}},
		{"spiffe:///cluster/east", platform.Identity{}},
		{"https://test.local/cluster/east", platform.Identity{}},
		{"spiffe:test.local/cluster/east", platform.Identity{}},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			u, err := url.Parse(tt.uri)
			if err != nil {
				t.Fatal(err)
			}
			got, err := platform.ParseSPIFFEID(u)
			if tt.want == (platform.Identity{}) {
				if err == nil {
					t.Fatalf("ParseSPIFFEID accepted %s as %+v", tt.uri, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSPIFFEID: %v", err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if got.SPIFFEID() != tt.uri {
				t.Errorf("SPIFFEID() = %s, want the input back", got.SPIFFEID())
			}
		})
	}
}

func TestIdentityFromCertificate(t *testing.T) {
	uri := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	notAfter := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	cert := &x509.Certificate{SerialNumber: big.NewInt(4242), NotAfter: notAfter, URIs: []*url.URL{uri(eastID)}}
	id, err := platform.IdentityFromCertificate(cert)
	if err != nil {
		t.Fatal(err)
	}
	want := platform.Identity{Kind: platform.KindCluster, Name: "east", TrustDomain: trustDomain, Serial: "4242", NotAfter: notAfter}
	if id != want {
		t.Fatalf("got %+v, want %+v", id, want)
	}
	for _, uris := range [][]*url.URL{nil, {uri(eastID), uri(ingestID)}, {uri(eastID), uri(eastID)}} {
		cert.URIs = uris
		if id, err := platform.IdentityFromCertificate(cert); err == nil {
			t.Errorf("%d URI SANs gave identity %v, want none", len(uris), id)
		}
	}
}

func TestClusterFromContext(t *testing.T) {
	ctx := context.Background()
	if _, err := platform.ClusterFromContext(ctx); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("no identity: got %v, want unauthenticated", err)
	}
	svc := platform.ContextWithIdentity(ctx, platform.Identity{Kind: platform.KindService, Name: "ingest", TrustDomain: trustDomain})
	if _, err := platform.ClusterFromContext(svc); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("service identity: got %v, want permission denied", err)
	}
	east := platform.ContextWithIdentity(ctx, platform.Identity{Kind: platform.KindCluster, Name: "east", TrustDomain: trustDomain})
	if name, err := platform.ClusterFromContext(east); err != nil || name != "east" {
		t.Errorf("cluster identity: got %q, %v", name, err)
	}
}

func TestAccessPolicyLookup(t *testing.T) {
	p := platform.AccessPolicy{
		"/a.v1.Svc/":       platform.AllowCluster,
		"/a.v1.Svc/Public": platform.AllowPublic,
	}
	tests := map[string]platform.Allow{
		"/a.v1.Svc/Public": platform.AllowPublic,        // procedure wins
		"/a.v1.Svc/Other":  platform.AllowCluster,       // service rule
		"/b.v1.Svc/Get":    platform.AllowAuthenticated, // unknown: identity needed
		"/a.v1.Svc":        platform.AllowAuthenticated,
		"":                 platform.AllowAuthenticated,
	}
	for proc, want := range tests {
		if got := p.Lookup(proc); got != want {
			t.Errorf("Lookup(%q) = %s, want %s", proc, got, want)
		}
	}
	if got := platform.AllowAuthenticated.String(); got != "clusters and services" {
		t.Errorf("AllowAuthenticated.String() = %q", got)
	}
}
