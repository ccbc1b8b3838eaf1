// Package app holds the registration use cases: trade a bootstrap token and
// a CSR for a cluster certificate, renew it, and the operator's cluster
// administration (create, approve, deregister, list).
package app

import (
	"context"
	"crypto/x509"
	"errors"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/revocation"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// ErrUnknownToken is returned when the token does not match. The message
// never says whether the cluster exists.
var ErrUnknownToken = domain.ErrTokenInvalid

// ErrNotFound is returned by stores for a missing record.
var ErrNotFound = errors.New("not found")

// ErrNotDurable is returned by a store whose write may not survive the
// loss of its primary: too few replicas acknowledged it in time. The
// caller may retry; every security write can be repeated.
var ErrNotDurable = errors.New("the store did not replicate the write in time")

// StaticTokens holds the operator's static, multi-use tokens (a bootstrap
// tokens file).
type StaticTokens interface {
	// TokenHash returns the hash for cluster, or ErrUnknownToken.
	TokenHash(ctx context.Context, cluster string) (domain.TokenHash, error)
}

// TokenStore keeps the per-cluster, single-use bootstrap tokens: one per
// cluster, by hash.
type TokenStore interface {
	// PutToken stores t, replacing any token of t.Cluster.
	PutToken(ctx context.Context, t domain.BootstrapToken) error
	// Token returns the token of cluster, or ErrNotFound.
	Token(ctx context.Context, cluster string) (domain.BootstrapToken, error)
	// MarkTokenUsed marks the token of cluster used at at, atomically: it
	// reports true to exactly one caller, and only while the stored token
	// still has hash and is unused.
	MarkTokenUsed(ctx context.Context, cluster string, hash domain.TokenHash, at time.Time) (bool, error)
	// DeleteToken removes the token of cluster, if any.
	DeleteToken(ctx context.Context, cluster string) error
}

// ClusterStore keeps cluster records.
type ClusterStore interface {
	// Cluster returns the record of name, or ErrNotFound.
	Cluster(ctx context.Context, name string) (domain.Cluster, error)
	// Clusters returns every record, ordered by name.
	Clusters(ctx context.Context) ([]domain.Cluster, error)
	// UpdateCluster runs fn on the record of name (the zero Cluster with
	// exists false when there is none) and stores the result, atomically
	// with respect to other updates. An error from fn stores nothing and is
	// returned as it is.
	UpdateCluster(ctx context.Context, name string, fn func(c *domain.Cluster, exists bool) error) (domain.Cluster, error)
}

// RevocationStore is the revocation set shared by every replica.
type RevocationStore interface {
	// Revoke adds certificates; each is kept until it expires.
	Revoke(ctx context.Context, certs []domain.IssuedCert) error
	// Revoked returns the revoked certificates that have not expired at
	// now, by serial.
	Revoked(ctx context.Context, now time.Time) ([]revocation.Revoked, error)
}

// Signer is the certificate authority. It signs the request's key only:
// every name and usage comes from id and the signer's template.
type Signer interface {
	Sign(ctx context.Context, csr *x509.CertificateRequest, id pki.ID, ttl time.Duration, now time.Time) ([]*x509.Certificate, error)
	TrustBundlePEM() []byte
}

// CASource is where the CA that signs cluster certificates comes from: a
// directory, the operator's own PKI in files, or a Kubernetes Secret. Each
// is an adapter, and the composition root picks one from the
// configuration.
type CASource interface {
	// LoadCA returns the CA. created reports that the source held none, so
	// a development CA was made and kept there.
	LoadCA(ctx context.Context) (ca *pki.CA, created bool, err error)
	// String names the source in logs.
	String() string
}
