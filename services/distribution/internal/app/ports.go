// Package app holds the distribution use cases: serve each agent the newest
// output snapshot of its cluster, and record what it applied.
package app

import (
	"context"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// OutputSource is where output snapshots come from: the shared store.
type OutputSource interface {
	Get(ctx context.Context, cluster string) (snapshots.Entry[*snapshotv1.OutputSnapshot], error)
	Version(ctx context.Context, cluster string) (string, error)
	Subscribe(ctx context.Context) (<-chan snapshots.Change, error)
}

// AckRecord is what a cluster last acknowledged. It is the shared store's
// record: translation reads the same records to report what could not be
// applied.
type AckRecord = snapshots.Ack

// AckStore keeps the latest acknowledgement of each cluster, and which
// replicas serve a watch of it.
type AckStore interface {
	PutAck(ctx context.Context, rec AckRecord) error
	ListAcks(ctx context.Context) ([]AckRecord, error)
	// MarkWatching records that replica serves a watch of cluster until
	// the given time, when the mark lapses unless renewed; a zero time
	// removes the mark.
	MarkWatching(ctx context.Context, cluster, replica string, until time.Time) error
	// Watched returns the clusters with a mark that has not lapsed at now.
	Watched(ctx context.Context, now time.Time) (map[string]bool, error)
}

// Metrics records what distribution did.
type Metrics interface {
	WatchStarted(cluster string)
	WatchEnded(cluster string)
	SnapshotSent(cluster string, bytes int)
	// SnapshotRefused counts a snapshot that was not sent because it is
	// larger than the message size limit.
	SnapshotRefused(cluster string, bytes int)
	Acked(cluster string, applyErrors int)
}

// NopMetrics discards everything.
type NopMetrics struct{}

func (NopMetrics) WatchStarted(string)         {}
func (NopMetrics) WatchEnded(string)           {}
func (NopMetrics) SnapshotSent(string, int)    {}
func (NopMetrics) SnapshotRefused(string, int) {}
func (NopMetrics) Acked(string, int)           {}
