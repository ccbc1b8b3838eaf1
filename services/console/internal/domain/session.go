package domain

import "time"

// User is who a token belongs to, as TokenReview answered. The token itself
// is never kept.
type User struct {
	Username string
	UID      string
	Groups   []string
	Extra    map[string][]string
}

// Session is a signed-in browser. ID and CSRF are secrets: never log them.
type Session struct {
	ID       string
	CSRF     string
	User     User
	Created  time.Time
	LastSeen time.Time
}

// SessionPolicy bounds a session's life: TTL from sign-in whatever the use,
// and Idle since its last use.
type SessionPolicy struct {
	TTL  time.Duration
	Idle time.Duration
}

// ExpiresAt is when s ends if it is not used again.
func (p SessionPolicy) ExpiresAt(s Session) time.Time {
	abs := s.Created.Add(p.TTL)
	if idle := s.LastSeen.Add(p.Idle); idle.Before(abs) {
		return idle
	}
	return abs
}

// Valid says whether s may still be used at now.
func (p SessionPolicy) Valid(s Session, now time.Time) bool {
	return now.Before(p.ExpiresAt(s))
}
