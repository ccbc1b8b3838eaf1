package app

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// Stores are the ports the registrar keeps its state in.
type Stores struct {
	Tokens      TokenStore
	Clusters    ClusterStore
	Revocations RevocationStore
	// Static may be nil: no bootstrap tokens file.
	Static StaticTokens
}

// Options are the registrar's settings.
type Options struct {
	TrustDomain string
	// CertTTL is the lifetime of cluster certificates.
	CertTTL time.Duration
	// TokenTTL is the default lifetime of a bootstrap token.
	TokenTTL time.Duration
	// RelayToken, when set, is the hash of the shared relay identity token
	// (compatibility mode): any cluster may present it, and stays pending
	// until an operator approves it.
	RelayToken *domain.TokenHash
	// Changes, when set, learns of every change to a cluster record (the
	// KubernetesCluster mirror).
	Changes ClusterChanges
	// Reseed, when set, puts back a record the store lost from its durable
	// copy before a renewal, a lookup or a deregistration finds it missing.
	Reseed *Reseeder
	// Reserved are names no workload cluster may take: the install name,
	// under which ingest keeps the management cluster's own input.
	Reserved []string
	Log      *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Registrar signs cluster certificates and keeps cluster records.
type Registrar struct {
	stores  Stores
	ca      Signer
	revoked *Revocations
	opts    Options
	log     *slog.Logger
	now     func() time.Time
}

// Issued is a signed certificate chain with the trust bundle.
type Issued struct {
	ChainPEM  []byte
	BundlePEM []byte
	ExpiresAt time.Time
	// Serial is the leaf's serial number in decimal.
	Serial string
}

// NewRegistrar returns a registrar. revoked, when not nil, learns of
// revocations at once, before the store's next refresh.
func NewRegistrar(stores Stores, ca Signer, revoked *Revocations, opts Options) *Registrar {
	r := &Registrar{stores: stores, ca: ca, revoked: revoked, opts: opts, log: opts.Log, now: opts.Now}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r
}

// notReserved refuses a reserved cluster name.
func (r *Registrar) notReserved(cluster string) error {
	if slices.Contains(r.opts.Reserved, cluster) {
		return fmt.Errorf("cluster name %q is reserved: it names the management cluster's own input (the install name); use another name for the workload cluster", cluster)
	}
	return nil
}

// credential is what a Register call proved with its token.
type credential int

const (
	credNone    credential = iota
	credCluster            // the cluster's own single-use token
	credStatic             // a token from the bootstrap tokens file
	credRelay              // the shared relay identity token
)

// Register checks the token for cluster and signs the CSR. Nothing is
// signed, and a single-use token is not spent, unless the token, the CSR
// and the cluster's status all allow it.
func (r *Registrar) Register(ctx context.Context, cluster, token string, csrPEM []byte, agentVersion string) (Issued, error) {
	if err := pki.ValidateName(cluster); err != nil {
		return Issued{}, fmt.Errorf("%w: cluster: %w", domain.ErrInvalidCSR, err)
	}
	if err := r.notReserved(cluster); err != nil {
		r.log.WarnContext(ctx, "registration refused: reserved cluster name", "cluster", cluster)
		return Issued{}, fmt.Errorf("%w: %w", domain.ErrInvalidCSR, err)
	}
	if err := domain.ParseToken(token); err != nil {
		r.log.WarnContext(ctx, "registration refused: malformed token", "cluster", cluster)
		return Issued{}, domain.ErrTokenInvalid
	}
	now := r.now()
	cred, tok, err := r.authenticate(ctx, cluster, token, now)
	if err != nil {
		r.log.WarnContext(ctx, "registration refused: bad token", "cluster", cluster, "reason", err)
		return Issued{}, err
	}
	csr, id, err := r.parseCSR(cluster, csrPEM)
	if err != nil {
		r.log.WarnContext(ctx, "registration refused: bad CSR", "cluster", cluster, "error", err)
		return Issued{}, err
	}
	if err := r.admit(ctx, cluster, cred, now); err != nil {
		r.log.WarnContext(ctx, "registration refused", "cluster", cluster, "reason", err)
		return Issued{}, err
	}
	if cred == credCluster {
		ok, err := r.stores.Tokens.MarkTokenUsed(ctx, cluster, tok.Hash, now)
		if err != nil {
			return Issued{}, fmt.Errorf("spend bootstrap token: %w", err)
		}
		if !ok {
			r.log.WarnContext(ctx, "registration refused: token used concurrently", "cluster", cluster)
			return Issued{}, domain.ErrTokenUsed
		}
	}
	issued, err := r.issue(ctx, csr, id, agentVersion, now)
	if err != nil {
		return Issued{}, err
	}
	r.log.InfoContext(ctx, "cluster registered", "cluster", cluster, "serial", issued.Serial, "expires", issued.ExpiresAt, "agent_version", agentVersion)
	return issued, nil
}

// authenticate finds which credential token is. Every comparison runs
// whatever the earlier ones found, so that timing does not tell which
// clusters exist or have tokens.
func (r *Registrar) authenticate(ctx context.Context, cluster, token string, now time.Time) (credential, domain.BootstrapToken, error) {
	tok, err := r.stores.Tokens.Token(ctx, cluster)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return credNone, tok, fmt.Errorf("look up bootstrap token: %w", err)
	}
	haveTok := err == nil
	tokErr := tok.Check(token, now)

	var static domain.TokenHash
	haveStatic := false
	if r.stores.Static != nil {
		h, err := r.stores.Static.TokenHash(ctx, cluster)
		if err != nil && !errors.Is(err, ErrUnknownToken) {
			return credNone, tok, fmt.Errorf("look up bootstrap token: %w", err)
		}
		static, haveStatic = h, err == nil
	}
	staticOK := static.Matches(token)

	var relay domain.TokenHash
	if r.opts.RelayToken != nil {
		relay = *r.opts.RelayToken
	}
	relayOK := relay.Matches(token)

	switch {
	case haveTok && !errors.Is(tokErr, domain.ErrTokenInvalid):
		// The cluster's own token, right but perhaps expired or used.
		return credCluster, tok, tokErr
	case haveStatic && staticOK:
		return credStatic, tok, nil
	case r.opts.RelayToken != nil && relayOK:
		return credRelay, tok, nil
	default:
		return credNone, tok, domain.ErrTokenInvalid
	}
}

