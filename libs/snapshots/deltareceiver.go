package snapshots

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

// DeltaReceiver holds the whole output snapshot an agent received last and
// makes the next version from a delta, as ApplyDelta does, with the same
// check: the state it makes must hash to the version the delta names, or
// it is refused, and the receiver then holds nothing (the agent asks for
// the whole snapshot). What it computed for the version it holds is kept
// for the next one, which shares all but the changed objects and
// statuses: their key hashes, and the bytes each one adds to the content
// hash (for an object, with its body digest). So a delta that changes one
// object of 21,000 costs hashing the output's encoding from those bytes,
// not encoding and digesting every object again. The zero value holds
// nothing; it is safe for concurrent use.
type DeltaReceiver struct {
	mu   sync.Mutex
	held *snapshotv1.OutputSnapshot
	// objects and statuses index the held snapshot by key hash, and
	// objEnc and stEnc hold the encodings of its objects and statuses in
	// its order (nil when the fast encoding does not cover it); nil until
	// the first delta from it.
	objects       map[uint64]*snapshotv1.Object
	statuses      map[uint64]*snapshotv1.ResourceStatus
	objEnc, stEnc [][]byte
	// sorted says the held snapshot's objects and statuses are strictly
	// in order, as found when it was made from a delta: the next merge
	// then compares only the elements next to the changed ones.
	sorted bool
	// spare holds the arrays of the version before the held one, which
	// the next version's are made in: an edit then allocates in
	// proportion to what it changed, not to the whole output.
	spare struct {
		objEnc, stEnc   [][]byte
		objFrom, stFrom []int
	}
	// labels shares the objects' label maps: an output's objects carry
	// one or a few label sets.
	labels LabelSets
}

// Hold makes s, a whole snapshot, the one deltas apply to. Its objects
// with equal labels come to share one map (LabelSets), as do the objects
// of the deltas applied to it: hold a snapshot as it is received, before
// anything else reads it.
func (r *DeltaReceiver) Hold(s *snapshotv1.OutputSnapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.labels.ShareObjects(s.GetObjects())
	r.hold(s)
}

func (r *DeltaReceiver) hold(s *snapshotv1.OutputSnapshot) {
	r.held, r.objects, r.statuses, r.objEnc, r.stEnc, r.sorted = s, nil, nil, nil, nil, false
}

// Drop forgets the held snapshot: the next delta is refused.
func (r *DeltaReceiver) Drop() { r.Hold(nil) }

// Version returns the version of the held snapshot, "" when none.
func (r *DeltaReceiver) Version() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held.GetVersion()
}

// Apply makes the version d names from the held snapshot and holds it.
// An error wraps ErrDeltaMismatch, and the receiver then holds nothing.
// The result shares the held snapshot's objects and statuses and d's,
// none of which may be modified; d's objects' labels are shared as Hold
// shares them.
func (r *DeltaReceiver) Apply(d *snapshotv1.OutputDelta) (*snapshotv1.OutputSnapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out, err := r.apply(d)
	if err != nil {
		r.hold(nil)
		return nil, err
	}
	return out, nil
}

