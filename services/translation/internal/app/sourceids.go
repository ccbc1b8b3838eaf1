package app

import (
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// An input that arrived encoded (ingest's Notify, or the store) comes with
// the bytes of each of its policies. The incremental translator tells an
// unchanged policy by them (domain.SourceIDs) instead of encoding each of
// the 10,000 policies of the reference estate's management input again
// for every edit.

// inputWire is the encodings of the policies of in, copied out of the
// input's encoding so that the rest of it is not held.
type inputWire struct {
	in     *snapshotv1.InputSnapshot
	policy snapshots.PolicyEncodings
}

// stampedIDs are the SourceIDs of a stamped input.
type stampedIDs struct {
	stamped *snapshotv1.InputSnapshot
	ids     domain.SourceIDs
}

// policyWire returns the policy encodings of in, decoded from data (nil
// when it was not); a zero inputWire when there are none.
func policyWire(in *snapshotv1.InputSnapshot, data []byte) inputWire {
	p := snapshots.ReadPolicies(data)
	if len(p.Traffic) == 0 && len(p.Access) == 0 {
		return inputWire{}
	}
	size := 0
	for _, b := range p.Traffic {
		size += len(b)
	}
	for _, b := range p.Access {
		size += len(b)
	}
	buf := make([]byte, 0, size)
	own := func(list [][]byte) {
		for i, b := range list {
			buf = append(buf, b...)
			list[i] = buf[len(buf)-len(b) : len(buf) : len(buf)]
		}
	}
	own(p.Traffic)
	own(p.Access)
	return inputWire{in: in, policy: p}
}

// sourceIDs returns the SourceIDs of stamped, which firstSeen.stamp made
// from in, when w holds the encodings in was decoded from. stamp sets
// metadata.first_seen on each policy and nothing else, so the ID of a
// stamped policy is the time it got, length-prefixed, followed by the
// encoding it was decoded from: equal IDs mean equal stamped policies.
func (t *Translator) sourceIDs(cluster string, in, stamped *snapshotv1.InputSnapshot, w inputWire) (domain.SourceIDs, bool) {
	if w.in != in || w.in == nil {
		delete(t.ids, cluster)
		return domain.SourceIDs{}, false
	}
	if kept, ok := t.ids[cluster]; ok && kept.stamped == stamped {
		return kept.ids, true
	}
	ids := domain.SourceIDs{
		Traffic: stampIDs(stamped.GetTrafficPolicies(), w.policy.Traffic),
		Access:  stampIDs(stamped.GetAccessPolicies(), w.policy.Access),
	}
	t.ids[cluster] = stampedIDs{stamped: stamped, ids: ids}
	return ids, true
}

// stampIDs returns the IDs of the stamped policies, or nil when the
// encodings are not as many.
func stampIDs[P interface {
	GetMetadata() *commonv1.ObjectMeta
}](policies []P, encs [][]byte) [][]byte {
	if len(policies) != len(encs) || len(encs) == 0 {
		return nil
	}
	size := 0
	for _, b := range encs {
		size += len(b) + 16
	}
	buf := make([]byte, 0, size)
	ids := make([][]byte, len(encs))
	for i, p := range policies {
		at := len(buf)
		buf = appendStamp(buf, p.GetMetadata().GetFirstSeen())
		buf = append(buf, encs[i]...)
		ids[i] = buf[at:len(buf):len(buf)]
	}
	return ids
}

// appendStamp appends ts, length-prefixed: empty for none, else a 1, its
// seconds and nanos, and its unknown fields.
func appendStamp(b []byte, ts *timestamppb.Timestamp) []byte {
	if ts == nil {
		return protowire.AppendVarint(b, 0)
	}
	var s [32]byte
	v := append(s[:0], 1)
	v = protowire.AppendVarint(v, uint64(ts.GetSeconds()))
	v = protowire.AppendVarint(v, uint64(ts.GetNanos()))
	v = append(v, ts.ProtoReflect().GetUnknown()...)
	return protowire.AppendBytes(b, v)
}
