package domain

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// Token errors. ErrTokenInvalid never says whether the cluster exists or had
// a token; the others are only returned to a caller that presented the right
// token, so they tell a stranger nothing.
var (
	ErrTokenInvalid = errors.New("bootstrap token is not valid for this cluster")
	ErrTokenExpired = errors.New("bootstrap token has expired; make a new one with 'meshctl cluster register'")
	ErrTokenUsed    = errors.New("bootstrap token has already been used; make a new one with 'meshctl cluster register'")
)

// TokenPrefix starts every token that Meshplane generates, so that a leaked
// token is easy to recognise (secret scanners, logs).
const TokenPrefix = "mpbt_"

// MaxTokenLen bounds a presented token, so that hashing a hostile input
// costs nothing worth measuring.
const MaxTokenLen = 512

const tokenEntropyBytes = 32

// NewToken returns a new random bootstrap token: TokenPrefix followed by 256
// random bits, base64url-encoded.
func NewToken() (string, error) {
	b := make([]byte, tokenEntropyBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate bootstrap token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// ParseToken checks that a presented token is well-formed before anything is
// looked up: 1 to MaxTokenLen printable ASCII characters without spaces. It
// accepts the static tokens of a bootstrap tokens file as well as generated
// ones, so it checks form only. The error never echoes the token.
func ParseToken(s string) error {
	if s == "" {
		return fmt.Errorf("%w: no token", ErrTokenInvalid)
	}
	if len(s) > MaxTokenLen {
		return fmt.Errorf("%w: token longer than %d bytes", ErrTokenInvalid, MaxTokenLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: token has a character that is not printable ASCII at byte %d", ErrTokenInvalid, i)
		}
	}
	return nil
}

// BootstrapToken is a per-cluster token as it is stored: its hash, never
// the token.
type BootstrapToken struct {
	Cluster   string
	Hash      TokenHash
	CreatedAt time.Time
	// ExpiresAt is when the token stops working; zero means never.
	ExpiresAt time.Time
	// UsedAt is when the token was traded for a certificate; zero means
	// unused.
	UsedAt time.Time
}

// NewBootstrapToken makes a token for cluster valid for ttl from now and
// returns it with the record to store.
func NewBootstrapToken(cluster string, now time.Time, ttl time.Duration) (string, BootstrapToken, error) {
	if ttl <= 0 {
		return "", BootstrapToken{}, errors.New("bootstrap token lifetime must be positive")
	}
	tok, err := NewToken()
	if err != nil {
		return "", BootstrapToken{}, err
	}
	return tok, BootstrapToken{Cluster: cluster, Hash: HashToken(tok), CreatedAt: now, ExpiresAt: now.Add(ttl)}, nil
}

// Check says whether presented may be traded for a certificate at now. The
// hash is compared first, in constant time, so that the expired and used
// answers go only to the token's holder.
func (t BootstrapToken) Check(presented string, now time.Time) error {
	if !t.Hash.Matches(presented) {
		return ErrTokenInvalid
	}
	if !t.UsedAt.IsZero() {
		return ErrTokenUsed
	}
	if !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt) {
		return ErrTokenExpired
	}
	return nil
}
