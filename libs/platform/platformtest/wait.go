package platformtest

import (
	"testing"
	"time"
)

// PollInterval is how often Eventually asks its condition again.
const PollInterval = 10 * time.Millisecond

// Eventually waits until cond holds, asking it again every PollInterval,
// and fails the test (naming what it waited for) when timeout passes or the
// test ends first. It is the one way the tests of this repository wait for
// something to happen: a deadline on a condition, never a bare sleep.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		select {
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatalf("test ended waiting for %s", what)
		}
	}
}
