// Package revocation lets every management service refuse a revoked
// cluster certificate. Registration writes the revoked serials to a set
// shared through the store; each service keeps a copy in memory, answers
// from it on every call, and reloads it in the background. A store outage
// therefore refuses no one who was admitted before it.
package revocation

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultRefresh is how often a Cache reloads the shared set.
const DefaultRefresh = 2 * time.Second

// Source reads the serials (in decimal) that are revoked and not yet
// expired at now.
type Source interface {
	RevokedSerials(ctx context.Context, now time.Time) ([]string, error)
}

// Cache answers whether a certificate is revoked from memory. It satisfies
// platform.RevocationChecker.
type Cache struct {
	source   Source
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu     sync.RWMutex
	shared map[string]struct{}  // the source's set, as last loaded
	local  map[string]time.Time // revoked in this process, until they expire
}

// NewCache returns a cache over source; interval <= 0 means DefaultRefresh.
func NewCache(source Source, interval time.Duration, log *slog.Logger) *Cache {
	if interval <= 0 {
		interval = DefaultRefresh
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cache{source: source, interval: interval, log: log, now: time.Now, shared: map[string]struct{}{}, local: map[string]time.Time{}}
}

// IsRevoked answers from memory and never fails. serial is in decimal.
func (c *Cache) IsRevoked(_ context.Context, serial string) (bool, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if _, ok := c.shared[serial]; ok {
		return true, nil
	}
	_, ok := c.local[serial]
	return ok, nil
}

// Add revokes a serial in this process at once, until notAfter; the
// process that revokes does not wait for the next reload.
func (c *Cache) Add(serial string, notAfter time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.local[serial] = notAfter
}

// Refresh reloads the shared set. On error the previous set stays.
func (c *Cache) Refresh(ctx context.Context) error {
	now := c.now()
	serials, err := c.source.RevokedSerials(ctx, now)
	if err != nil {
		return err
	}
	shared := make(map[string]struct{}, len(serials))
	for _, s := range serials {
		shared[s] = struct{}{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shared = shared
	for s, notAfter := range c.local {
		if !now.Before(notAfter) {
			delete(c.local, s)
		}
	}
	return nil
}

// Run refreshes every interval until ctx ends. Failures are logged once per
// outage and do not stop it.
func (c *Cache) Run(ctx context.Context) error {
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
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
