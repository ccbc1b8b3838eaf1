// Package revocation lets every management service refuse a revoked
// cluster certificate. Registration writes the revoked serials to a set
// shared through the store; each service keeps a copy in memory, answers
// from it on every call, and reloads it in the background. A store outage
// therefore refuses no one who was admitted before it.
package revocation

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// DefaultRefresh is how often a Cache reloads the shared set.
const DefaultRefresh = 2 * time.Second

// Revoked is one revoked certificate: its serial in decimal, and its
// expiry, after which nobody needs to refuse it.
type Revoked struct {
	Serial   string
	NotAfter time.Time
}

// Source reads the certificates that are revoked and not yet expired at
// now.
type Source interface {
	Revoked(ctx context.Context, now time.Time) ([]Revoked, error)
}

// Cache answers whether a certificate is revoked from memory. It satisfies
// platform.RevocationChecker.
type Cache struct {
	source   Source
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	// revoked holds every serial seen revoked, in the source or in this
	// process, until it expires. Nothing is ever unrevoked, so a serial
	// that the source stops listing before its expiry means the source
	// lost it (Redis restarted empty): the cache keeps refusing it.
	mu      sync.RWMutex
	revoked map[string]time.Time
	// lost holds the serials the source dropped before their expiry, as
	// of the last refresh.
	lost []Revoked
	// loaded: the source has been read once. Until then the cache cannot
	// tell a revoked certificate from a good one, and says so.
	loaded bool
}

// ErrNotLoaded is IsRevoked's answer before the shared set was first
// read: a process that has just started does not admit a certificate it
// cannot check (the server answers Unavailable, and the caller retries).
var ErrNotLoaded = errors.New("the revocation set has not been loaded yet")

// NewCache returns a cache over source; interval <= 0 means DefaultRefresh.
func NewCache(source Source, interval time.Duration, log *slog.Logger) *Cache {
	if interval <= 0 {
		interval = DefaultRefresh
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cache{source: source, interval: interval, log: log, now: time.Now, revoked: map[string]time.Time{}}
}

// IsRevoked answers from memory. serial is in decimal. It fails only
// before the shared set was first loaded (ErrNotLoaded), unless serial was
// revoked in this process.
func (c *Cache) IsRevoked(_ context.Context, serial string) (bool, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if _, ok := c.revoked[serial]; ok {
		return true, nil
	}
	if !c.loaded {
		return false, ErrNotLoaded
	}
	return false, nil
}

// Add revokes a serial in this process at once, until notAfter; the
// process that revokes does not wait for the next reload.
func (c *Cache) Add(serial string, notAfter time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(serial, notAfter)
}

func (c *Cache) add(serial string, notAfter time.Time) {
	if notAfter.After(c.revoked[serial]) {
		c.revoked[serial] = notAfter
	}
}

// Refresh adds what the source holds, and forgets what has expired. On
// error nothing changes. A serial the source no longer holds before its
// expiry stays revoked, and is counted in Lost.
func (c *Cache) Refresh(ctx context.Context) error {
	now := c.now()
	revoked, err := c.source.Revoked(ctx, now)
	if err != nil {
		return err
	}
	listed := make(map[string]struct{}, len(revoked))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range revoked {
		listed[r.Serial] = struct{}{}
		c.add(r.Serial, r.NotAfter)
	}
	var lost []Revoked
	for s, notAfter := range c.revoked {
		if !now.Before(notAfter) {
			delete(c.revoked, s)
			continue
		}
		if _, ok := listed[s]; !ok {
			lost = append(lost, Revoked{Serial: s, NotAfter: notAfter})
		}
	}
	if len(lost) > 0 && len(lost) != len(c.lost) {
		c.log.WarnContext(ctx, "the revocation store lost revoked certificates before they expired (was it emptied?); they stay refused here", "lost", len(lost))
	}
	c.lost = lost
	c.loaded = true
	return nil
}

// Lost returns the unexpired revocations this cache holds that the
// source, when last read, did not: revocations the store lost, and ones
// this process revoked whose write to the store failed.
func (c *Cache) Lost() []Revoked {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.lost)
}

// Snapshot returns every unexpired revocation the cache holds.
func (c *Cache) Snapshot() []Revoked {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Revoked, 0, len(c.revoked))
	for s, notAfter := range c.revoked {
		out = append(out, Revoked{Serial: s, NotAfter: notAfter})
	}
	return out
}

// Run refreshes every interval until ctx ends. Failures are logged once per
// outage and do not stop it.
func (c *Cache) Run(ctx context.Context) error { return c.RunWith(ctx, nil) }

// RunWith is Run, calling after (when not nil) after each successful
// refresh.
func (c *Cache) RunWith(ctx context.Context, after func(context.Context)) error {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	failing := false
	for {
		err := c.Refresh(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			c.log.WarnContext(ctx, "cannot reload the revocation set; answering from the last one loaded", "error", err)
		case err == nil && failing:
			failing = false
			c.log.InfoContext(ctx, "revocation set reloaded again")
		}
		if err == nil && after != nil {
			after(ctx)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Serials returns the serials of rs, in order, with err: a helper for
// callers of Source.Revoked that need only the serials.
func Serials(rs []Revoked, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Serial
	}
	return out, nil
}

// Prime loads the set once, waiting at most timeout: call it before the
// process serves, so that its first calls are checked rather than refused
// as ErrNotLoaded. On failure the cache stays unloaded, and Run loads it
// when the source answers.
func (c *Cache) Prime(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := c.Refresh(ctx); err != nil {
		c.log.Warn("cannot load the revocation set before serving; cluster calls are refused as unavailable until it loads", "error", err)
		return err
	}
	return nil
}
