package platform

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/meshplane/meshplane/libs/pki"
	"net/url"
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

// SPIFFEID builds spiffe://<trustDomain>/<kind>/<name>, as libs/pki signs
// it.
func SPIFFEID(trustDomain string, kind Kind, name string) string {
	return pki.ID{TrustDomain: trustDomain, Kind: string(kind), Name: name}.String()
}

// ParseSPIFFEID parses spiffe://<trust-domain>/cluster/<name> or
// spiffe://<trust-domain>/service/<name> with libs/pki's parser, so that
// the signer and the checker agree on what names anyone.
func ParseSPIFFEID(u *url.URL) (Identity, error) {
	id, err := pki.ParseID(u)
	if err != nil {
		return Identity{}, err
	}
	return Identity{Kind: Kind(id.Kind), Name: id.Name, TrustDomain: id.TrustDomain}, nil
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

func validateTrustDomain(td string) error { return pki.ValidateTrustDomain(td) }

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
