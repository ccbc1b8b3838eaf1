package snapshots

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// ErrNotFound is returned by Get when a cluster has no snapshot.
var ErrNotFound = errors.New("snapshot not found")

// ErrNotReplicated says a write reached the Redis primary but not enough
// replicas within the timeout (see snapstore.Durability). It may or may
// not survive a failover; the writer retries it. It lives here, with the
// store interfaces, so that app layers can tell it apart without
// depending on Redis.
var ErrNotReplicated = errors.New("redis: too few replicas acknowledged the write")

// Kind names what a store holds.
type Kind string

const (
	// Inputs are written by ingest, one per workload cluster.
	Inputs Kind = "input"
	// Outputs are written by translation, one per workload cluster.
	Outputs Kind = "output"
)

// Change tells a subscriber that a cluster's snapshot changed. Resync means
// changes may have been missed (a reconnect or a slow subscriber): the
// subscriber should reread what it cares about.
type Change struct {
	Cluster string
	Version string
	Resync  bool
}

// Entry is a stored snapshot with its version.
type Entry[T proto.Message] struct {
	Cluster string
	Version string
	Value   T
}

// Store keeps the latest snapshot of each cluster and tells subscribers when
// one changes. Implementations (package snapstore): Redis (shared by
// replicas), Memory and WriteThrough.
type Store[T proto.Message] interface {
	// Put stores v as the cluster's snapshot at version and notifies
	// subscribers.
	Put(ctx context.Context, cluster, version string, v T) error
	// Get returns the cluster's snapshot, or ErrNotFound.
	Get(ctx context.Context, cluster string) (Entry[T], error)
	// Version returns the cluster's version without decoding the snapshot,
	// or ErrNotFound.
	Version(ctx context.Context, cluster string) (string, error)
	// List returns every cluster's snapshot.
	List(ctx context.Context) ([]Entry[T], error)
	// Subscribe delivers changes until ctx ends. The channel is closed then.
	Subscribe(ctx context.Context) (<-chan Change, error)
}

// EncodedPutter is a store that can keep a snapshot already encoded, so
// that a caller (or a composed store) encodes it once for every layer.
type EncodedPutter[T proto.Message] interface {
	PutEncoded(ctx context.Context, cluster string, e Encoded[T]) error
}

// PutEncoded stores e in s, handing it the encoding when s can take it.
func PutEncoded[T proto.Message](ctx context.Context, s Store[T], cluster string, e Encoded[T]) error {
	if ep, ok := s.(EncodedPutter[T]); ok && e.Data != nil {
		return ep.PutEncoded(ctx, cluster, e)
	}
	v, err := e.Decoded()
	if err != nil {
		return fmt.Errorf("store snapshot of cluster %q: %w", cluster, err)
	}
	return s.Put(ctx, cluster, e.Version, v)
}

// EncodedGetter is a store that can return a snapshot in its wire
// encoding, without decoding it: for a caller that sends the bytes on
// (distribution) or reads parts of them (translation's ReadPolicies).
type EncodedGetter[T proto.Message] interface {
	// GetEncoded returns the cluster's snapshot with Data set and no
	// Value, or ErrNotFound.
	GetEncoded(ctx context.Context, cluster string) (Encoded[T], error)
}

// GetEncoded returns the cluster's snapshot from s in its wire encoding:
// the stored bytes when s keeps them, else an encoding of what s returns.
func GetEncoded[T proto.Message](ctx context.Context, s Store[T], cluster string) (Encoded[T], error) {
	if eg, ok := s.(EncodedGetter[T]); ok {
		return eg.GetEncoded(ctx, cluster)
	}
	e, err := s.Get(ctx, cluster)
	if err != nil {
		return Encoded[T]{}, err
	}
	b, err := proto.Marshal(e.Value)
	if err != nil {
		return Encoded[T]{}, fmt.Errorf("encode snapshot of cluster %q: %w", cluster, err)
	}
	return Encoded[T]{Version: e.Version, Data: b}, nil
}
