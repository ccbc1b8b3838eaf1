// Package memory holds in-memory adapters of translation's ports, for
// tests and for installs without a management cluster.
package memory

import (
	"context"
	"slices"
	"sync"

	"github.com/meshplane/meshplane/services/translation/internal/app"
)

// ExpectedClusters is a list of expected clusters that its owner sets.
type ExpectedClusters struct {
	mu    sync.Mutex
	names []string
	err   error
}

var _ app.ExpectedClusters = (*ExpectedClusters)(nil)

// NewExpectedClusters expects names.
func NewExpectedClusters(names ...string) *ExpectedClusters {
	return &ExpectedClusters{names: slices.Clone(names)}
}

// Set replaces the expected clusters.
func (e *ExpectedClusters) Set(names ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.names = slices.Clone(names)
}

// Fail makes every read fail with err until it is called with nil, as a
// management cluster that cannot be reached does.
func (e *ExpectedClusters) Fail(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.err = err
}

// ExpectedClusters returns the clusters set, sorted.
func (e *ExpectedClusters) ExpectedClusters(context.Context) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return nil, e.err
	}
	return slices.Sorted(slices.Values(e.names)), nil
}
