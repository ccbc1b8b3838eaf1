package snapshots

import (
	"errors"
	"fmt"
)

// The labels and annotation on every object Meshplane writes into a cluster.
// Garbage collection deletes only objects that carry both labels with this
// install's and this cluster's values, so they are a contract between
// translation (which sets them) and the agent (which enforces and selects on
// them).
const (
	LabelManagedBy    = "meshplane.dev/managed-by"
	LabelCluster      = "meshplane.dev/cluster"
	AnnotationParents = "meshplane.dev/parents"
	// AnnotationDigest holds the object's digest (ObjectDigest) as the
	// agent applied it: an agent that finds it equal to the digest of the
	// object it is asked to apply writes nothing.
	AnnotationDigest = "meshplane.dev/digest"
	// FieldManager is the server-side apply field manager of the agent.
	FieldManager = "meshplane"
)

// DefaultInstall is the install name when none is configured.
const DefaultInstall = "meshplane"

// ValidateInstall checks an install name: it is the value of the
// managed-by label on every object Meshplane writes, and the hash tag of
// every Redis key (meshplane:{<install>}:...), so it must be a Kubernetes
// label value that is not empty. A brace would change the tag and spread
// one install's keys over several Cluster slots.
func ValidateInstall(install string) error {
	if install == "" {
		return errors.New("--install must not be empty")
	}
	if len(install) > 63 {
		return fmt.Errorf("--install %q is longer than 63 characters (it is a label value)", install)
	}
	for i, r := range install {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		edge := i == 0 || i == len(install)-1
		if !alnum && (edge || (r != '-' && r != '_' && r != '.')) {
			return fmt.Errorf("--install %q: %q at %d; it must be a label value: letters, digits, '-', '_' and '.', beginning and ending with a letter or digit", install, r, i)
		}
	}
	return nil
}
