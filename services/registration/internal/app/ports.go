// Package app holds the registration use cases: trade a bootstrap token and
// a CSR for a cluster certificate, and renew it.
package app

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// ErrUnknownToken is returned when the token does not match. The message
// never says whether the cluster exists.
var ErrUnknownToken = errors.New("bootstrap token is not valid for this cluster")

// TokenStore looks up the token hash registered for a cluster.
type TokenStore interface {
	// TokenHash returns the hash for cluster, or ErrUnknownToken.
	TokenHash(ctx context.Context, cluster string) (domain.TokenHash, error)
}

// Signer is the certificate authority.
type Signer interface {
	Sign(pub crypto.PublicKey, opts pki.LeafOptions) ([]*x509.Certificate, error)
	TrustBundlePEM() []byte
}
