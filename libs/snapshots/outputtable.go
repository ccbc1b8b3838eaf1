package snapshots

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/encoding/protowire"
)

// An output table is what translation knows of every object and status of
// an output it encodes, stored beside the encoding: per item, in the
// order of the encoding, its length and the key and content hashes
// ScanOutput would find in it. With it, distribution cuts a delta without
// walking every byte of the output: it checks the encoding's framing and
// the items it sends (ScanOutputTable, AppendDelta), where ScanOutput
// checks and hashes all of them (about 50 ms of 60 for a 21,000-object
// output at the reference estate).
//
// The table is trusted no further than the hashes in an index are: an
// item the table gives a wrong hash or key for is either sent, and then
// checked against the table and refused (ErrTableMismatch: distribution
// scans the whole output instead), or left out of a delta, and then the
// agent finds the state the delta makes is not the version it names
// (DeltaReceiver.Apply), deletes nothing and asks for the whole snapshot,
// which distribution only sends checked in full.
//
// Layout: "mpt1", the version (a length-prefixed string), the length of
// the encoding and the number of items (varints), then per item a flag
// byte (1 for a status), its length (a varint) and its key and content
// hashes (8 bytes each, little-endian).
const tableMagic = "mpt1"

// ErrTableMismatch is returned when an output table does not describe the
// encoding it is stored with.
var ErrTableMismatch = errors.New("the output table does not match the encoding")

// OutputEncoder encodes the successive versions of one cluster's output
// (EncodeOutput's bytes) with their tables. It keeps the last encoding and
// copies from it each object that the next version holds by the same
// pointer with the same field values (translation shares unchanged
// objects between versions), so that a version that changed a few objects
// of 21,000 costs a copy, not an encoding. An object is known by its
// address and the addresses and lengths of its strings, maps and spec:
// like OutputSealer, it takes objects as immutable once encoded, and holds
// on to those of the last version so that no address is reused. The zero
// value is ready to use; it is not safe for concurrent use.
type OutputEncoder struct {
	data   []byte
	kept   []keptEncoding
	spare  []keptEncoding
	hasher contentHasher
}

type keptEncoding struct {
	o     *snapshotv1.Object
	print objectPrint
	// The field in data, tag included, and where its value starts in it.
	start, end int
	value      uint8
	key, hash  uint64
}

// objectPrint is what an object's fields point to.
type objectPrint struct {
	strs         [4]unsafe.Pointer
	lens         [4]int
	labels, anns unsafe.Pointer
	spec         unsafe.Pointer
	specLen      int
}

func printOf(o *snapshotv1.Object) objectPrint {
	p := objectPrint{
		labels: mapPointer(o.Labels), anns: mapPointer(o.Annotations),
		spec: unsafe.Pointer(unsafe.SliceData(o.Spec)), specLen: len(o.Spec),
	}
	for i, s := range [4]string{o.ApiVersion, o.Kind, o.Namespace, o.Name} {
		p.strs[i], p.lens[i] = unsafe.Pointer(unsafe.StringData(s)), len(s)
	}
	return p
}

// mapPointer is the address of m's map header (a map value is a pointer).
func mapPointer(m map[string]string) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&m))
}

// Reset forgets the last encoding.
func (e *OutputEncoder) Reset() {
	e.data, e.kept, e.spare = nil, nil, nil
}

// Encode returns s's encoding (EncodeOutput's bytes) and its table.
func (e *OutputEncoder) Encode(s *snapshotv1.OutputSnapshot) (data, table []byte, err error) {
	if data, table, ok := e.encodeFast(s); ok {
		return data, table, nil
	}
	e.Reset()
	if data, err = EncodeOutput(s); err != nil {
		return nil, nil, err
	}
	scan, err := ScanOutput(data)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the output of cluster %q: %w", s.GetCluster(), err)
	}
	return data, scan.AppendTable(nil), nil
}

