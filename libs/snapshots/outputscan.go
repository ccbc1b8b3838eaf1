package snapshots

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// OutputScan is what ScanOutput reads of an encoded output snapshot
// without decoding it: where each object and status is in the encoding,
// and their key and content hashes. Distribution sends agents the bytes
// translation stored, whole or as a delta cut from them (AppendDelta),
// so that a one-object edit of a 21,000-object output costs it a walk over
// the encoding instead of decoding, indexing and encoding it again.
type OutputScan struct {
	// Version is the version the encoding holds (field 2; the store keeps
	// the version beside it too).
	Version string
	// Index is the output's index, the one IndexOutput returns for the
	// decoded snapshot.
	Index OutputIndex
	// Objects, Statuses and IssuedCertificates count the entries of those
	// fields; they are what an ack of the version may report.
	Objects, Statuses, IssuedCertificates int

	data []byte
	// unchecked: the items were described by a table (ScanOutputTable),
	// not checked; AppendDelta checks those it sends.
	unchecked bool
	// items are the objects and statuses, in the order of the encoding.
	items []scanItem
	// rest are the encoding's other fields, whole (tag included), in order.
	rest [][]byte
}

type scanItem struct {
	status    bool
	key, hash uint64
	// raw is the field's value: the object's or status's own encoding.
	raw []byte
}

// The OutputSnapshot, Object and ResourceStatus fields the scan reads.
var (
	outputDesc         = (&snapshotv1.OutputSnapshot{}).ProtoReflect().Descriptor()
	outputSchema       = compileMessage(outputDesc, map[protoreflect.FullName]*wireMessage{})
	outputVersionField = field(outputDesc, "version").Number()
	outputObjects      = field(outputDesc, "objects").Number()
	outputStatuses     = field(outputDesc, "statuses").Number()
	outputIssued       = field(outputDesc, "issued_certificates").Number()
	objectDesc         = (&snapshotv1.Object{}).ProtoReflect().Descriptor()
	statusDesc         = (&snapshotv1.ResourceStatus{}).ProtoReflect().Descriptor()
	// keyFields are the fields of an object's or status's key, in the
	// order the key hash takes them: api_version, kind, namespace, name.
	objectKeyFields = keyFieldNumbers(objectDesc)
	statusKeyFields = keyFieldNumbers(statusDesc)
	// objectMapFields are Object's map fields, whose entries an encoder
	// may write in any order.
	objectMapFields = []protowire.Number{field(objectDesc, "labels").Number(), field(objectDesc, "annotations").Number()}
	deltaDesc       = (&snapshotv1.OutputDelta{}).ProtoReflect().Descriptor()
)

func keyFieldNumbers(md protoreflect.MessageDescriptor) [4]protowire.Number {
	return [4]protowire.Number{
		field(md, "api_version").Number(), field(md, "kind").Number(),
		field(md, "namespace").Number(), field(md, "name").Number(),
	}
}

// ScanOutput reads an encoded OutputSnapshot. It refuses (wrapping
// ErrMalformed) anything proto.Unmarshal would refuse, so that what is cut
// from the encoding decodes wherever it is sent.
func ScanOutput(data []byte) (*OutputScan, error) {
	if err := checkMessage(outputSchema, data, 0); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	s := &OutputScan{data: data}
	var h contentHasher
	b := data
	// The encoding is valid: below, every tag and value parses.
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		whole, value := b[:n+m], b[n:n+m]
		b = b[n+m:]
		if typ != protowire.BytesType {
			s.rest = append(s.rest, whole)
			continue
		}
		v, _ := protowire.ConsumeBytes(value)
		switch num {
		case outputObjects:
			s.items = append(s.items, scanItem{key: wireKeyHash(v, objectKeyFields), hash: h.sum(v, objectMapFields), raw: v})
			s.Objects++
		case outputStatuses:
			s.items = append(s.items, scanItem{status: true, key: wireKeyHash(v, statusKeyFields), hash: h.sum(v, nil), raw: v})
			s.Statuses++
		default:
			if num == outputVersionField {
				s.Version = string(v)
			}
			if num == outputIssued {
				s.IssuedCertificates++
			}
			s.rest = append(s.rest, whole)
		}
	}
	s.index()
	return s, nil
}

// index fills s.Index from s.items.
func (s *OutputScan) index() {
	objs := make([]IndexEntry, 0, s.Objects)
	sts := make([]IndexEntry, 0, s.Statuses)
	for _, it := range s.items {
		if it.status {
			sts = append(sts, IndexEntry{it.key, it.hash})
		} else {
			objs = append(objs, IndexEntry{it.key, it.hash})
		}
	}
	s.Index = OutputIndex{Objects: sortEntries(objs), Statuses: sortEntries(sts)}
}

// Size is the length of the whole encoding.
func (s *OutputScan) Size() int { return len(s.data) }

// Data is the whole encoding scanned. It is shared: nobody may modify it.
func (s *OutputScan) Data() []byte { return s.data }

