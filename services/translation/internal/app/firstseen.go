package app

import (
	"cmp"
	"slices"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// firstSeen decides the acceptance order of user resources: conflicting
// policies are accepted in the order the plane first saw them, never in the
// order of the creation times a workload cluster sends, which that cluster
// could backdate to take another cluster's policy's fields (issue 13,
// DESIGN.md section 7). Before each translation it stamps every policy in a
// workload cluster's input with metadata.firstSeen: the time it keeps for
// the resource, or now for a resource it has not seen. Resources of the
// management cluster are stamped with their creation time, which that
// cluster's API server set. The times are kept durably in the
// ResourceRecords with the last valid versions (lastGoodKeeper), and read
// back at start.
//
// Only Run's goroutine uses it.
type firstSeen struct {
	management string
	// times holds, per workload cluster, when each resource was first seen.
	times map[string]map[versionKey]seenAt
	// stamped is each cluster's last stamped input, reused while the input
	// is the same message: the incremental translator then sees the same
	// resources.
	stamped map[string]stampedInput
}

// seenAt is when the plane first saw the object with uid.
type seenAt struct {
	uid string
	at  time.Time
}

type stampedInput struct {
	src, out *snapshotv1.InputSnapshot
}

func newFirstSeen(management string) *firstSeen {
	return &firstSeen{management: management, times: map[string]map[versionKey]seenAt{}, stamped: map[string]stampedInput{}}
}

// orderedKinds are the kinds whose conflicts are settled by acceptance
// order, with the input field that holds them. Settings are among them: a
// workload cluster's are read when the management cluster has none, the
// first one accepted. ScopeGrants are read from the management cluster
// only.
var orderedKinds = []struct {
	kind  string
	field protoreflect.Name
}{
	{domain.KindTrafficPolicy, "traffic_policies"},
	{domain.KindAccessPolicy, "access_policies"},
	{domain.KindVirtualMesh, "virtual_meshes"},
	{domain.KindVirtualDestination, "virtual_destinations"},
	{domain.KindWasmDeploymentPolicy, "wasm_deployment_policies"},
	{domain.KindAccessLogPolicy, "access_log_policies"},
	{domain.KindSettings, "settings"},
}

// stamp returns in with every ordered resource's metadata.firstSeen set;
// in itself is not modified. It forgets the resources of cluster that in
// no longer holds, and remembers the new ones as seen at now. New
// resources seen together are ordered among themselves by the creation
// times their cluster sent, which is all those are trusted for: each gets
// now plus its rank in nanoseconds.
func (f *firstSeen) stamp(cluster string, in *snapshotv1.InputSnapshot, now time.Time) *snapshotv1.InputSnapshot {
	if s, ok := f.stamped[cluster]; ok && s.src == in {
		return s.out
	}
	type item struct {
		vk   versionKey
		meta *commonv1.ObjectMeta
		set  func(*timestamppb.Timestamp)
	}
	var items []item
	out := snapshots.ShallowCopy(in)
	ref := out.ProtoReflect()
	fields := ref.Descriptor().Fields()
	for _, k := range orderedKinds {
		fd := fields.ByName(k.field)
		src := ref.Get(fd).List()
		if src.Len() == 0 {
			continue
		}
		dst := ref.NewField(fd).List()
		for i := range src.Len() {
			r := snapshots.ShallowCopy(src.Get(i).Message().Interface())
			rr := r.ProtoReflect()
			mdField := rr.Descriptor().Fields().ByName("metadata")
			md := &commonv1.ObjectMeta{}
			if rr.Has(mdField) {
				md = proto.Clone(rr.Get(mdField).Message().Interface()).(*commonv1.ObjectMeta)
			}
			rr.Set(mdField, protoreflect.ValueOfMessage(md.ProtoReflect()))
			dst.Append(protoreflect.ValueOfMessage(rr))
			vk := versionKey{kind: k.kind, key: domain.ObjectKey{Cluster: cluster, Namespace: md.GetNamespace(), Name: md.GetName()}}
			items = append(items, item{vk: vk, meta: md, set: func(ts *timestamppb.Timestamp) { md.FirstSeen = ts }})
		}
		ref.Set(fd, protoreflect.ValueOfList(dst))
	}

	if cluster == f.management {
		// The management cluster's own API server set these times.
		for _, it := range items {
			it.set(it.meta.GetCreationTimestamp())
		}
		f.stamped[cluster] = stampedInput{src: in, out: out}
		return out
	}

	known := f.times[cluster]
	next := make(map[versionKey]seenAt, len(items))
	var fresh []item
	for _, it := range items {
		s, ok := known[it.vk]
		if ok && (s.uid == "" || s.uid == it.meta.GetUid()) {
			s.uid = it.meta.GetUid()
			next[it.vk] = s
			it.set(timestamppb.New(s.at))
			continue
		}
		fresh = append(fresh, it)
	}
	slices.SortStableFunc(fresh, func(a, b item) int {
		ta, tb := a.meta.GetCreationTimestamp(), b.meta.GetCreationTimestamp()
		return cmp.Or(
			cmp.Compare(ta.GetSeconds(), tb.GetSeconds()),
			cmp.Compare(ta.GetNanos(), tb.GetNanos()),
			cmp.Compare(a.vk.key.Namespace, b.vk.key.Namespace),
			cmp.Compare(a.vk.key.Name, b.vk.key.Name),
			cmp.Compare(a.vk.kind, b.vk.kind),
		)
	})
	for i, it := range fresh {
		at := now.Add(time.Duration(i))
		next[it.vk] = seenAt{uid: it.meta.GetUid(), at: at}
		it.set(timestamppb.New(at))
	}
	f.times[cluster] = next
	f.stamped[cluster] = stampedInput{src: in, out: out}
	return out
}

// adopt takes the first-seen times a store held: a stored time is the
// older one for the same object, so it replaces the one in memory, and
// it is kept for the resources of clusters that have not reported since
// the start. Every input is stamped again.
func (f *firstSeen) adopt(stored []domain.KeptVersion) {
	for _, v := range stored {
		if v.FirstSeen.IsZero() || v.Key.Cluster == f.management {
			continue
		}
		vk := versionKey{kind: v.Kind, key: v.Key}
		m := f.times[v.Key.Cluster]
		if m == nil {
			m = map[versionKey]seenAt{}
			f.times[v.Key.Cluster] = m
		}
		if have, ok := m[vk]; ok && have.uid != "" && v.UID != "" && have.uid != v.UID {
			continue // the stored record is of an older object of that name
		}
		m[vk] = seenAt{uid: v.UID, at: v.FirstSeen}
	}
	clear(f.stamped)
}

// lookup returns when the resource vk was first seen.
func (f *firstSeen) lookup(vk versionKey) (seenAt, bool) {
	s, ok := f.times[vk.key.Cluster][vk]
	return s, ok
}

// each calls fn with every resource's first-seen time, in no order.
func (f *firstSeen) each(fn func(versionKey, seenAt)) {
	for _, m := range f.times {
		for vk, s := range m {
			fn(vk, s)
		}
	}
}