func (e *OutputEncoder) encodeFast(s *snapshotv1.OutputSnapshot) (data, table []byte, ok bool) {
	if !fastOutputOK || s == nil || len(s.ProtoReflect().GetUnknown()) > 0 {
		return nil, nil, false
	}
	// The last encoding's size per object predicts this one's, and
	// whatever the buffer holds beyond the encoding stays with it.
	size := objectsSize(s)
	if len(e.kept) > 0 {
		size = len(e.data)/len(e.kept)*(len(s.GetObjects())+1) + 4096
	}
	b, ok := outputHead(s, statusesSize(s, size))
	if !ok {
		return nil, nil, false
	}
	objs, sts := s.GetObjects(), s.GetStatuses()
	t := make([]byte, 0, 18*(len(objs)+len(sts)))
	kept := e.spare[:0]
	if cap(kept) > 2*len(objs)+1024 {
		kept = nil // a cluster that shrank: its old array goes
	}
	var enc objectEncoder
	// A run of kept fields, contiguous in e.data, still to be copied.
	runFrom, runTo := 0, 0
	flush := func() {
		b = append(b, e.data[runFrom:runTo]...)
		runFrom, runTo = 0, 0
	}
	j := 0
	for _, o := range objs {
		if o == nil {
			return nil, nil, false
		}
		print := printOf(o)
		// Both versions are sorted: skip the last version's objects that
		// come before o.
		for j < len(e.kept) && e.kept[j].o != o && CompareObjects(e.kept[j].o, o) < 0 {
			j++
		}
		if j < len(e.kept) && e.kept[j].o == o && e.kept[j].print == print {
			k := e.kept[j]
			j++
			if runTo != k.start {
				flush()
				runFrom = k.start
			}
			runTo = k.end
			n := k.end - k.start
			start := len(b) + (runTo - runFrom) - n
			kept = append(kept, keptEncoding{o: o, print: print, start: start, end: start + n, value: k.value, key: k.key, hash: k.hash})
			t = appendTableItem(t, false, n-int(k.value), k.key, k.hash)
			continue
		}
		flush()
		start := len(b)
		if b, ok = enc.object(b, o); !ok {
			return nil, nil, false
		}
		v, value := fieldValue(b[start:])
		k := keptEncoding{o: o, print: print, start: start, end: len(b), value: uint8(value),
			key: ObjectKeyHash(o), hash: e.hasher.sum(v, objectMapFields)}
		kept = append(kept, k)
		t = appendTableItem(t, false, len(v), k.key, k.hash)
	}
	flush()
	for _, st := range sts {
		start := len(b)
		if b, ok = appendStatus(b, st); !ok {
			return nil, nil, false
		}
		v, _ := fieldValue(b[start:])
		t = appendTableItem(t, true, len(v), StatusKeyHash(st), e.hasher.sum(v, nil))
	}
	if b, ok = outputTail(b, s); !ok {
		return nil, nil, false
	}
	head := appendTableHeader(make([]byte, 0, 64+len(t)), s.GetVersion(), len(b), len(objs)+len(sts))
	// The last version's entries are cleared, so that the objects of a
	// version no output holds any more (a cluster that shrank) are not
	// kept, and their array is reused unless it is much larger than this
	// version's.
	clear(e.kept)
	spare := e.kept[:0]
	if cap(spare) > 2*len(kept)+1024 {
		spare = nil
	}
	e.data, e.kept, e.spare = b, kept, spare
	return b, append(head, t...), true
}

// fieldValue returns the value of the length-delimited field that f
// starts with, and where it starts in f.
func fieldValue(f []byte) (value []byte, at int) {
	_, _, n := consumeTag(f)
	v, m := protowire.ConsumeBytes(f[n:])
	return v, n + m - len(v)
}

func appendTableHeader(b []byte, version string, dataLen, items int) []byte {
	b = append(b, tableMagic...)
	b = protowire.AppendString(b, version)
	b = protowire.AppendVarint(b, uint64(dataLen))
	return protowire.AppendVarint(b, uint64(items))
}

func appendTableItem(b []byte, status bool, size int, key, hash uint64) []byte {
	flag := byte(0)
	if status {
		flag = 1
	}
	b = append(b, flag)
	b = protowire.AppendVarint(b, uint64(size))
	b = binary.LittleEndian.AppendUint64(b, key)
	return binary.LittleEndian.AppendUint64(b, hash)
}

// AppendTable appends the scanned output's table to b.
func (s *OutputScan) AppendTable(b []byte) []byte {
	b = appendTableHeader(b, s.Version, len(s.data), len(s.items))
	for _, it := range s.items {
		b = appendTableItem(b, it.status, len(it.raw), it.key, it.hash)
	}
	return b
}

// tableReader reads a table's items in order.
type tableReader struct {
	b     []byte
	items uint64
}

