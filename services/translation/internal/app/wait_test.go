package app_test

import (
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/platform/platformtest"
)

// waitUntil waits up to 10 s for cond (platformtest.Eventually).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	platformtest.Eventually(t, 10*time.Second, what, cond)
}
