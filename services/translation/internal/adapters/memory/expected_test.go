package memory_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/meshplane/meshplane/services/translation/internal/adapters/memory"
)

func TestExpectedClusters(t *testing.T) {
	e := memory.NewExpectedClusters("west", "east")
	if got, err := e.ExpectedClusters(t.Context()); err != nil || !slices.Equal(got, []string{"east", "west"}) {
		t.Fatalf("ExpectedClusters() = %v, %v; want [east west]", got, err)
	}
	e.Fail(errors.New("down"))
	if _, err := e.ExpectedClusters(t.Context()); err == nil {
		t.Fatal("a failing source gave no error")
	}
	e.Fail(nil)
	e.Set("north")
	if got, _ := e.ExpectedClusters(t.Context()); !slices.Equal(got, []string{"north"}) {
		t.Fatalf("after Set: %v", got)
	}
}
