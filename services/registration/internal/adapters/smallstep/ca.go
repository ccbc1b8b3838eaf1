// Package smallstep is registration's certificate authority: the smallstep
// authority (github.com/smallstep/certificates/authority) embedded in the
// process, with no configuration file and no database. It signs with the
// intermediate of a libs/pki CA and libs/pki's leaf template, so that
// nothing but the public key is taken from a request.
package smallstep

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/smallstep/certificates/authority"
	"github.com/smallstep/certificates/authority/provisioner"
	"go.step.sm/crypto/x509util"
)

// fromRequest takes nothing from a request: the leaf is libs/pki's
// LeafTemplate, put in place by a certificate modifier, with the request's
// key.
const fromRequest = `{}`

// Backdate tolerates clocks that run a little behind the CA's.
const Backdate = pki.LeafBackdate

// CA signs cluster certificates with the embedded smallstep authority.
type CA struct {
	auth         *authority.Authority
	intermediate *x509.Certificate
	bundlePEM    []byte
}

var _ app.Signer = (*CA)(nil)

// New embeds an authority that signs with ca's intermediate and trusts
// ca's root.
func New(ca *pki.CA) (*CA, error) {
	auth, err := authority.NewEmbedded(
		authority.WithX509RootCerts(ca.Root),
		authority.WithX509Signer(ca.Intermediate, ca.Signer()),
	)
	if err != nil {
		return nil, fmt.Errorf("start smallstep authority: %w", err)
	}
	return &CA{auth: auth, intermediate: ca.Intermediate, bundlePEM: ca.TrustBundlePEM()}, nil
}

// TrustBundlePEM returns the root, PEM-encoded.
func (c *CA) TrustBundlePEM() []byte { return c.bundlePEM }

// certOptions adapts x509util options to the authority's sign options.
type certOptions []x509util.Option

func (o certOptions) Options(provisioner.SignOptions) []x509util.Option { return o }

// Sign signs csr's public key for id, valid from a Backdate before now for
// ttl (never past the intermediate). The caller has validated csr; the
// authority checks its signature again. It returns the leaf followed by the
// intermediate.
func (c *CA) Sign(ctx context.Context, csr *x509.CertificateRequest, id pki.ID, ttl time.Duration, now time.Time) ([]*x509.Certificate, error) {
	tmpl, err := pki.LeafTemplate(pki.LeafOptions{ID: id, TTL: ttl, Now: now}, c.intermediate)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	leaf := provisioner.CertificateModifierFunc(func(cert *x509.Certificate, _ provisioner.SignOptions) error {
		pub, alg := cert.PublicKey, cert.PublicKeyAlgorithm
		*cert = *tmpl
		cert.PublicKey, cert.PublicKeyAlgorithm = pub, alg
		return nil
	})
	chain, err := c.auth.SignWithContext(ctx, csr, provisioner.SignOptions{},
		certOptions{x509util.WithTemplate(fromRequest, x509util.TemplateData{})}, leaf)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", id, err)
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("sign %s: the authority returned no certificate", id)
	}
	return chain, nil
}
