package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// Registrar signs cluster certificates.
type Registrar struct {
	tokens      TokenStore
	ca          Signer
	trustDomain string
	ttl         time.Duration
	log         *slog.Logger
	now         func() time.Time
}

// Issued is a signed certificate chain with the trust bundle.
type Issued struct {
	ChainPEM  []byte
	BundlePEM []byte
	ExpiresAt time.Time
	Serial    string
}

// NewRegistrar returns a registrar that signs certificates valid for ttl.
func NewRegistrar(tokens TokenStore, ca Signer, trustDomain string, ttl time.Duration, log *slog.Logger) *Registrar {
	return &Registrar{tokens: tokens, ca: ca, trustDomain: trustDomain, ttl: ttl, log: log, now: time.Now}
}

// Register checks the token for cluster and signs the CSR.
func (r *Registrar) Register(ctx context.Context, cluster, token string, csrPEM []byte, agentVersion string) (Issued, error) {
	if err := pki.ValidateName(cluster); err != nil {
		return Issued{}, fmt.Errorf("%w: cluster: %w", domain.ErrInvalidCSR, err)
	}
	hash, err := r.tokens.TokenHash(ctx, cluster)
	if err != nil && !errors.Is(err, ErrUnknownToken) {
		return Issued{}, fmt.Errorf("look up token: %w", err)
	}
	// Compare even for an unknown cluster, so that timing does not tell
	// which clusters exist.
	if !hash.Matches(token) || err != nil {
		r.log.Warn("registration refused: bad token", "cluster", cluster)
		return Issued{}, ErrUnknownToken
	}
	issued, err := r.sign(cluster, csrPEM)
	if err != nil {
		r.log.Warn("registration refused: bad CSR", "cluster", cluster, "error", err)
		return Issued{}, err
	}
	r.log.Info("cluster registered", "cluster", cluster, "serial", issued.Serial, "expires", issued.ExpiresAt, "agent_version", agentVersion)
	return issued, nil
}

// Renew signs a new CSR for the cluster named by the caller's certificate.
func (r *Registrar) Renew(ctx context.Context, cluster string, csrPEM []byte) (Issued, error) {
	issued, err := r.sign(cluster, csrPEM)
	if err != nil {
		return Issued{}, err
	}
	r.log.Info("cluster certificate renewed", "cluster", cluster, "serial", issued.Serial, "expires", issued.ExpiresAt)
	return issued, nil
}

// TrustBundle returns the roots to trust.
func (r *Registrar) TrustBundle() []byte { return r.ca.TrustBundlePEM() }

func (r *Registrar) sign(cluster string, csrPEM []byte) (Issued, error) {
	csr, err := pki.ParseCSR(csrPEM)
	if err != nil {
		return Issued{}, fmt.Errorf("%w: %w", domain.ErrInvalidCSR, err)
	}
	id := pki.ClusterID(r.trustDomain, cluster)
	if err := domain.ValidateCSR(csr, id); err != nil {
		return Issued{}, err
	}
	chain, err := r.ca.Sign(csr.PublicKey, pki.LeafOptions{ID: id, TTL: r.ttl, Now: r.now()})
	if err != nil {
		return Issued{}, fmt.Errorf("sign: %w", err)
	}
	return Issued{
		ChainPEM:  pki.EncodeCertificates(chain...),
		BundlePEM: r.ca.TrustBundlePEM(),
		ExpiresAt: chain[0].NotAfter,
		Serial:    chain[0].SerialNumber.Text(16),
	}, nil
}