// AppendDelta appends to b the encoding of the OutputDelta that makes the
// scanned version from the version baseVersion, whose index is base:
// every object and status whose key base does not hold or whose content
// hash differs, the key hashes of what base holds and the scanned version
// does not (sorted), and the version's other fields as its rest. The
// objects and statuses keep the order of the encoding. For a scan made
// from a table, each object and status sent is checked first; an error
// (ErrMalformed, ErrTableMismatch) means the delta cannot be cut from
// this scan, and b is returned as it was.
func (s *OutputScan) AppendDelta(b []byte, baseVersion string, base OutputIndex) ([]byte, error) {
	start := len(b)
	var hasher contentHasher
	b = appendString(b, deltaField("base_version"), baseVersion)
	b = appendString(b, deltaField("version"), s.Version)
	objects, statuses := deltaField("objects"), deltaField("statuses")
	for _, it := range s.items {
		held, num := base.Objects, objects
		if it.status {
			held, num = base.Statuses, statuses
		}
		if h, ok := held.Get(it.key); ok && h == it.hash {
			continue
		}
		if s.unchecked {
			if err := s.checkItem(&hasher, it); err != nil {
				return b[:start], err
			}
		}
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendBytes(b, it.raw)
	}
	b = appendRemoved(b, deltaField("removed_objects"), base.Objects, s.Index.Objects)
	b = appendRemoved(b, deltaField("removed_statuses"), base.Statuses, s.Index.Statuses)
	restLen := 0
	for _, r := range s.rest {
		restLen += len(r)
	}
	b = protowire.AppendTag(b, deltaField("rest"), protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(restLen))
	for _, r := range s.rest {
		b = append(b, r...)
	}
	return b, nil
}

func deltaField(name string) protowire.Number { return field(deltaDesc, name).Number() }

func appendString(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

// appendRemoved appends the keys of base that next does not hold, sorted,
// as a packed fixed64 field.
func appendRemoved(b []byte, num protowire.Number, base, next IndexEntries) []byte {
	var removed []uint64
	j := 0
	for _, e := range base {
		for j < len(next) && next[j].Key < e.Key {
			j++
		}
		if j == len(next) || next[j].Key != e.Key {
			removed = append(removed, e.Key)
		}
	}
	if len(removed) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(8*len(removed)))
	for _, k := range removed {
		b = binary.LittleEndian.AppendUint64(b, k)
	}
	return b
}

// wireKeyHash is ObjectKeyHash (or StatusKeyHash) of an encoded object or
// status: of the last value of each key field, as a decoder keeps it.
func wireKeyHash(msg []byte, fields [4]protowire.Number) uint64 {
	var parts [4][]byte
	for len(msg) > 0 {
		num, typ, n := consumeTag(msg)
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if typ == protowire.BytesType {
			for i, f := range fields {
				if num == f {
					parts[i], _ = protowire.ConsumeBytes(msg[n : n+m])
				}
			}
		}
		msg = msg[n+m:]
	}
	size := 3
	for _, p := range parts {
		size += len(p)
	}
	var buf [256]byte
	k := buf[:0]
	if size > len(buf) {
		k = make([]byte, 0, size)
	}
	for i, p := range parts {
		if i > 0 {
			k = append(k, 0)
		}
		k = append(k, p...)
	}
	return hash8(k)
}

// contentHasher computes the content hash of an object or a status, the
// one an OutputIndex keeps: the 64-bit XXH64 (seed 0) of its encoding with
// its fields in number order and each map field's entries sorted, so that
// every encoding protobuf-go writes of the same message (its map order is
// not fixed) has the same hash. It keeps its buffers between calls.
//
// The hash only tells distribution which objects changed since the version
// an agent holds; it is not cryptographic, and need not be: an object
// whose new content collided with its old one would be left out of a
// delta, and the agent, which checks the state a delta makes against the
// version (SHA-256 over the content, VerifyOutput) before deleting
// anything (DeltaReceiver.Apply recomputes the output version), would find
// the state wrong and ask for the whole snapshot.
// XXH64 costs a tenth of SHA-256, which distribution paid over every byte
// of every changed output (14 MB for one cluster at the reference estate).
type contentHasher struct {
	fields []wireRecord
	h      xxhash.Digest
}

type wireRecord struct {
	num protowire.Number
	raw []byte // tag and value
}

func (c *contentHasher) sum(msg []byte, mapFields []protowire.Number) uint64 {
	c.fields = c.fields[:0]
	for len(msg) > 0 {
		num, typ, n := consumeTag(msg)
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		c.fields = append(c.fields, wireRecord{num: num, raw: msg[:n+m]})
		msg = msg[n+m:]
	}
	order := func(a, b wireRecord) int {
		if a.num != b.num {
			return cmp.Compare(a.num, b.num)
		}
		if slices.Contains(mapFields, a.num) {
			return bytes.Compare(a.raw, b.raw)
		}
		return 0
	}
	// Deterministic encodings (translation's) are in order already.
	if !slices.IsSortedFunc(c.fields, order) {
		slices.SortStableFunc(c.fields, order)
	}
	c.h.Reset()
	for _, f := range c.fields {
		c.h.Write(f.raw)
	}
	return c.h.Sum64()
}

// encodedContentHash is the content hash of a decoded object or status.
func encodedContentHash(c *contentHasher, m proto.Message, mapFields []protowire.Number) uint64 {
	b, err := proto.Marshal(m)
	if err != nil {
		b = []byte("marshal error: " + err.Error())
	}
	return c.sum(b, mapFields)
}