func readTableHeader(table []byte) (version string, dataLen uint64, r tableReader, err error) {
	if len(table) < len(tableMagic) || string(table[:len(tableMagic)]) != tableMagic {
		return "", 0, r, fmt.Errorf("%w: not a table", ErrTableMismatch)
	}
	b := table[len(tableMagic):]
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return "", 0, r, fmt.Errorf("%w: version: %w", ErrTableMismatch, protowire.ParseError(n))
	}
	b = b[n:]
	dataLen, n = protowire.ConsumeVarint(b)
	if n < 0 {
		return "", 0, r, fmt.Errorf("%w: length: %w", ErrTableMismatch, protowire.ParseError(n))
	}
	b = b[n:]
	r.items, n = protowire.ConsumeVarint(b)
	if n < 0 || r.items > uint64(len(b)) {
		return "", 0, r, fmt.Errorf("%w: item count", ErrTableMismatch)
	}
	r.b = b[n:]
	return string(v), dataLen, r, nil
}

func (r *tableReader) next() (status bool, size int, key, hash uint64, err error) {
	if r.items == 0 || len(r.b) < 1 {
		return false, 0, 0, 0, fmt.Errorf("%w: more items than the table holds", ErrTableMismatch)
	}
	flag := r.b[0]
	n64, n := protowire.ConsumeVarint(r.b[1:])
	if flag > 1 || n < 0 || len(r.b) < 1+n+16 || n64 > math.MaxInt32 {
		return false, 0, 0, 0, fmt.Errorf("%w: item %d does not parse", ErrTableMismatch, r.items)
	}
	b := r.b[1+n:]
	r.b, r.items = b[16:], r.items-1
	return flag == 1, int(n64), binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:]), nil
}

// ScanOutputTable is ScanOutput for an encoding stored with its table
// (OutputEncoder's): it walks the encoding's fields and takes each
// object's and status's hashes from the table, checking the other fields
// as ScanOutput does but not the objects and statuses, which AppendDelta
// checks as it sends them. Send the output whole only as Verified returns
// it. An error wrapping ErrTableMismatch means the table does not frame
// this encoding; one wrapping ErrMalformed, that the encoding does not
// parse.
func ScanOutputTable(data, table []byte) (*OutputScan, error) {
	version, dataLen, r, err := readTableHeader(table)
	if err != nil {
		return nil, err
	}
	if dataLen != uint64(len(data)) {
		return nil, fmt.Errorf("%w: it is of %d bytes, the encoding of %d", ErrTableMismatch, dataLen, len(data))
	}
	s := &OutputScan{data: data, unchecked: true, items: make([]scanItem, 0, r.items)}
	b := data
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, fmt.Errorf("%w: field %d: %w", ErrMalformed, num, protowire.ParseError(m))
		}
		whole, value := b[:n+m], b[n:n+m]
		b = b[n+m:]
		if typ == protowire.BytesType && (num == outputObjects || num == outputStatuses) {
			v, _ := protowire.ConsumeBytes(value)
			status, size, key, hash, err := r.next()
			if err != nil {
				return nil, err
			}
			if status != (num == outputStatuses) || size != len(v) {
				return nil, fmt.Errorf("%w: item %d", ErrTableMismatch, len(s.items))
			}
			s.items = append(s.items, scanItem{status: status, key: key, hash: hash, raw: v})
			if status {
				s.Statuses++
			} else {
				s.Objects++
			}
			continue
		}
		if err := checkMessage(outputSchema, whole, 0); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		if typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(value)
			if num == outputVersionField {
				s.Version = string(v)
			}
			if num == outputIssued {
				s.IssuedCertificates++
			}
		}
		s.rest = append(s.rest, whole)
	}
	if r.items != 0 {
		return nil, fmt.Errorf("%w: %d items more than the encoding holds", ErrTableMismatch, r.items)
	}
	if s.Version != version {
		return nil, fmt.Errorf("%w: it is of version %q, the encoding of %q", ErrTableMismatch, version, s.Version)
	}
	s.index()
	return s, nil
}

// Verified returns s when its every item was checked (ScanOutput's), else
// the ScanOutput of its encoding: what may be sent whole.
func (s *OutputScan) Verified() (*OutputScan, error) {
	if !s.unchecked {
		return s, nil
	}
	return ScanOutput(s.data)
}

// checkItem checks an item that the table described: that it decodes,
// and has the key and content hash the table gives it.
func (s *OutputScan) checkItem(h *contentHasher, it scanItem) error {
	schema, keys, maps := objectSchema, objectKeyFields, objectMapFields
	if it.status {
		schema, keys, maps = statusSchema, statusKeyFields, nil
	}
	if err := checkMessage(schema, it.raw, 1); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if wireKeyHash(it.raw, keys) != it.key || h.sum(it.raw, maps) != it.hash {
		return fmt.Errorf("%w: an item's hashes", ErrTableMismatch)
	}
	return nil
}

var (
	objectSchema = outputSchema.field(outputObjects).msg
	statusSchema = outputSchema.field(outputStatuses).msg
)
