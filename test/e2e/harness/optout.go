package harness

import (
	"os"
	"testing"
)

// EnvSkipE2E, set to 1, is the developer's explicit opt-out of the
// end-to-end suite (`make test-short` sets it; CI never does). Without it
// every end-to-end test runs, and a missing component fails it with a
// message saying how to get it.
const EnvSkipE2E = "MESHPLANE_SKIP_E2E"

// Skipped reports whether the developer opted out of the suite.
func Skipped() bool { return os.Getenv(EnvSkipE2E) == "1" }

// RequireE2E skips t only when the developer opted out (EnvSkipE2E=1).
func RequireE2E(tb testing.TB) {
	tb.Helper()
	if Skipped() {
		tb.Skipf("end-to-end test: %s=1 opts out", EnvSkipE2E)
	}
}
