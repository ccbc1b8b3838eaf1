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
	// GetEncoded is Get without decoding: the bytes translation stored.
	GetEncoded(ctx context.Context, cluster string) (snapshots.Encoded[*snapshotv1.OutputSnapshot], error)
	Version(ctx context.Context, cluster string) (string, error)
	Subscribe(ctx context.Context) (<-chan snapshots.Change, error)
}

// AckRecord is what a cluster last acknowledged. It is the shared store's
// record: translation reads the same records to report what could not be
// applied.
type AckRecord = snapshots.Ack

// SentVersion is an output version sent to a cluster's agent, and what an
// ack of it may hold.
type SentVersion struct {
	Version string
	// Objects is the number of Istio objects in the output: what a later
	// version's ack may report deleted.
	Objects int
	// Results is the number of results an ack of this version may carry
	// for the output itself: one per object, status and issued certificate.
	Results int
}

// KeepSent is how many of the versions last sent to a cluster the store
// remembers: an agent acks the version it applied, which is at most a few
// versions behind the newest when the outputs change fast.
const KeepSent = 16

// AckStore keeps the latest acknowledgement of each cluster, the versions
// recently sent to it, and which replicas serve a watch of it.
type AckStore interface {
	PutAck(ctx context.Context, rec AckRecord) error
	ListAcks(ctx context.Context) ([]AckRecord, error)
	// RecordSent remembers that v was sent to cluster's agent, as the
	// newest of the KeepSent versions kept for the cluster. Recording a
	// version again makes it the newest.
	RecordSent(ctx context.Context, cluster string, v SentVersion) error
	// SentVersions returns the versions recently sent to cluster, newest
	// first; none when nothing was.
	SentVersions(ctx context.Context, cluster string) ([]SentVersion, error)
	// MarkWatching records that replica serves a watch of cluster until
	// the given time, when the mark lapses unless renewed; a zero time
	// removes the mark.
	MarkWatching(ctx context.Context, cluster, replica string, until time.Time) error
	// Watched returns the clusters with a mark that has not lapsed at now.
	Watched(ctx context.Context, now time.Time) (map[string]bool, error)
}

// KeepIndexes is how many of a cluster's most recent output versions keep
// an index to send deltas from. An agent a few versions behind still gets a
// delta; one further behind gets the whole snapshot.
const KeepIndexes = 4

// IndexStore keeps the index (snapshots.OutputIndex) of each cluster's
// recent output versions, which deltas are computed from. It is shared by
// every replica, so that an agent that reconnects to another replica still
// gets a delta.
type IndexStore interface {
	// PutIndex keeps the index of cluster's output version as the newest
	// of the KeepIndexes kept for the cluster.
	PutIndex(ctx context.Context, cluster, version string, idx snapshots.OutputIndex) error
	// GetIndex returns the index of cluster's output version, or
	// snapshots.ErrNotFound when it is not kept.
	GetIndex(ctx context.Context, cluster, version string) (snapshots.OutputIndex, error)
}

// Metrics records what distribution did.
type Metrics interface {
	WatchStarted(cluster string)
	WatchEnded(cluster string)
	SnapshotSent(cluster string, bytes int)
	// DeltaSent counts a delta sent instead of a whole snapshot of
	// fullBytes.
	DeltaSent(cluster string, bytes, fullBytes int)
	// SnapshotRefused counts a snapshot that was not sent because it is
	// larger than the message size limit.
	SnapshotRefused(cluster string, bytes int)
	Acked(cluster string, applyErrors int)
	// AckRefused counts an ack that was not recorded, for reason:
	// "not-sent" or "too-many-results".
	AckRefused(cluster, reason string)
}

// NopMetrics discards everything.
type NopMetrics struct{}

func (NopMetrics) WatchStarted(string)         {}
func (NopMetrics) WatchEnded(string)           {}
func (NopMetrics) SnapshotSent(string, int)    {}
func (NopMetrics) DeltaSent(string, int, int)  {}
func (NopMetrics) SnapshotRefused(string, int) {}
func (NopMetrics) Acked(string, int)           {}
func (NopMetrics) AckRefused(string, string)   {}
