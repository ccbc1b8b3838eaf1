// Package app holds the translation use cases: keep every cluster's latest
// input, translate each change (a burst of them together), and publish the
// outputs that changed.
package app

import (
	"context"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// InputSource is where inputs are read from at start and after a missed
// notice: the shared store.
type InputSource interface {
	List(ctx context.Context) ([]snapshots.Entry[*snapshotv1.InputSnapshot], error)
	Get(ctx context.Context, cluster string) (snapshots.Entry[*snapshotv1.InputSnapshot], error)
	Subscribe(ctx context.Context) (<-chan snapshots.Change, error)
	// GetEncoded returns an input in its encoding (Value may be nil:
	// Encoded.Decoded decodes it): translation then tells the unchanged
	// policies of the next input of that cluster by their encodings.
	GetEncoded(ctx context.Context, cluster string) (snapshots.Encoded[*snapshotv1.InputSnapshot], error)
}

// OutputPublisher is where outputs are published: the shared store.
type OutputPublisher interface {
	// PutEncoded receives every output snapshot whose version changed,
	// with its encoding (snapshots.EncodeOutput's), which the store keeps
	// as it is and distribution sends on.
	PutEncoded(ctx context.Context, cluster string, e snapshots.Encoded[*snapshotv1.OutputSnapshot]) error
	// List lists the outputs already published. It tells safe mode which
	// clusters were registered before a restart: a cluster with an output
	// must report an input before anything is published again (DESIGN.md
	// section 7), unless Config.Expected names the clusters instead.
	List(ctx context.Context) ([]snapshots.Entry[*snapshotv1.OutputSnapshot], error)
}

// ExpectedClusters names the clusters whose inputs every output depends on:
// the clusters registered in the management cluster, a source that
// outlives a lost store. Safe mode waits for them, and an output built
// while one of them has no input is marked incomplete (missing_clusters),
// so that agents hold its deletions.
type ExpectedClusters interface {
	ExpectedClusters(ctx context.Context) ([]string, error)
}

// Metrics records what translation did. The service wires Prometheus.
type Metrics interface {
	ObserveTranslation(d time.Duration, err error)
	ObserveOutput(cluster string, objects, bytes int)
	ObservePublishError(cluster string)
	// SetSafeMode records whether publishing is held back, and for how
	// many clusters it waits.
	SetSafeMode(on bool, waiting int)
	// SetMissing records how many expected clusters have no input.
	SetMissing(clusters int)
	// SetLastGood records whether the stored last valid versions have been
	// read, and how many writes to the store are pending.
	SetLastGood(loaded bool, pending int)
	// SetEncodingCache records the bytes of output encodings kept for
	// the next versions (Config.EncodingCacheBytes).
	SetEncodingCache(bytes int64)
}

// NopMetrics discards everything.
type NopMetrics struct{}

func (NopMetrics) ObserveTranslation(time.Duration, error) {}
func (NopMetrics) ObserveOutput(string, int, int)          {}
func (NopMetrics) ObservePublishError(string)              {}
func (NopMetrics) SetSafeMode(bool, int)                   {}
func (NopMetrics) SetMissing(int)                          {}
func (NopMetrics) SetLastGood(bool, int)                   {}
func (NopMetrics) SetEncodingCache(int64)                  {}
