package app

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshplane/meshplane/services/console/internal/domain"
)

// CachedAuthorizer remembers each answer for a short while, so that a page
// polling every few seconds does not send a SubjectAccessReview per call;
// a change of RBAC shows within TTL.
type CachedAuthorizer struct {
	next Authorizer
	ttl  time.Duration
	now  func() time.Time

	mu    sync.Mutex
	cache map[string]cachedAnswer
}

type cachedAnswer struct {
	allowed bool
	at      time.Time
}

// NewCachedAuthorizer caches next's answers for ttl.
func NewCachedAuthorizer(next Authorizer, ttl time.Duration, now func() time.Time) *CachedAuthorizer {
	if now == nil {
		now = time.Now
	}
	return &CachedAuthorizer{next: next, ttl: ttl, now: now, cache: map[string]cachedAnswer{}}
}

// Allowed implements Authorizer.
func (c *CachedAuthorizer) Allowed(ctx context.Context, u domain.User, a domain.Attributes) (bool, error) {
	key := cacheKey(u, a)
	now := c.now()
	c.mu.Lock()
	if e, ok := c.cache[key]; ok && now.Sub(e.at) < c.ttl {
		c.mu.Unlock()
		return e.allowed, nil
	}
	c.mu.Unlock()
	ok, err := c.next.Allowed(ctx, u, a)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cache) > 10000 {
		for k, e := range c.cache {
			if now.Sub(e.at) >= c.ttl {
				delete(c.cache, k)
			}
		}
	}
	c.cache[key] = cachedAnswer{allowed: ok, at: now}
	return ok, nil
}

// cacheKey names the user by everything a SubjectAccessReview sends for
// them, so two users never share an answer.
func cacheKey(u domain.User, a domain.Attributes) string {
	extra := make([]string, 0, len(u.Extra))
	for _, k := range slices.Sorted(maps.Keys(u.Extra)) {
		extra = append(extra, k+"="+strings.Join(u.Extra[k], ","))
	}
	return strings.Join([]string{u.Username, u.UID, strings.Join(u.Groups, ","), strings.Join(extra, ";"), a.Verb, a.Group, a.Resource, a.Subresource, a.Namespace, a.Name}, "\x00")
}

var _ Authorizer = (*CachedAuthorizer)(nil)
