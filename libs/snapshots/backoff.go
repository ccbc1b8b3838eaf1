package snapshots

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a jittered exponential backoff, so that many clients retrying
// after an outage do not come back in lockstep: each delay doubles from
// Min up to Max, and each wait is drawn between half the delay and the
// whole of it ("equal jitter"). The zero value waits at least Min (zero
// too: retries at once); it is not safe for concurrent use.
//
// It stays in this pure package rather than in snapstore, beside the
// stores whose writes it paces: it does no I/O, and the agent's app layer
// uses it (app.Backoff), which must not depend on go-redis.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Next returns the next delay, between half and all of the current step.
func (b *Backoff) Next() time.Duration {
	if b.cur < b.Min {
		b.cur = b.Min
	}
	d := b.cur
	b.cur = min(b.cur*2, b.Max)
	return d/2 + rand.N(d/2+1)
}

// Reset starts over from Min.
func (b *Backoff) Reset() { b.cur = 0 }

// Wait sleeps for the next delay or until ctx ends; it reports whether ctx
// is still live.
func (b *Backoff) Wait(ctx context.Context) bool {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
