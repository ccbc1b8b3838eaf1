package app

import "github.com/meshplane/meshplane/services/translation/internal/domain"

// Describe returns the discovered meshes, workloads and destinations that f
// selects as the last translation saw them, with the policies applied to
// each. Before the first translation it describes nothing.
func (t *Translator) Describe(f domain.Filter) domain.Description {
	t.mu.RLock()
	a := t.applied
	t.mu.RUnlock()
	t.stateMu.RLock()
	defer t.stateMu.RUnlock()
	return a.Describe(f)
}