func (r *DeltaReceiver) apply(d *snapshotv1.OutputDelta) (*snapshotv1.OutputSnapshot, error) {
	base := r.held
	if base == nil {
		return nil, fmt.Errorf("%w: it is from version %s, and no whole snapshot is held", ErrDeltaMismatch, d.GetBaseVersion())
	}
	if err := checkDelta(base, d); err != nil {
		return nil, err
	}
	r.labels.ShareObjects(d.GetObjects())
	if r.objects == nil {
		r.objects = make(map[uint64]*snapshotv1.Object, len(base.GetObjects()))
		for _, o := range base.GetObjects() {
			r.objects[ObjectKeyHash(o)] = o
		}
		r.statuses = make(map[uint64]*snapshotv1.ResourceStatus, len(base.GetStatuses()))
		for _, s := range base.GetStatuses() {
			r.statuses[StatusKeyHash(s)] = s
		}
	}
	objs, objFrom, objKeys := mergeSorted(base.GetObjects(), d.GetObjects(), d.GetRemovedObjects(), r.objects, ObjectKeyHash, CompareObjects, r.spare.objFrom)
	sts, stFrom, stKeys := mergeSorted(base.GetStatuses(), d.GetStatuses(), d.GetRemovedStatuses(), r.statuses, StatusKeyHash, CompareStatuses, r.spare.stFrom)
	r.spare.objFrom, r.spare.stFrom = objFrom, stFrom
	out := ShallowCopy(d.GetRest())
	out.Objects, out.Statuses = objs, sts
	// In order already, unless the base was not or the delta holds two
	// objects of one key; then it is sorted and hashed from scratch.
	var objEnc, stEnc [][]byte
	v, ok := "", false
	sorted := false
	if r.sorted {
		sorted = mergedStrictlySorted(objs, objFrom, CompareObjects) && mergedStrictlySorted(sts, stFrom, CompareStatuses)
	} else {
		sorted = strictlySorted(objs) && statusesStrictlySorted(sts)
	}
	if sorted {
		objEnc, stEnc = reuse(r.spare.objEnc, r.objEnc, objFrom), reuse(r.spare.stEnc, r.stEnc, stFrom)
		v, ok = partsVersion(out, objEnc, stEnc)
	}
	if !ok {
		objEnc, stEnc, sorted = nil, nil, false
		SortOutput(out)
		v = OutputVersion(out)
	}
	if v != d.GetVersion() {
		return nil, fmt.Errorf("%w: the state it makes from %s is version %s, not %s", ErrDeltaMismatch, base.GetVersion(), v, d.GetVersion())
	}
	out.Version = v
	for _, k := range d.GetRemovedObjects() {
		delete(r.objects, k)
	}
	for i, o := range d.GetObjects() {
		r.objects[objKeys[i]] = o
	}
	for _, k := range d.GetRemovedStatuses() {
		delete(r.statuses, k)
	}
	for i, s := range d.GetStatuses() {
		r.statuses[stKeys[i]] = s
	}
	r.spare.objEnc, r.spare.stEnc = r.objEnc, r.stEnc
	r.held, r.objEnc, r.stEnc, r.sorted = out, objEnc, stEnc, sorted
	return out, nil
}

// reuse returns the encodings of a merged list, in dst's array when it is
// large enough: those of the base elements it holds, nil for the others.
// held may be nil (none known).
func reuse(dst, held [][]byte, from []int) [][]byte {
	out := slices.Grow(dst[:0], len(from))[:len(from)]
	for i, j := range from {
		if j >= 0 && held != nil {
			out[i] = held[j]
		} else {
			out[i] = nil
		}
	}
	// The rest of a larger array is not read, but would hold encodings.
	clear(out[len(from):cap(out)])
	return out
}

// mergedStrictlySorted reports whether out, which mergeSorted made from a
// strictly sorted base (from says which elements came from it), is
// strictly sorted: only the pairs next to an element not from the base
// can be out of order.
func mergedStrictlySorted[T any](out []T, from []int, cmp func(a, b T) int) bool {
	for i := range out {
		if from[i] >= 0 {
			continue
		}
		if i > 0 && cmp(out[i-1], out[i]) >= 0 {
			return false
		}
		if i+1 < len(out) && from[i+1] >= 0 && cmp(out[i], out[i+1]) >= 0 {
			return false
		}
	}
	return true
}

func statusesStrictlySorted(sts []*snapshotv1.ResourceStatus) bool {
	for i := 1; i < len(sts); i++ {
		if CompareStatuses(sts[i-1], sts[i]) >= 0 {
			return false
		}
	}
	return true
}

// checkDelta checks what ApplyDelta checks before it merges.
func checkDelta(base *snapshotv1.OutputSnapshot, d *snapshotv1.OutputDelta) error {
	if base.GetVersion() != d.GetBaseVersion() || base.GetVersion() == "" {
		return fmt.Errorf("%w: it is from version %q, the agent holds %q", ErrDeltaMismatch, d.GetBaseVersion(), base.GetVersion())
	}
	if d.GetRest() == nil || d.GetVersion() == "" {
		return fmt.Errorf("%w: it has no version or no rest", ErrDeltaMismatch)
	}
	if d.GetRest().GetCluster() != base.GetCluster() {
		return fmt.Errorf("%w: it is for cluster %q, the base for %q", ErrDeltaMismatch, d.GetRest().GetCluster(), base.GetCluster())
	}
	return nil
}

