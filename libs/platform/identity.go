package platform

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// Kind is what a caller is: a workload cluster's agent or one of the
// management services.
type Kind string

const (
	// KindCluster is an agent, named by its cluster: spiffe://<td>/cluster/<name>.
	KindCluster Kind = "cluster"
	// KindService is a management service: spiffe://<td>/service/<name>.
	KindService Kind = "service"
)

// Identity is the verified caller of an RPC, read from the one SPIFFE URI SAN
// of its client certificate.
type Identity struct {
	Kind        Kind
	Name        string
	TrustDomain string
	// Serial is the certificate's serial number in decimal, as a
	// RevocationChecker receives it.
	Serial string
	// NotAfter is when the certificate expires. A connection outlives the
	// handshake that checked it, so every call checks this again.
	NotAfter time.Time
}

// SPIFFEID returns the identity's URI, spiffe://<trust-domain>/<kind>/<name>.
func (id Identity) SPIFFEID() string {
	return SPIFFEID(id.TrustDomain, id.Kind, id.Name)
}

// String returns the SPIFFE ID, so log lines name callers the way
// certificates do.
func (id Identity) String() string { return id.SPIFFEID() }

// SPIFFEID builds spiffe://<trustDomain>/<kind>/<name>. The PKI uses it for
// the URI SAN it signs, so both sides agree on the format.
func SPIFFEID(trustDomain string, kind Kind, name string) string {
	return (&url.URL{Scheme: "spiffe", Host: trustDomain, Path: "/" + string(kind) + "/" + name}).String()
}

// ParseSPIFFEID parses spiffe://<trust-domain>/cluster/<name> or
// spiffe://<trust-domain>/service/<name>. Anything else, including extra path
// segments, ports, queries, fragments or escapes, is an error: an ID that two
// parsers could read differently must not name anyone.
func ParseSPIFFEID(u *url.URL) (Identity, error) {
	if u == nil {
		return Identity{}, errors.New("no URI")
	}
	if u.Scheme != "spiffe" {
		return Identity{}, fmt.Errorf("URI %q: scheme is not spiffe", u)
	}
	if u.Opaque != "" || u.User != nil || u.Port() != "" || u.RawQuery != "" || u.ForceQuery ||
		u.Fragment != "" || u.RawFragment != "" || u.RawPath != "" {
		return Identity{}, fmt.Errorf("URI %q: a SPIFFE ID has only a trust domain and a path", u)
	}
	if err := validateTrustDomain(u.Host); err != nil {
		return Identity{}, fmt.Errorf("URI %q: %w", u, err)
	}
	segs := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if !strings.HasPrefix(u.Path, "/") || len(segs) != 2 {
		return Identity{}, fmt.Errorf("URI %q: path must be /cluster/<name> or /service/<name>", u)
	}
	kind := Kind(segs[0])
	if kind != KindCluster && kind != KindService {
		return Identity{}, fmt.Errorf("URI %q: unknown kind %q (want cluster or service)", u, segs[0])
	}
	if err := validateSegment(segs[1]); err != nil {
		return Identity{}, fmt.Errorf("URI %q: name: %w", u, err)
	}
	return Identity{Kind: kind, Name: segs[1], TrustDomain: u.Host}, nil
}

// IdentityFromCertificate reads the identity of a certificate that has
// already been verified. It accepts exactly one URI SAN: with two, which one
// names the caller would be a guess.
func IdentityFromCertificate(cert *x509.Certificate) (Identity, error) {
	if cert == nil {
		return Identity{}, errors.New("no certificate")
	}
	if n := len(cert.URIs); n != 1 {
		return Identity{}, fmt.Errorf("certificate has %d URI SANs, want exactly one SPIFFE ID", n)
	}
	id, err := ParseSPIFFEID(cert.URIs[0])
	if err != nil {
		return Identity{}, err
	}
	id.Serial = cert.SerialNumber.String()
	id.NotAfter = cert.NotAfter
	return id, nil
}

// validateTrustDomain follows the SPIFFE spec: lower-case letters, digits,
// dots, dashes and underscores.
func validateTrustDomain(td string) error {
	if td == "" {
		return errors.New("trust domain is empty")
	}
	for _, r := range td {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("trust domain %q has %q; only lower-case letters, digits, '.', '-' and '_' are allowed", td, r)
		}
	}
	return nil
}

// validateSegment follows the SPIFFE spec for a path segment.
func validateSegment(s string) error {
	if s == "" || s == "." || s == ".." {
		return fmt.Errorf("%q is not a valid path segment", s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("%q has %q; only letters, digits, '.', '-' and '_' are allowed", s, r)
		}
	}
	return nil
}

type identityKey struct{}

// ContextWithIdentity returns ctx carrying id. The server does this for every
// verified caller; tests of handlers call it directly.
func ContextWithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFromContext returns the verified caller, if there is one.
func IdentityFromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// ClusterFromContext returns the name of the calling cluster. It fails with
// CodeUnauthenticated when the caller proved no identity and with
// CodePermissionDenied when the caller is not a cluster, so a handler can
// return the error as it is.
func ClusterFromContext(ctx context.Context) (string, error) {
	id, ok := IdentityFromContext(ctx)
	if !ok {
		return "", connect.NewError(connect.CodeUnauthenticated,
			errors.New("this call needs a client certificate naming a cluster"))
	}
	if id.Kind != KindCluster {
		return "", connect.NewError(connect.CodePermissionDenied,
			fmt.Errorf("caller %s is not a cluster", id))
	}
	return id.Name, nil
}
