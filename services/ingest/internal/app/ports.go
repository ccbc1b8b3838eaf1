// Package app holds the ingest use cases: accept a cluster's input
// snapshot, keep it safe, tell translation, and track which clusters are
// connected.
package app

import (
	"context"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// SnapshotStore keeps the latest input snapshot of each cluster.
type SnapshotStore interface {
	// PutEncoded stores a snapshot with the encoding that validation
	// produced, so that a push is encoded once.
	PutEncoded(ctx context.Context, cluster string, e snapshots.Encoded[*snapshotv1.InputSnapshot]) error
	Get(ctx context.Context, cluster string) (snapshots.Entry[*snapshotv1.InputSnapshot], error)
	Version(ctx context.Context, cluster string) (string, error)
	// List returns the latest snapshot of every cluster.
	List(ctx context.Context) ([]snapshots.Entry[*snapshotv1.InputSnapshot], error)
}

// SharedStore is the store that other replicas and services read (Redis),
// as opposed to SnapshotStore, which may fall back to memory. Restore
// writes to it directly.
type SharedStore interface {
	Version(ctx context.Context, cluster string) (string, error)
	Put(ctx context.Context, cluster, version string, s *snapshotv1.InputSnapshot) error
}

// TranslationNotifier tells translation that a cluster's input changed.
type TranslationNotifier interface {
	// Notify hands translation the cluster's input at version. snapshot is
	// its wire encoding (an InputSnapshot), as stored.
	Notify(ctx context.Context, cluster, version string, snapshot []byte) error
}

// Metrics records what ingest did.
type Metrics interface {
	PushReceived(cluster string, bytes int, err error)
	// PushRefused counts a push refused for reason: the limit it went
	// over, "invalid" or "reserved-cluster".
	PushRefused(cluster, reason string)
	ClientConnected(cluster string)
	ClientDisconnected(cluster string)
}

// NopMetrics discards everything.
type NopMetrics struct{}

func (NopMetrics) PushReceived(string, int, error) {}
func (NopMetrics) PushRefused(string, string)      {}
func (NopMetrics) ClientConnected(string)          {}
func (NopMetrics) ClientDisconnected(string)       {}