// mergeSorted returns base, which is in cmp order, without the removed
// keys and the keys of changed, plus changed, in cmp order; byKey indexes
// base by key hash. It also returns, per element of the result, its
// index in base or -1 for one of changed (in fromBuf's array when it is
// large enough), and the key hashes of changed.
func mergeSorted[T comparable](base, changed []T, removed []uint64, byKey map[uint64]T, key func(T) uint64, cmp func(a, b T) int, fromBuf []int) (out []T, from []int, keys []uint64) {
	drop := make(map[T]bool, len(removed)+len(changed))
	for _, k := range removed {
		if b, ok := byKey[k]; ok {
			drop[b] = true
		}
	}
	keys = make([]uint64, len(changed))
	for i, c := range changed {
		keys[i] = key(c)
		if b, ok := byKey[keys[i]]; ok {
			drop[b] = true
		}
	}
	add := slices.Clone(changed)
	slices.SortStableFunc(add, cmp)
	out = make([]T, 0, len(base)+len(changed))
	from = slices.Grow(fromBuf[:0], len(base)+len(changed))
	if at, ok := dropIndexes(base, drop, cmp); ok {
		// base is in order where it matters: the few places that change
		// are found by binary search and the runs between them copied,
		// rather than every element compared and looked up.
		i, j, d := 0, 0, 0
		for {
			p := len(base)
			if d < len(at) {
				p = at[d]
			}
			for j < len(add) {
				// add[j] goes before the first element of base it sorts
				// before, as in the loop below.
				q := i + sort.Search(len(base)-i, func(k int) bool { return cmp(add[j], base[i+k]) < 0 })
				if q > p {
					break
				}
				out = append(out, base[i:q]...)
				for k := i; k < q; k++ {
					from = append(from, k)
				}
				i = q
				out, from = append(out, add[j]), append(from, -1)
				j++
			}
			out = append(out, base[i:p]...)
			for k := i; k < p; k++ {
				from = append(from, k)
			}
			if p == len(base) {
				return out, from, keys
			}
			i, d = p+1, d+1 // base[p] is dropped
		}
	}
	j := 0
	for i, b := range base {
		if len(drop) > 0 && drop[b] {
			continue
		}
		for j < len(add) && cmp(add[j], b) < 0 {
			out, from = append(out, add[j]), append(from, -1)
			j++
		}
		out, from = append(out, b), append(from, i)
	}
	for ; j < len(add); j++ {
		out, from = append(out, add[j]), append(from, -1)
	}
	return out, from, keys
}

// dropIndexes returns the indexes in base of the elements of drop, in
// order, found by binary search; ok is false when one is not found there
// (base is not in order).
func dropIndexes[T comparable](base []T, drop map[T]bool, cmp func(a, b T) int) (at []int, ok bool) {
	at = make([]int, 0, len(drop))
	for b := range drop {
		i := sort.Search(len(base), func(k int) bool { return cmp(base[k], b) >= 0 })
		for i < len(base) && base[i] != b && cmp(base[i], b) == 0 {
			i++
		}
		if i == len(base) || base[i] != b {
			return nil, false
		}
		at = append(at, i)
	}
	slices.Sort(at)
	return at, true
}

// CompareStatuses orders the statuses of an output as SortOutput does: by
// API version, kind, namespace and name of their resource.
func CompareStatuses(a, b *snapshotv1.ResourceStatus) int {
	if c := strings.Compare(a.GetApiVersion(), b.GetApiVersion()); c != 0 {
		return c
	}
	if c := strings.Compare(a.GetKind(), b.GetKind()); c != 0 {
		return c
	}
	if c := strings.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
		return c
	}
	return strings.Compare(a.GetName(), b.GetName())
}
