// Package domain holds the registration rules: how bootstrap tokens are
// kept and compared, and which certificate requests may be signed.
package domain

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/meshplane/meshplane/libs/pki"
)

// ErrInvalidCSR is returned for a certificate request that may not be
// signed.
var ErrInvalidCSR = errors.New("invalid certificate request")

// TokenHash is the only form in which a bootstrap token is kept.
type TokenHash [sha256.Size]byte

// HashToken returns the hash of a bootstrap token.
func HashToken(token string) TokenHash { return sha256.Sum256([]byte(token)) }

// Matches compares a presented token with a stored hash in constant time.
func (h TokenHash) Matches(token string) bool {
	got := HashToken(token)
	return subtle.ConstantTimeCompare(h[:], got[:]) == 1
}

// ValidateCSR checks that a request may be signed for identity want: an
// accepted key type and size, exactly one URI SAN equal to want, no other
// SANs, and no CA request. The signature is checked by pki.ParseCSR.
func ValidateCSR(csr *x509.CertificateRequest, want pki.ID) error {
	if err := checkKey(csr.PublicKey); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidCSR, err)
	}
	if n := len(csr.DNSNames) + len(csr.EmailAddresses) + len(csr.IPAddresses); n > 0 {
		return fmt.Errorf("%w: only a URI SAN is allowed, found %d DNS, e-mail or IP SANs", ErrInvalidCSR, n)
	}
	if len(csr.URIs) != 1 {
		return fmt.Errorf("%w: want exactly one URI SAN %s, found %d", ErrInvalidCSR, want, len(csr.URIs))
	}
	if got := csr.URIs[0].String(); got != want.String() {
		return fmt.Errorf("%w: URI SAN is %s, want %s", ErrInvalidCSR, got, want)
	}
	for _, ext := range csr.Extensions {
		// basicConstraints: a CA request is refused whatever it says.
		if ext.Id.Equal([]int{2, 5, 29, 19}) {
			return fmt.Errorf("%w: basic constraints (a CA request) are not allowed", ErrInvalidCSR)
		}
	}
	return nil
}

func checkKey(pub any) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return fmt.Errorf("ECDSA curve %s is not allowed; use P-256 or P-384", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return fmt.Errorf("RSA key of %d bits is too weak; use at least 2048", k.N.BitLen())
		}
	default:
		return fmt.Errorf("key type %T is not allowed", pub)
	}
	return nil
}
