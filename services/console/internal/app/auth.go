package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshplane/meshplane/services/console/internal/domain"
)

// Sessions signs users in with a Kubernetes token and keeps their sessions
// in memory: one replica, or sticky sessions in front of several.
type Sessions struct {
	authn   Authenticator
	policy  domain.SessionPolicy
	now     func() time.Time
	metrics Metrics

	mu       sync.Mutex
	sessions map[string]domain.Session
	limiter  domain.FailureLimiter
}

// SessionsOption configures Sessions.
type SessionsOption func(*Sessions)

// WithClock sets the clock, for tests.
func WithClock(now func() time.Time) SessionsOption { return func(s *Sessions) { s.now = now } }

// WithSessionMetrics sets where sign-ins are counted.
func WithSessionMetrics(m Metrics) SessionsOption { return func(s *Sessions) { s.metrics = m } }

// WithFailureLimit sets how many failed sign-ins a client may make per
// window.
func WithFailureLimit(n int, window time.Duration) SessionsOption {
	return func(s *Sessions) { s.limiter = domain.FailureLimiter{Max: n, Window: window} }
}

// NewSessions builds the session keeper.
func NewSessions(authn Authenticator, policy domain.SessionPolicy, opts ...SessionsOption) *Sessions {
	s := &Sessions{authn: authn, policy: policy, now: time.Now, metrics: NopMetrics{}, sessions: map[string]domain.Session{},
		limiter: domain.FailureLimiter{Max: 10, Window: time.Minute}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Policy is the session lifetime policy.
func (s *Sessions) Policy() domain.SessionPolicy { return s.policy }

// SignIn checks token with TokenReview and starts a session. client names
// the caller (its IP) for the failed sign-in limit. The token is neither
// kept nor logged.
func (s *Sessions) SignIn(ctx context.Context, client, token string) (domain.Session, error) {
	s.mu.Lock()
	allowed := s.limiter.Allowed(client, s.now())
	s.mu.Unlock()
	if !allowed {
		s.metrics.SignIn(false)
		return domain.Session{}, ErrTooManyFailures
	}
	token = strings.TrimSpace(token)
	var (
		user domain.User
		ok   bool
		err  error
	)
	if token != "" {
		user, ok, err = s.authn.Authenticate(ctx, token)
		if err != nil {
			return domain.Session{}, fmt.Errorf("%w: TokenReview: %w", ErrUnavailable, err)
		}
	}
	if !ok {
		s.mu.Lock()
		s.limiter.Fail(client, s.now())
		s.mu.Unlock()
		s.metrics.SignIn(false)
		return domain.Session{}, ErrTokenRefused
	}
	now := s.now()
	sess := domain.Session{ID: randomToken(), CSRF: randomToken(), User: user, Created: now, LastSeen: now}
	s.mu.Lock()
	s.sweepLocked(now)
	s.sessions[sess.ID] = sess
	n := len(s.sessions)
	s.mu.Unlock()
	s.metrics.SignIn(true)
	s.metrics.ActiveSessions(n)
	return sess, nil
}

// Check returns the session id names if it is valid and csrf matches its
// CSRF token, and marks it used.
func (s *Sessions) Check(id, csrf string) (domain.Session, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok || id == "" {
		return domain.Session{}, ErrUnauthenticated
	}
	if !s.policy.Valid(sess, now) {
		delete(s.sessions, id)
		s.metrics.ActiveSessions(len(s.sessions))
		return domain.Session{}, ErrUnauthenticated
	}
	if !constantTimeEqual(sess.CSRF, csrf) {
		return domain.Session{}, ErrUnauthenticated
	}
	sess.LastSeen = now
	s.sessions[id] = sess
	return sess, nil
}

// SignOut ends the session id names, after the same checks as Check.
func (s *Sessions) SignOut(id, csrf string) error {
	if _, err := s.Check(id, csrf); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.sessions, id)
	n := len(s.sessions)
	s.mu.Unlock()
	s.metrics.ActiveSessions(n)
	return nil
}

// Sweep drops expired sessions; Run calls it periodically.
func (s *Sessions) Sweep() {
	s.mu.Lock()
	s.sweepLocked(s.now())
	n := len(s.sessions)
	s.mu.Unlock()
	s.metrics.ActiveSessions(n)
}

func (s *Sessions) sweepLocked(now time.Time) {
	for _, id := range slices.Collect(maps.Keys(s.sessions)) {
		if !s.policy.Valid(s.sessions[id], now) {
			delete(s.sessions, id)
		}
	}
}

// randomToken is 32 random bytes, base64url: a session ID or CSRF token.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+).
	return base64.RawURLEncoding.EncodeToString(b)
}

func constantTimeEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := range len(a) {
		v |= a[i] ^ b[i]
	}
	return v == 0
}
