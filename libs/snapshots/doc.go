// Package snapshots holds what every component needs to agree on about
// snapshots: how their content-hash versions are computed, how they are
// ordered, and how they are kept in a store shared by replicas.
//
// Ingest writes input snapshots and translation reads them; translation
// writes output snapshots and distribution reads them. Both sides use the
// same Store type and key layout, so the layout lives here once.
package snapshots
