package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok, err := domain.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok, domain.TokenPrefix) || len(tok) != len(domain.TokenPrefix)+43 {
			t.Fatalf("token %q: want %s and 43 base64url characters", tok, domain.TokenPrefix)
		}
		if err := domain.ParseToken(tok); err != nil {
			t.Fatalf("ParseToken of a new token: %v", err)
		}
		if seen[tok] {
			t.Fatal("NewToken repeated itself")
		}
		seen[tok] = true
	}
}

func TestBootstrapTokenCheck(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tok, rec, err := domain.NewBootstrapToken("east", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	used := rec
	used.UsedAt = now
	for _, tc := range []struct {
		name      string
		rec       domain.BootstrapToken
		presented string
		at        time.Time
		want      error
	}{
		{"fresh", rec, tok, now, nil},
		{"just before expiry", rec, tok, now.Add(time.Hour - time.Nanosecond), nil},
		{"at expiry", rec, tok, now.Add(time.Hour), domain.ErrTokenExpired},
		{"used", used, tok, now, domain.ErrTokenUsed},
		{"wrong token", rec, tok + "x", now, domain.ErrTokenInvalid},
		// Only the holder learns that a token expired or was used.
		{"wrong token, expired", rec, "guess", now.Add(2 * time.Hour), domain.ErrTokenInvalid},
		{"wrong token, used", used, "guess", now, domain.ErrTokenInvalid},
		{"no expiry", domain.BootstrapToken{Hash: domain.HashToken("static")}, "static", now.Add(1000 * time.Hour), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.rec.Check(tc.presented, tc.at); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("Check = %v, want %v", err, tc.want)
			}
		})
	}
	if _, _, err := domain.NewBootstrapToken("east", now, 0); err == nil {
		t.Fatal("NewBootstrapToken accepted a zero lifetime")
	}
}

func TestParseToken(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"east-token", true},
		{"mpbt_" + strings.Repeat("A", 43), true},
		{strings.Repeat("x", domain.MaxTokenLen), true},
		{"", false},
		{strings.Repeat("x", domain.MaxTokenLen+1), false},
		{"has space", false},
		{"newline\n", false},
		{"tab\t", false},
		{"nul\x00", false},
		{"del\x7f", false},
		{"é", false},
	} {
		err := domain.ParseToken(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseToken(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
		if err != nil {
			if !errors.Is(err, domain.ErrTokenInvalid) {
				t.Errorf("ParseToken(%q) error %v does not wrap ErrTokenInvalid", tc.in, err)
			}
			if len(tc.in) > 3 && strings.Contains(err.Error(), tc.in) {
				t.Errorf("ParseToken error echoes the token: %v", err)
			}
		}
	}
}

// FuzzParseToken: parsing never panics, accepts only printable ASCII of a
// bounded length, never echoes the token, and an accepted token matches its
// own hash and nothing else's.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"", "east-token", "mpbt_abc", "a b", "\x00", strings.Repeat("z", 600), "é", "sha256:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := domain.ParseToken(s)
		if err != nil {
			if !errors.Is(err, domain.ErrTokenInvalid) {
				t.Fatalf("error %v does not wrap ErrTokenInvalid", err)
			}
			if len(s) >= 8 && strings.Contains(err.Error(), s) {
				t.Fatalf("error echoes the token: %v", err)
			}
			return
		}
		if s == "" || len(s) > domain.MaxTokenLen {
			t.Fatalf("accepted a token of %d bytes", len(s))
		}
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] > '~' {
				t.Fatalf("accepted byte %#x", s[i])
			}
		}
		rec := domain.BootstrapToken{Hash: domain.HashToken(s)}
		if err := rec.Check(s, time.Now()); err != nil {
			t.Fatalf("token does not match its own hash: %v", err)
		}
		if err := rec.Check(s+"x", time.Now()); !errors.Is(err, domain.ErrTokenInvalid) {
			t.Fatalf("a longer token matched: %v", err)
		}
	})
}
