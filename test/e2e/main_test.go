package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshplane/meshplane/test/e2e/harness"
)

// binDir holds the commands under test, built once per run.
var binDir string

func TestMain(m *testing.M) {
	flag.Parse()
	if harness.Skipped() {
		// The developer's explicit opt-out of the slow suite
		// (MESHPLANE_SKIP_E2E=1); every test below skips and says so.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "meshplane-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = filepath.Join(dir, "bin")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	err = harness.Build(ctx, binDir, harness.AllCommands...)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the commands failed:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
