package app_test

import (
	"testing"
	"time"
)

// waitUntil polls cond on a ticker until it holds, failing the test with
// what after the deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-t.Context().Done():
			t.Fatalf("test ended waiting for %s", what)
		case <-tick.C:
		}
	}
}
