package istiotest

import (
	"path/filepath"
	"strings"
	"testing"
)

// A missing binary is an error that says how to get it and how to opt out.
func TestMissingPilotDiscoverySaysHowToGetIt(t *testing.T) {
	t.Setenv(EnvPilotDiscovery, filepath.Join(t.TempDir(), "pilot-discovery"))
	_, err := PilotDiscoveryPath()
	if err == nil {
		t.Fatal("no error for a missing pilot-discovery")
	}
	for _, want := range []string{"hack/tools.sh", EnvSkip, EnvPilotDiscovery, IstioVersion} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
