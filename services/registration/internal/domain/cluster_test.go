package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

func TestClusterLifecycle(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := domain.NewCluster("east", true, now)
	if err := c.MayRegister(); !errors.Is(err, domain.ErrPendingApproval) {
		t.Fatalf("pending: MayRegister = %v", err)
	}
	if err := c.Approve(); err != nil || c.Status != domain.StatusApproved {
		t.Fatalf("Approve: %v, status %v", err, c.Status)
	}
	c.RecordIssued(domain.IssuedCert{Serial: "1", NotAfter: now.Add(time.Hour)}, "v1", now)
	c.RecordIssued(domain.IssuedCert{Serial: "2", NotAfter: now.Add(3 * time.Hour)}, "", now.Add(2*time.Hour))
	if c.Status != domain.StatusRegistered || c.AgentVersion != "v1" || !c.FirstSeen.Equal(now) || !c.LastSeen.Equal(now.Add(2*time.Hour)) {
		t.Fatalf("after issuing: %+v", c)
	}
	// The expired first certificate was forgotten.
	if len(c.Certs) != 1 || c.Certs[0].Serial != "2" {
		t.Fatalf("certs %v, want only the live one", c.Certs)
	}
	c.RecordIssued(domain.IssuedCert{Serial: "3", NotAfter: now.Add(4 * time.Hour)}, "v2", now.Add(2*time.Hour))
	revoke := c.Deregister(now.Add(150 * time.Minute))
	if len(revoke) != 2 || c.Status != domain.StatusDeregistered {
		t.Fatalf("Deregister revoked %v, status %v", revoke, c.Status)
	}
	if latest, _ := c.Latest(); latest.Serial != "3" {
		t.Errorf("a deregistered cluster still shows its last serial; got %q", latest.Serial)
	}
	if err := c.MayRegister(); !errors.Is(err, domain.ErrDeregistered) {
		t.Fatalf("deregistered: MayRegister = %v", err)
	}
	if err := c.Approve(); !errors.Is(err, domain.ErrDeregistered) {
		t.Fatalf("Approve of a deregistered cluster = %v", err)
	}
	c.Recreate(false, now.Add(5*time.Hour))
	if c.Status != domain.StatusApproved || len(c.Certs) != 0 || c.AgentVersion != "" {
		t.Fatalf("Recreate: %+v", c)
	}
	// Recreate leaves a live cluster alone.
	c.Status = domain.StatusRegistered
	c.Recreate(true, now)
	if c.Status != domain.StatusRegistered {
		t.Fatalf("Recreate changed a registered cluster to %v", c.Status)
	}
}