// admit checks that the cluster's status lets it register with cred. A
// cluster that presents the shared relay token is recorded as pending the
// first time, so that an operator sees it and can approve it.
func (r *Registrar) admit(ctx context.Context, cluster string, cred credential, now time.Time) error {
	switch cred {
	case credRelay:
		c, err := r.stores.Clusters.UpdateCluster(ctx, cluster, func(c *domain.Cluster, exists bool) error {
			if !exists {
				*c = domain.NewCluster(cluster, true, now)
			}
			c.LastSeen = now
			return nil
		})
		if err != nil {
			return fmt.Errorf("record cluster: %w", err)
		}
		r.changed(cluster)
		return c.MayRegister()
	case credStatic:
		c, err := r.stores.Clusters.Cluster(ctx, cluster)
		if errors.Is(err, ErrNotFound) {
			// The tokens file is the operator's approval.
			return nil
		}
		if err != nil {
			return fmt.Errorf("look up cluster: %w", err)
		}
		return c.MayRegister()
	default:
		c, err := r.stores.Clusters.Cluster(ctx, cluster)
		if errors.Is(err, ErrNotFound) {
			// A token without its cluster: deleted underneath us.
			return domain.ErrTokenInvalid
		}
		if err != nil {
			return fmt.Errorf("look up cluster: %w", err)
		}
		return c.MayRegister()
	}
}

