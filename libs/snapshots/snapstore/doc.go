// Package snapstore holds the snapshot stores that do I/O: Redis (shared
// by the replicas of a service, and by the services of an install), Memory
// (one process), WriteThrough (Redis with a memory fallback), the ack
// stores, the Redis options and flags (RedisOptions, Config) and
// Durability (waiting for replicas).
//
// The interfaces they implement (snapshots.Store, snapshots.AckStore) and
// the errors they return (snapshots.ErrNotFound,
// snapshots.ErrNotReplicated) are in the parent package snapshots, which
// does no I/O: the domain and app layers depend on those and never on this
// package. Only adapters, composition roots (services/<svc>/service, cmd)
// and tests import snapstore.
package snapstore
