package snapshots

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/proto"
)

// OutputIndex is what distribution keeps of an output version to send
// deltas from it: per object and per status, the hash of its key and of
// its content, 16 bytes each. At the reference estate's 21,000 objects a
// cluster's index is about 340 KB, where its output is tens of megabytes.
//
// The hashes are 8 bytes of SHA-256. A collision could only make a delta
// wrong, and the agent checks every state a delta makes against the new
// version's full content hash before it uses it (ApplyDelta); a wrong
// delta costs a whole snapshot, never a wrong state.
//
// Each list is sorted by key hash, with each key once (of an output that
// holds a key twice, the last in the encoding): distribution diffs a
// version against the one an agent holds by merging the two, and stores
// and reads an index without sorting or hashing it again (at the
// reference estate, Go maps of 21,000 entries cost it 40% of its CPU).
type OutputIndex struct {
	Objects  IndexEntries
	Statuses IndexEntries
}

// IndexEntry is an object's or status's key hash and content hash.
type IndexEntry struct{ Key, Hash uint64 }

// IndexEntries are index entries sorted by key, each key once.
type IndexEntries []IndexEntry

// Get returns the content hash of key.
func (e IndexEntries) Get(key uint64) (hash uint64, ok bool) {
	lo, hi := 0, len(e)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if e[m].Key < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(e) && e[lo].Key == key {
		return e[lo].Hash, true
	}
	return 0, false
}

// sortEntries sorts entries, given in the order of an encoding, by key,
// and keeps the last of each key. The sort is a stable radix sort: 21,000
// entries a version, for every changed output of an edit.
func sortEntries(e []IndexEntry) IndexEntries {
	if len(e) < 64 {
		slices.SortStableFunc(e, func(a, b IndexEntry) int { return cmp.Compare(a.Key, b.Key) })
	} else {
		radixSort(e)
	}
	out := e[:0]
	for i, x := range e {
		if i+1 < len(e) && e[i+1].Key == x.Key {
			continue // a later one of the same key
		}
		out = append(out, x)
	}
	return out
}

