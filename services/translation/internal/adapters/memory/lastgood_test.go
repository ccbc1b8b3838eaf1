package memory_test

import (
	"testing"

	"github.com/meshplane/meshplane/services/translation/internal/adapters/lastgoodtest"
	"github.com/meshplane/meshplane/services/translation/internal/adapters/memory"
	"github.com/meshplane/meshplane/services/translation/internal/app"
)

func TestLastGoodContract(t *testing.T) {
	lastgoodtest.Run(t, func(*testing.T) app.LastGoodStore { return memory.NewLastGood() })
}
