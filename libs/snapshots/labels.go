package snapshots

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