// Renew signs a new CSR for the cluster named by the caller's certificate.
// The platform has already refused revoked and expired certificates; this
// refuses a deregistered cluster whose old certificate has not been seen
// as revoked yet.
func (r *Registrar) Renew(ctx context.Context, cluster string, csrPEM []byte, agentVersion string) (Issued, error) {
	csr, id, err := r.parseCSR(cluster, csrPEM)
	if err != nil {
		return Issued{}, err
	}
	c, err := r.lookup(ctx, cluster)
	switch {
	case errors.Is(err, ErrNotFound):
		// An in-memory store that restarted: the certificate, which this CA
		// signed, is the proof of an earlier registration.
	case err != nil:
		return Issued{}, fmt.Errorf("look up cluster: %w", err)
	default:
		if err := c.MayRegister(); err != nil {
			return Issued{}, err
		}
	}
	issued, err := r.issue(ctx, csr, id, agentVersion, r.now())
	if err != nil {
		return Issued{}, err
	}
	r.log.InfoContext(ctx, "cluster certificate renewed", "cluster", cluster, "serial", issued.Serial, "expires", issued.ExpiresAt)
	return issued, nil
}

// TrustBundle returns the roots to trust.
func (r *Registrar) TrustBundle() []byte { return r.ca.TrustBundlePEM() }

func (r *Registrar) parseCSR(cluster string, csrPEM []byte) (*x509.CertificateRequest, pki.ID, error) {
	csr, err := pki.ParseCSR(csrPEM)
	if err != nil {
		return nil, pki.ID{}, fmt.Errorf("%w: %w", domain.ErrInvalidCSR, err)
	}
	id := pki.ClusterID(r.opts.TrustDomain, cluster)
	if err := domain.ValidateCSR(csr, id); err != nil {
		return nil, pki.ID{}, err
	}
	return csr, id, nil
}

// issue signs and records the certificate. If the cluster was deregistered
// while it was being signed, the new certificate is revoked at once.
func (r *Registrar) issue(ctx context.Context, csr *x509.CertificateRequest, id pki.ID, agentVersion string, now time.Time) (Issued, error) {
	chain, err := r.ca.Sign(ctx, csr, id, r.opts.CertTTL, now)
	if err != nil {
		return Issued{}, fmt.Errorf("sign: %w", err)
	}
	leaf := chain[0]
	cert := domain.IssuedCert{Serial: leaf.SerialNumber.String(), NotAfter: leaf.NotAfter}
	_, err = r.stores.Clusters.UpdateCluster(ctx, id.Name, func(c *domain.Cluster, exists bool) error {
		if !exists {
			*c = domain.NewCluster(id.Name, false, now)
		}
		if err := c.MayRegister(); err != nil {
			return err
		}
		c.RecordIssued(cert, agentVersion, now)
		return nil
	})
	if err != nil {
		if rerr := r.revoke(ctx, []domain.IssuedCert{cert}); rerr != nil {
			r.log.ErrorContext(ctx, "revoke a certificate issued to a cluster that could not be recorded", "cluster", id.Name, "serial", cert.Serial, "error", rerr)
		}
		if errors.Is(err, domain.ErrDeregistered) || errors.Is(err, domain.ErrPendingApproval) {
			return Issued{}, err
		}
		return Issued{}, fmt.Errorf("record cluster: %w", err)
	}
	r.changed(id.Name)
	return Issued{
		ChainPEM:  pki.EncodeCertificates(chain...),
		BundlePEM: r.ca.TrustBundlePEM(),
		ExpiresAt: leaf.NotAfter,
		Serial:    cert.Serial,
	}, nil
}

// changed tells the mirror, if any, that a record changed.
// lookup returns the record of cluster, re-seeding it from its durable
// copy when the store lost it.
func (r *Registrar) lookup(ctx context.Context, cluster string) (domain.Cluster, error) {
	if r.opts.Reseed != nil {
		return r.opts.Reseed.Reseed(ctx, cluster)
	}
	return r.stores.Clusters.Cluster(ctx, cluster)
}

func (r *Registrar) changed(cluster string) {
	if r.opts.Changes != nil {
		r.opts.Changes.ClusterChanged(cluster)
	}
}

// revoke adds certs to the shared set, and to this replica's cache at once
// even when the store fails, so that at least this replica refuses them.
func (r *Registrar) revoke(ctx context.Context, certs []domain.IssuedCert) error {
	return NewRevoker(r.stores.Revocations, r.revoked).Revoke(ctx, certs)
}
