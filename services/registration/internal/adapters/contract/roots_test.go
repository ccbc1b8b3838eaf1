package contract_test

import (
	"testing"

	"github.com/meshplane/meshplane/services/registration/internal/adapters/contract"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/files"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/memory"
	"github.com/meshplane/meshplane/services/registration/internal/app"
)

// TestRootStore runs the contract against the memory and file adapters;
// the Secret adapter runs it in its own package, on a real API server.
func TestRootStore(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		s := memory.NewRoots()
		contract.RootStoreSuite(t, func() app.RootStore { return s })
	})
	t.Run("files", func(t *testing.T) {
		dir := t.TempDir() + "/roots"
		contract.RootStoreSuite(t, func() app.RootStore { return files.NewRoots(dir) })
	})
}
