package domain

import (
	"hash/fnv"
	"time"
)

// The Istio plug-in CA ("cacerts") rules: when the agent may keep the
// intermediate CA it holds for a mesh, when it must ask for a new one, and
// when the Secret is not its to touch.

// Renewal window of an istiod intermediate CA: it is renewed when between
// 75% and 80% of its lifetime has passed. The intermediate signs every
// workload certificate of the mesh, so it is renewed earlier than the
// agent's own certificate: a failing registration service then has a
// fifth of the lifetime (73 days of a year) to come back.
const (
	caRenewAfter = 0.75
	caJitter     = 0.05
)

// CACertsRenewAt returns when an intermediate valid from notBefore to
// notAfter is renewed. The jitter comes from the certificate's serial
// number, so that it is the same after a restart and differs between
// clusters whose intermediates were signed at the same moment.
func CACertsRenewAt(notBefore, notAfter time.Time, serial []byte) time.Time {
	h := fnv.New64a()
	h.Write(serial)
	jitter := float64(h.Sum64()>>11) / float64(1<<53)
	life := notAfter.Sub(notBefore)
	return notBefore.Add(time.Duration(float64(life) * (caRenewAfter + caJitter*jitter)))
}

// HeldCA is what the cluster holds where an IssuedCertificate asks for a CA.
type HeldCA struct {
	// Owned: the Secret carries this install's and cluster's ownership
	// labels. A Secret without them is the user's.
	Owned bool
	// From the Secret's annotations.
	RootGeneration string
	TrustDomain    string
	// From ca-cert.pem; zero when it is missing or does not parse.
	NotBefore, NotAfter time.Time
	Serial              []byte
	// Complete: ca-cert.pem, ca-key.pem, root-cert.pem and cert-chain.pem
	// are all present and ca-cert.pem parses.
	Complete bool
}

// CACertsAction is what to do about one IssuedCertificate.
type CACertsAction int

const (
	// CACertsKeep: the held CA is current; look again at RenewAt.
	CACertsKeep CACertsAction = iota + 1
	// CACertsIssue: ask for a new intermediate and write it.
	CACertsIssue
	// CACertsLeaveAlone: the Secret is the user's; never overwrite it.
	CACertsLeaveAlone
)

// Reasons for CACertsIssue, used in logs and as a metric label.
const (
	ReasonMissing            = "missing"
	ReasonIncomplete         = "incomplete"
	ReasonRootChanged        = "root_changed"
	ReasonTrustDomainChanged = "trust_domain_changed"
	ReasonRenewal            = "renewal"
)

// CACertsDecision is the outcome of DecideCACerts.
type CACertsDecision struct {
	Action CACertsAction
	// Reason says why a new intermediate is needed (CACertsIssue only).
	Reason string
	// RenewAt is when a kept CA is due (CACertsKeep only).
	RenewAt time.Time
}

// WantedCA is what an IssuedCertificate asks for, as far as the decision
// goes. A new lifetime or key algorithm takes effect at the next renewal;
// a new root or trust domain at once.
type WantedCA struct {
	RootGeneration string
	TrustDomain    string
}

// DecideCACerts decides what to do about a wanted CA given what the cluster
// holds (nil: no Secret) at now.
func DecideCACerts(want WantedCA, held *HeldCA, now time.Time) CACertsDecision {
	switch {
	case held == nil:
		return CACertsDecision{Action: CACertsIssue, Reason: ReasonMissing}
	case !held.Owned:
		return CACertsDecision{Action: CACertsLeaveAlone}
	case !held.Complete:
		return CACertsDecision{Action: CACertsIssue, Reason: ReasonIncomplete}
	case held.RootGeneration != want.RootGeneration:
		return CACertsDecision{Action: CACertsIssue, Reason: ReasonRootChanged}
	case held.TrustDomain != want.TrustDomain:
		return CACertsDecision{Action: CACertsIssue, Reason: ReasonTrustDomainChanged}
	}
	renewAt := CACertsRenewAt(held.NotBefore, held.NotAfter, held.Serial)
	if !now.Before(renewAt) {
		return CACertsDecision{Action: CACertsIssue, Reason: ReasonRenewal}
	}
	return CACertsDecision{Action: CACertsKeep, RenewAt: renewAt}
}
