// Package snapshots holds what every component needs to agree on about
// snapshots: how their content-hash versions are computed, how they are
// ordered, how they are encoded on the wire and diffed into deltas, and the
// interfaces of the stores shared by replicas.
//
// Ingest writes input snapshots and translation reads them; translation
// writes output snapshots and distribution reads them. Both sides use the
// same Store interface, so it lives here once; the stores themselves (Redis,
// memory, write-through, acks, and the Redis options) are in the
// subpackage snapstore.
//
// This package does no I/O and depends on no store client: the domain and
// app layers of the services import it, and tools/archtest checks, through
// their transitive imports, that they never reach go-redis.
package snapshots
