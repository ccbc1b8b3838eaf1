package app

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
)

// Renewer asks the registration service for a new certificate, over mTLS
// with the current one.
type Renewer interface {
	Renew(ctx context.Context, csrPEM []byte) (chainPEM, bundlePEM []byte, err error)
}

// Renewal window: a certificate is renewed when between 20% and 25% of its
// lifetime remains. The jitter spreads renewals of agents registered at the
// same moment.
const (
	renewMinRemaining = 0.20
	renewJitter       = 0.05
)

// RenewAt returns when a certificate valid from notBefore to notAfter is
// renewed, for jitter in [0, 1).
func RenewAt(notBefore, notAfter time.Time, jitter float64) time.Time {
	life := notAfter.Sub(notBefore)
	remaining := time.Duration(float64(life) * (renewMinRemaining + renewJitter*jitter))
	return notAfter.Add(-remaining)
}

// RunRenewal keeps the agent's certificate fresh until ctx ends: it renews
// in the renewal window, retries with backoff on failure, and registers
// again with the bootstrap token if the certificate expired anyway (after a
// long outage, say).
func (i *Identity) RunRenewal(ctx context.Context, r Renewer) error {
	for ctx.Err() == nil {
		notBefore, notAfter, err := i.validity()
		if err != nil {
			return err
		}
		at := RenewAt(notBefore, notAfter, rand.Float64())
		if !i.sleepUntil(ctx, at) {
			return nil
		}
		b := Backoff{Min: time.Second, Max: max(time.Second, notAfter.Sub(notBefore)/20)}
		for ctx.Err() == nil {
			if !i.clock().Before(notAfter) {
				i.log.Warn("agent certificate expired before it could be renewed; registering again with the bootstrap token")
				if err := i.register(ctx); err == nil {
					break
				} else {
					i.log.Warn("registration failed; retrying", "error", err)
				}
			} else if err := i.renew(ctx, r); err == nil {
				break
			} else {
				i.log.Warn("certificate renewal failed; retrying", "error", err, "expires", notAfter)
			}
			if !i.sleepUntil(ctx, i.clock().Add(b.Next())) {
				return nil
			}
		}
	}
	return nil
}

func (i *Identity) clock() time.Time {
	if i.now != nil {
		return i.now()
	}
	return time.Now()
}

// sleepUntil waits until t by the identity's clock; it reports whether ctx
// is still live.
func (i *Identity) sleepUntil(ctx context.Context, t time.Time) bool {
	d := t.Sub(i.clock())
	if d <= 0 {
		return ctx.Err() == nil
	}
	after := i.after
	if after == nil {
		after = time.After
	}
	select {
	case <-ctx.Done():
		return false
	case <-after(d):
		return true
	}
}

func (i *Identity) validity() (notBefore, notAfter time.Time, err error) {
	i.mu.RLock()
	certPEM := i.cred.CertPEM
	i.mu.RUnlock()
	certs, err := pki.ParseCertificates(certPEM)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("current certificate: %w", err)
	}
	return certs[0].NotBefore, certs[0].NotAfter, nil
}

func (i *Identity) renew(ctx context.Context, r Renewer) error {
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	csr, err := pki.NewCSR(key, pki.ClusterID(i.trustDomain, i.cluster))
	if err != nil {
		return err
	}
	chain, bundle, err := r.Renew(ctx, csr)
	if err != nil {
		return fmt.Errorf("renew: %w", err)
	}
	if err := i.install(ctx, key, chain, bundle); err != nil {
		return err
	}
	_, notAfter, _ := i.validity()
	i.log.Info("agent certificate renewed", "expires", notAfter)
	return nil
}
