package domain

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Status is where a cluster is in its registration life.
type Status int

const (
	StatusUnknown Status = iota
	// StatusPendingApproval: known, but may not register until approved.
	StatusPendingApproval
	// StatusApproved: may register; no certificate issued yet.
	StatusApproved
	// StatusRegistered: holds (or held) a certificate.
	StatusRegistered
	// StatusDeregistered: its certificates are revoked; it must be created
	// again before it can register.
	StatusDeregistered
)

func (s Status) String() string {
	switch s {
	case StatusPendingApproval:
		return "PENDING_APPROVAL"
	case StatusApproved:
		return "APPROVED"
	case StatusRegistered:
		return "REGISTERED"
	case StatusDeregistered:
		return "DEREGISTERED"
	default:
		return "UNKNOWN"
	}
}

// Cluster errors.
var (
	ErrClusterNotFound = errors.New("cluster not found")
	ErrPendingApproval = errors.New("cluster is waiting for approval: run 'meshctl cluster approve'")
	ErrDeregistered    = errors.New("cluster has been deregistered: register it again with 'meshctl cluster register'")
)

// IssuedCert is a certificate issued to a cluster, kept until it expires so
// that deregistration can revoke it.
type IssuedCert struct {
	// Serial is the serial number in decimal, as platform.Identity names it.
	Serial   string
	NotAfter time.Time
}

// Cluster is the record of one workload cluster.
type Cluster struct {
	Name         string
	Status       Status
	AgentVersion string
	CreatedAt    time.Time
	FirstSeen    time.Time
	LastSeen     time.Time
	// Certs are the unexpired certificates issued to the cluster, newest
	// last.
	Certs []IssuedCert
}

// NewCluster returns the record of a cluster an operator creates:
// pre-approved unless approval is required.
func NewCluster(name string, requireApproval bool, now time.Time) Cluster {
	c := Cluster{Name: name, Status: StatusApproved, CreatedAt: now}
	if requireApproval {
		c.Status = StatusPendingApproval
	}
	return c
}

// Latest returns the newest certificate, if any.
func (c Cluster) Latest() (IssuedCert, bool) {
	if len(c.Certs) == 0 {
		return IssuedCert{}, false
	}
	return c.Certs[len(c.Certs)-1], true
}

// MayRegister says whether the cluster may be issued a certificate.
func (c Cluster) MayRegister() error {
	switch c.Status {
	case StatusApproved, StatusRegistered:
		return nil
	case StatusPendingApproval:
		return ErrPendingApproval
	case StatusDeregistered:
		return ErrDeregistered
	default:
		return fmt.Errorf("cluster %s has unknown status %d", c.Name, c.Status)
	}
}

// Recreate makes a deregistered cluster new again, for a second register.
// Other clusters keep their status: issuing a fresh token does not undo an
// approval nor skip one.
func (c *Cluster) Recreate(requireApproval bool, now time.Time) {
	if c.Status != StatusDeregistered {
		return
	}
	*c = NewCluster(c.Name, requireApproval, now)
}

// Approve lets a pending cluster register. Approving an approved or
// registered cluster changes nothing; a deregistered one must be created
// again first.
func (c *Cluster) Approve() error {
	switch c.Status {
	case StatusPendingApproval:
		c.Status = StatusApproved
		return nil
	case StatusApproved, StatusRegistered:
		return nil
	default:
		return ErrDeregistered
	}
}

// RecordIssued notes a certificate issued at now, and forgets certificates
// that have expired (they need no revocation).
func (c *Cluster) RecordIssued(cert IssuedCert, agentVersion string, now time.Time) {
	c.Status = StatusRegistered
	if agentVersion != "" {
		c.AgentVersion = agentVersion
	}
	if c.FirstSeen.IsZero() {
		c.FirstSeen = now
	}
	c.LastSeen = now
	c.Certs = slices.DeleteFunc(c.Certs, func(ic IssuedCert) bool { return !now.Before(ic.NotAfter) })
	c.Certs = append(c.Certs, cert)
}

// Deregister marks the cluster deregistered and returns the certificates
// that must be revoked: every one not yet expired.
func (c *Cluster) Deregister(now time.Time) []IssuedCert {
	c.Status = StatusDeregistered
	// The records stay, so that the cluster still shows its last serial.
	return slices.DeleteFunc(slices.Clone(c.Certs), func(ic IssuedCert) bool { return !now.Before(ic.NotAfter) })
}
