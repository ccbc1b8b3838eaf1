package kubetest

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Condition reports whether what a caller waits for has happened. A non-nil
// error stops the wait: return (false, nil) for "not yet".
type Condition func(ctx context.Context) (done bool, err error)

// WaitFor calls cond until it returns true or an error, ctx is done, or
// timeout passes (timeout 0: only ctx bounds the wait). It polls at once,
// then with an interval growing from 10ms to 250ms, so quick conditions are
// seen quickly. It returns nil when cond returned true, cond's error, or an
// error wrapping ctx's.
func WaitFor(ctx context.Context, timeout time.Duration, cond Condition) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	interval := 10 * time.Millisecond
	for {
		done, err := cond(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("condition not met: %w", context.Cause(ctx))
		case <-t.C:
		}
		if interval < 250*time.Millisecond {
			interval *= 2
		}
	}
}

// Eventually waits like WaitFor, bounded by timeout and t's context, and
// fails the test with the message and the reason when cond does not become
// true. Call it from the test's goroutine.
func Eventually(t testing.TB, timeout time.Duration, cond Condition, format string, args ...any) {
	t.Helper()
	if err := WaitFor(t.Context(), timeout, cond); err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}
