package app

import (
	"context"
	"crypto"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
)

// Identity obtains and holds the agent's client certificate.
type Identity struct {
	cluster     string
	trustDomain string
	token       func() (string, error)
	store       CredentialStore
	registrar   Registrar
	log         *slog.Logger

	// now and after replace the clock in tests.
	now   func() time.Time
	after func(time.Duration) <-chan time.Time

	mu   sync.RWMutex
	cert *tls.Certificate
	cred Credentials
}

// NewIdentity returns an identity for cluster. token reads the bootstrap
// token when registration is needed; it is not kept.
func NewIdentity(cluster, trustDomain string, token func() (string, error), store CredentialStore, registrar Registrar, log *slog.Logger) *Identity {
	return &Identity{cluster: cluster, trustDomain: trustDomain, token: token, store: store, registrar: registrar, log: log}
}

// Ensure loads stored credentials that are still valid, or registers with
// the bootstrap token, retrying with backoff until ctx ends.
func (i *Identity) Ensure(ctx context.Context) error {
	cred, err := i.store.Load(ctx)
	if err == nil && time.Now().Before(cred.NotAfter) {
		err := i.adoptStored(cred)
		if err == nil {
			i.log.Info("using stored agent certificate", "expires", cred.NotAfter)
			return nil
		}
		i.log.Warn("stored credentials are unusable; registering again", "error", err)
	} else if err != nil && !errors.Is(err, ErrNoCredentials) {
		i.log.Warn("reading stored credentials failed; registering again", "error", err)
	}
	b := Backoff{Min: 200 * time.Millisecond, Max: 30 * time.Second}
	for {
		err := i.register(ctx)
		if err == nil {
			return nil
		}
		i.log.Warn("registration failed; retrying", "error", err)
		if !b.Wait(ctx) {
			return ctx.Err()
		}
	}
}

func (i *Identity) register(ctx context.Context) error {
	token, err := i.token()
	if err != nil {
		return fmt.Errorf("read bootstrap token: %w", err)
	}
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	csr, err := pki.NewCSR(key, pki.ClusterID(i.trustDomain, i.cluster))
	if err != nil {
		return err
	}
	chain, bundle, err := i.registrar.Register(ctx, i.cluster, token, csr)
	if err != nil {
		return fmt.Errorf("register cluster %q: %w", i.cluster, err)
	}
	if err := i.install(ctx, key, chain, bundle); err != nil {
		return err
	}
	_, notAfter, _ := i.validity()
	i.log.Info("registered", "cluster", i.cluster, "expires", notAfter)
	return nil
}

// install adopts a newly signed chain for key and saves it, after checking
// that it names this cluster.
func (i *Identity) install(ctx context.Context, key crypto.Signer, chain, bundle []byte) error {
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return err
	}
	certs, err := pki.ParseCertificates(chain)
	if err != nil {
		return fmt.Errorf("the management plane returned a bad certificate: %w", err)
	}
	cred := Credentials{CertPEM: chain, KeyPEM: keyPEM, BundlePEM: bundle, NotAfter: certs[0].NotAfter}
	if err := i.adoptStored(cred); err != nil {
		return err
	}
	if err := i.store.Save(ctx, cred); err != nil {
		return fmt.Errorf("save credentials: %w", err)
	}
	return nil
}

// adoptStored adopts stored credentials only if they name this cluster: a
// state directory kept across a change of --cluster or --trust-domain
// holds another cluster's certificate, and with it the agent would push
// and apply as that cluster.
func (i *Identity) adoptStored(c Credentials) error {
	certs, err := pki.ParseCertificates(c.CertPEM)
	if err != nil {
		return fmt.Errorf("stored certificate: %w", err)
	}
	id, err := pki.IDFromCertificate(certs[0])
	if err != nil {
		return fmt.Errorf("stored certificate: %w", err)
	}
	if want := pki.ClusterID(i.trustDomain, i.cluster); id != want {
		return fmt.Errorf("stored certificate names %s, not %s", id, want)
	}
	return i.adopt(c)
}

func (i *Identity) adopt(c Credentials) error {
	cert, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		return fmt.Errorf("load agent certificate: %w", err)
	}
	i.mu.Lock()
	i.cert, i.cred = &cert, c
	i.mu.Unlock()
	return nil
}

// Certificate returns the current client certificate, for TLS.
func (i *Identity) Certificate() (*tls.Certificate, error) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	if i.cert == nil {
		return nil, errors.New("agent has no certificate yet")
	}
	return i.cert, nil
}
