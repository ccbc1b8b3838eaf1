package snapshots

import (
	"context"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

// Ack is the latest acknowledgement of a cluster's agent: the output
// version it applied and the outcome for each object.
type Ack struct {
	Cluster string
	Version string
	// Results are the outcomes listed one by one: all of them from an
	// agent that does not count, else all but APPLIED and DELETED.
	Results []*snapshotv1.ApplyResult
	// Applied and Deleted are the outcomes the agent counted instead of
	// listing them.
	Applied, Deleted int
	ApplyErrors      int
	AckedAt          time.Time
}

// HeldDeletions counts the owned objects the agent kept although the
// acknowledged output no longer holds them, because that output was built
// without some expected cluster's input.
func (a Ack) HeldDeletions() int {
	n := 0
	for _, r := range a.Results {
		if r.GetOutcome() == snapshotv1.ApplyOutcome_APPLY_OUTCOME_DELETION_HELD {
			n++
		}
	}
	return n
}

// AckStore keeps the latest ack of each cluster and tells subscribers when
// one changes. Distribution writes it; translation reads it to report what
// could not be applied in the statuses of the policies behind it.
// Implementations (package snapstore): RedisAcks (shared by replicas and
// services) and MemoryAcks (one process).
type AckStore interface {
	PutAck(ctx context.Context, a Ack) error
	// GetAck returns the cluster's latest ack, or ErrNotFound.
	GetAck(ctx context.Context, cluster string) (Ack, error)
	// ListAcks returns every cluster's latest ack, sorted by cluster.
	ListAcks(ctx context.Context) ([]Ack, error)
	// SubscribeAcks delivers a Change (cluster and acked version) for every
	// ack put, and Resync when some may have been missed, until ctx ends.
	SubscribeAcks(ctx context.Context) (<-chan Change, error)
}
