package snapshots

import (
	"math/rand/v2"
	"time"
)

// backoff doubles a delay up to a cap, with "equal jitter": each wait is
// drawn between half the delay and the whole of it.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max, cur: min} }

func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(b.cur*2, b.max)
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.cur = b.min }
