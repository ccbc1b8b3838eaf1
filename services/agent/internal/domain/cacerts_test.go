package domain_test

import (
	"testing"
	"time"

	"github.com/meshplane/meshplane/services/agent/internal/domain"
)

func TestCACertsRenewAtIsInTheWindowAndStable(t *testing.T) {
	nb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	na := nb.Add(1000 * time.Hour)
	seen := map[time.Time]bool{}
	for i := range 50 {
		serial := []byte{byte(i), byte(i * 7), 0x42}
		at := domain.CACertsRenewAt(nb, na, serial)
		if at.Before(nb.Add(750*time.Hour)) || at.After(nb.Add(800*time.Hour)) {
			t.Fatalf("serial %x: renew at %v, outside 75-80%% of the lifetime", serial, at)
		}
		if again := domain.CACertsRenewAt(nb, na, serial); !again.Equal(at) {
			t.Fatalf("serial %x: renew at %v, then %v", serial, at, again)
		}
		seen[at] = true
	}
	if len(seen) < 40 {
		t.Errorf("50 serials gave only %d renewal times: no jitter", len(seen))
	}
}

func TestDecideCACerts(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	want := domain.WantedCA{RootGeneration: "g1", TrustDomain: "td"}
	fresh := func() *domain.HeldCA {
		return &domain.HeldCA{Owned: true, Complete: true, RootGeneration: "g1", TrustDomain: "td",
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(99 * time.Hour), Serial: []byte{1}}
	}
	tests := []struct {
		name   string
		held   func() *domain.HeldCA
		action domain.CACertsAction
		reason string
	}{
		{"missing", func() *domain.HeldCA { return nil }, domain.CACertsIssue, domain.ReasonMissing},
		{"user's own", func() *domain.HeldCA { h := fresh(); h.Owned = false; return h }, domain.CACertsLeaveAlone, ""},
		{"user's own, even if expired", func() *domain.HeldCA {
			h := fresh()
			h.Owned, h.NotAfter = false, now.Add(-time.Hour)
			return h
		}, domain.CACertsLeaveAlone, ""},
		{"incomplete", func() *domain.HeldCA { h := fresh(); h.Complete = false; return h }, domain.CACertsIssue, domain.ReasonIncomplete},
		{"other root", func() *domain.HeldCA { h := fresh(); h.RootGeneration = "g0"; return h }, domain.CACertsIssue, domain.ReasonRootChanged},
		{"other trust domain", func() *domain.HeldCA { h := fresh(); h.TrustDomain = "x"; return h }, domain.CACertsIssue, domain.ReasonTrustDomainChanged},
		{"near expiry", func() *domain.HeldCA {
			h := fresh()
			h.NotBefore = now.Add(-81 * time.Hour)
			h.NotAfter = now.Add(19 * time.Hour)
			return h
		}, domain.CACertsIssue, domain.ReasonRenewal},
		{"current", fresh, domain.CACertsKeep, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := domain.DecideCACerts(want, tt.held(), now)
			if d.Action != tt.action || d.Reason != tt.reason {
				t.Errorf("decision %+v, want action %d reason %q", d, tt.action, tt.reason)
			}
			if d.Action == domain.CACertsKeep && !d.RenewAt.After(now) {
				t.Errorf("kept with renewal at %v, not after now", d.RenewAt)
			}
		})
	}
}
