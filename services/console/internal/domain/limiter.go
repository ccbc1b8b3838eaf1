package domain

import "time"

// FailureLimiter counts failed sign-ins per client in a fixed window, so
// that a client guessing tokens is slowed to Max tries per Window. It keeps
// nothing for clients without failures in the current window.
type FailureLimiter struct {
	Max    int
	Window time.Duration
	counts map[string]failures
}

type failures struct {
	start time.Time
	n     int
}

// Allowed says whether client may try again at now.
func (l *FailureLimiter) Allowed(client string, now time.Time) bool {
	f, ok := l.counts[client]
	return !ok || now.Sub(f.start) >= l.Window || f.n < l.Max
}

// Fail records a failed try of client at now, and drops windows that
// ended.
func (l *FailureLimiter) Fail(client string, now time.Time) {
	if l.counts == nil {
		l.counts = map[string]failures{}
	}
	for c, f := range l.counts {
		if now.Sub(f.start) >= l.Window {
			delete(l.counts, c)
		}
	}
	f := l.counts[client]
	if f.n == 0 {
		f.start = now
	}
	f.n++
	l.counts[client] = f
}