// radixSort sorts e by key, stably, a byte at a time.
func radixSort(e []IndexEntry) {
	src, dst := e, make([]IndexEntry, len(e))
	for shift := 0; shift < 64; shift += 8 {
		var count [256]int
		for _, x := range src {
			count[byte(x.Key>>shift)]++
		}
		if count[byte(src[0].Key>>shift)] == len(src) {
			continue // every key has this byte
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for _, x := range src {
			b := byte(x.Key >> shift)
			dst[count[b]] = x
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &e[0] {
		copy(e, src)
	}
}

// hash8 is the first 8 bytes of the SHA-256 of b.
func hash8(b []byte) uint64 {
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint64(sum[:8])
}

func keyHash(parts ...string) uint64 {
	n := 0
	for _, p := range parts {
		n += len(p) + 1
	}
	b := make([]byte, 0, n)
	for i, p := range parts {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, p...)
	}
	return hash8(b)
}

// ObjectKeyHash is the key hash of an object: of its API version, kind,
// namespace and name.
func ObjectKeyHash(o *snapshotv1.Object) uint64 {
	return keyHash(o.GetApiVersion(), o.GetKind(), o.GetNamespace(), o.GetName())
}

// StatusKeyHash is the key hash of a status: of its resource's API
// version, kind, namespace and name.
func StatusKeyHash(s *snapshotv1.ResourceStatus) uint64 {
	return keyHash(s.GetApiVersion(), s.GetKind(), s.GetNamespace(), s.GetName())
}

// IndexOutput returns the index of an output: the one ScanOutput finds in
// any encoding of it.
func IndexOutput(s *snapshotv1.OutputSnapshot) OutputIndex {
	objs := make([]IndexEntry, 0, len(s.GetObjects()))
	sts := make([]IndexEntry, 0, len(s.GetStatuses()))
	var c contentHasher
	for _, o := range s.GetObjects() {
		objs = append(objs, IndexEntry{ObjectKeyHash(o), encodedContentHash(&c, o, objectMapFields)})
	}
	for _, st := range s.GetStatuses() {
		sts = append(sts, IndexEntry{StatusKeyHash(st), encodedContentHash(&c, st, nil)})
	}
	return OutputIndex{Objects: sortEntries(objs), Statuses: sortEntries(sts)}
}

// Encode returns the index as bytes: the object and status counts, then
// each pair, sorted, as big-endian 8-byte words.
func (x OutputIndex) Encode() []byte {
	b := make([]byte, 0, 16+16*(len(x.Objects)+len(x.Statuses)))
	b = binary.BigEndian.AppendUint64(b, uint64(len(x.Objects)))
	b = binary.BigEndian.AppendUint64(b, uint64(len(x.Statuses)))
	for _, e := range [2]IndexEntries{x.Objects, x.Statuses} {
		for _, x := range e {
			b = binary.BigEndian.AppendUint64(b, x.Key)
			b = binary.BigEndian.AppendUint64(b, x.Hash)
		}
	}
	return b
}

// DecodeIndex reads what Encode wrote; keys out of order are refused.
func DecodeIndex(b []byte) (OutputIndex, error) {
	if len(b) < 16 {
		return OutputIndex{}, fmt.Errorf("output index: %d bytes, want at least 16", len(b))
	}
	objects, statuses := binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
	b = b[16:]
	if objects > uint64(len(b))/16 || statuses > uint64(len(b))/16 || (objects+statuses)*16 != uint64(len(b)) {
		return OutputIndex{}, fmt.Errorf("output index: %d objects and %d statuses do not fit %d bytes", objects, statuses, len(b))
	}
	all := make([]IndexEntry, objects+statuses)
	for i := range all {
		all[i] = IndexEntry{binary.BigEndian.Uint64(b[16*i:]), binary.BigEndian.Uint64(b[16*i+8:])}
	}
	x := OutputIndex{Objects: all[:objects:objects], Statuses: all[objects:]}
	for _, e := range [2]IndexEntries{x.Objects, x.Statuses} {
		for i := 1; i < len(e); i++ {
			if e[i-1].Key >= e[i].Key {
				return OutputIndex{}, fmt.Errorf("output index: keys out of order at entry %d", i)
			}
		}
	}
	return x, nil
}

// Diff returns the delta that makes next from the version base indexes,
// and next's own index: what distribution cuts from next's encoding
// (ScanOutput, AppendDelta), decoded.
func Diff(baseVersion string, base OutputIndex, next *snapshotv1.OutputSnapshot) (*snapshotv1.OutputDelta, OutputIndex, error) {
	b, err := proto.Marshal(next)
	if err != nil {
		return nil, OutputIndex{}, fmt.Errorf("encode the output: %w", err)
	}
	scan, err := ScanOutput(b)
	if err != nil {
		return nil, OutputIndex{}, err
	}
	b, err = scan.AppendDelta(nil, baseVersion, base)
	if err != nil {
		return nil, OutputIndex{}, err
	}
	d := &snapshotv1.OutputDelta{}
	if err := proto.Unmarshal(b, d); err != nil {
		return nil, OutputIndex{}, fmt.Errorf("decode the delta: %w", err)
	}
	return d, scan.Index, nil
}

// ErrDeltaMismatch is returned by ApplyDelta when the state a delta makes
// is not the version it names.
var ErrDeltaMismatch = errors.New("the delta does not check out")

// ApplyDelta builds the version d makes from base, which must be the
// version d is from, and checks it: its content hash must be d's version.
// base is not modified; the result shares its objects and d's.
func ApplyDelta(base *snapshotv1.OutputSnapshot, d *snapshotv1.OutputDelta) (*snapshotv1.OutputSnapshot, error) {
	var r DeltaReceiver
	r.Hold(base)
	return r.Apply(d)
}

// ShallowCopy returns a new message of m's type whose fields share m's
// values.
func ShallowCopy[M proto.Message](m M) M {
	src := m.ProtoReflect()
	dst := src.New()
	for fd, v := range src.Range {
		dst.Set(fd, v)
	}
	return dst.Interface().(M)
}
