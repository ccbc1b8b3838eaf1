package snapshots

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The output version is the SHA-256 of the deterministic protobuf encoding
// of the snapshot's content (contentVersion). Outputs hold up to millions of
// objects, and protobuf-go encodes their map fields through reflection and
// into one buffer as large as the snapshot; fastOutputVersion writes the
// same bytes straight into the hash instead, encoding Object and
// ResourceStatus by hand. It covers the fields the messages had when it was
// written (outputFields, objectFields, statusFields): when the schema has
// more, or a message holds unknown fields or a string that is not UTF-8
// (which protobuf refuses to encode), OutputVersion takes the reflective
// path. TestFastOutputVersion checks the two agree byte for byte.

var (
	outputFields = map[protoreflect.FieldNumber]protoreflect.Name{
		1: "cluster", 2: "version", 3: "generated_at", 4: "objects", 5: "statuses", 6: "input_versions",
		7: "issued_certificates", 8: "wasm_filters", 9: "access_log_policies",
	}
	objectFields = map[protoreflect.FieldNumber]protoreflect.Name{
		1: "api_version", 2: "kind", 3: "namespace", 4: "name", 5: "labels", 6: "annotations", 7: "spec",
	}
	statusFields = map[protoreflect.FieldNumber]protoreflect.Name{
		1: "api_version", 2: "kind", 3: "namespace", 4: "name", 5: "observed_generation", 6: "status",
	}
	// fastOutputOK says the generated messages have exactly the fields
	// the hand encoding knows.
	fastOutputOK = sameFields((&snapshotv1.OutputSnapshot{}).ProtoReflect().Descriptor(), outputFields) &&
		sameFields((&snapshotv1.Object{}).ProtoReflect().Descriptor(), objectFields) &&
		sameFields((&snapshotv1.ResourceStatus{}).ProtoReflect().Descriptor(), statusFields)
)

func sameFields(md protoreflect.MessageDescriptor, want map[protoreflect.FieldNumber]protoreflect.Name) bool {
	fs := md.Fields()
	if fs.Len() != len(want) || md.Oneofs().Len() != 0 {
		return false
	}
	for i := range fs.Len() {
		fd := fs.Get(i)
		if want[fd.Number()] != fd.Name() {
			return false
		}
	}
	return true
}

// hashWriter buffers encoded bytes in front of a hash.
type hashWriter struct {
	h   hash.Hash
	buf []byte
	ok  bool // false once something the fast path cannot encode was seen

	maps   *mapEncodings
	sealer bool // maps are kept for the next outputs
	// The last label map encoded and its encoding: translation gives all
	// objects of a cluster one label map.
	labels    uintptr
	labelsEnc []byte
	// Strings checked to be UTF-8 last, by field: objects in a row share
	// their API version, kind and namespace. A string's bytes never change.
	valid [5]string
}

// mapEncodings keeps the encodings of label and annotation maps for the
// next objects with the same map: translation gives every object of a
// cluster one label map, and the objects it writes for one destination in
// every cluster one annotation map. A map is known by its address, so none
// may be modified, or freed, while the encodings are kept.
type mapEncodings struct {
	byKey map[uintptr][]byte // by the map's address plus the field number (< 8)
	arena []byte             // where the encodings are kept
	// The annotation maps of the objects of the last output, in order,
	// and those of this one so far: the outputs of one translation hold
	// mostly the same in the same order, so the next is predicted from
	// there without a look-up in byKey.
	last, this []mapUse
	next       int // in last
}

type mapUse struct {
	key uintptr
	enc []byte
}

// keep copies b aside.
func (e *mapEncodings) keep(b []byte) []byte {
	if len(b) > 4<<10 {
		return slices.Clone(b)
	}
	if cap(e.arena)-len(e.arena) < len(b) {
		e.arena = make([]byte, 0, 64<<10)
	}
	start := len(e.arena)
	e.arena = append(e.arena, b...)
	return e.arena[start:len(e.arena):len(e.arena)]
}

// predict finds key at the next place in the last output's order, or one
// place off: an object more or less than in the last output. Otherwise it
// takes the key to replace the next one.
func (e *mapEncodings) predict(key uintptr) ([]byte, bool) {
	for _, i := range [3]int{e.next, e.next + 1, e.next - 1} {
		if i >= 0 && i < len(e.last) && e.last[i].key == key {
			e.next = i + 1
			return e.last[i].enc, true
		}
	}
	e.next++
	return nil, false
}

// nextOutput starts the order of the next output.
func (e *mapEncodings) nextOutput() {
	e.last, e.this, e.next = e.this, e.last[:0], 0
}

func (w *hashWriter) flushIfLarge() {
	if len(w.buf) >= 32<<10 {
		w.h.Write(w.buf)
		w.buf = w.buf[:0]
	}
}

func (w *hashWriter) str(num protowire.Number, s string) {
	if s == "" {
		return
	}
	if num < protowire.Number(len(w.valid)) {
		if last := w.valid[num]; len(last) != len(s) || unsafe.StringData(last) != unsafe.StringData(s) {
			if utf8.ValidString(s) {
				w.valid[num] = s
			} else {
				w.ok = false
			}
		}
	} else if !utf8.ValidString(s) {
		w.ok = false
	}
	w.buf = protowire.AppendTag(w.buf, num, protowire.BytesType)
	w.buf = protowire.AppendString(w.buf, s)
}

// large appends a bytes field; a long value goes to the hash without a
// copy.
func (w *hashWriter) large(num protowire.Number, b []byte) {
	if len(b) == 0 {
		return
	}
	w.buf = protowire.AppendTag(w.buf, num, protowire.BytesType)
	w.buf = protowire.AppendVarint(w.buf, uint64(len(b)))
	if len(b) < 512 {
		w.buf = append(w.buf, b...)
		return
	}
	w.h.Write(w.buf)
	w.buf = w.buf[:0]
	w.h.Write(b)
}

func strSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func bytesSize(num protowire.Number, b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(b))
}

// mapEntrySize is the size of one map<string, string> entry's body.
func mapEntrySize(k, v string) int {
	return 1 + protowire.SizeBytes(len(k)) + 1 + protowire.SizeBytes(len(v))
}

func mapSize(num protowire.Number, m map[string]string) int {
	n := 0
	for k, v := range m {
		n += protowire.SizeTag(num) + protowire.SizeBytes(mapEntrySize(k, v))
	}
	return n
}

// strMap appends a map<string, string> field with its entries in key
// order, as deterministic protobuf encoding does; keys holds the scratch
// slice for sorting.
func (w *hashWriter) strMap(num protowire.Number, m map[string]string, keys *[]string) {
	switch len(m) {
	case 0:
		return
	case 1:
		for k, v := range m {
			w.entry(num, k, v)
		}
		return
	case 2:
		var k0, k1 string
		i := 0
		for k := range m {
			if i == 0 {
				k0 = k
			} else {
				k1 = k
			}
			i++
		}
		if k1 < k0 {
			k0, k1 = k1, k0
		}
		w.entry(num, k0, m[k0])
		w.entry(num, k1, m[k1])
		return
	}
	ks := (*keys)[:0]
	for k := range m {
		ks = append(ks, k)
	}
	if len(ks) > 1 {
		slices.Sort(ks)
	}
	*keys = ks
	for _, k := range ks {
		w.entry(num, k, m[k])
	}
}

// entry appends one entry of a map<string, string> field.
func (w *hashWriter) entry(num protowire.Number, k, v string) {
	if !utf8.ValidString(k) || !utf8.ValidString(v) {
		w.ok = false
	}
	w.buf = protowire.AppendTag(w.buf, num, protowire.BytesType)
	w.buf = protowire.AppendVarint(w.buf, uint64(mapEntrySize(k, v)))
	w.buf = protowire.AppendTag(w.buf, 1, protowire.BytesType)
	w.buf = protowire.AppendString(w.buf, k)
	w.buf = protowire.AppendTag(w.buf, 2, protowire.BytesType)
	w.buf = protowire.AppendString(w.buf, v)
}

func (w *hashWriter) object(o *snapshotv1.Object, keys *[]string) {
	if o == nil || len(o.ProtoReflect().GetUnknown()) > 0 {
		w.ok = false
		return
	}
	labels := w.labelsEncoding(o.GetLabels(), keys)
	var ann []byte
	var annSize int
	// Annotations are kept between the outputs of a sealer; one output
	// on its own has them encoded in place, as most objects have their
	// own.
	var annK, annV string
	annMap := o.GetAnnotations()
	if w.sealer {
		ann = w.annotationsEncoding(annMap, keys)
		annSize = len(ann)
	} else if len(annMap) == 1 {
		for k, v := range annMap {
			annK, annV = k, v
		}
		annSize = protowire.SizeTag(6) + protowire.SizeBytes(mapEntrySize(annK, annV))
	} else {
		annSize = mapSize(6, annMap)
	}
	size := strSize(1, o.GetApiVersion()) + strSize(2, o.GetKind()) + strSize(3, o.GetNamespace()) + strSize(4, o.GetName()) +
		len(labels) + annSize + bytesSize(7, o.GetSpec())
	w.buf = protowire.AppendTag(w.buf, 4, protowire.BytesType)
	w.buf = protowire.AppendVarint(w.buf, uint64(size))
	w.str(1, o.GetApiVersion())
	w.str(2, o.GetKind())
	w.str(3, o.GetNamespace())
	w.str(4, o.GetName())
	w.buf = append(w.buf, labels...)
	switch {
	case w.sealer:
		w.buf = append(w.buf, ann...)
	case len(annMap) == 1:
		w.entry(6, annK, annV)
	default:
		w.strMap(6, annMap, keys)
	}
	w.large(7, o.GetSpec())
	w.flushIfLarge()
}

// labelsEncoding is mapEncoding for an object's labels, with the last
// map used checked first.
func (w *hashWriter) labelsEncoding(m map[string]string, keys *[]string) []byte {
	if len(m) == 0 {
		return nil
	}
	p := reflect.ValueOf(m).Pointer()
	if p == w.labels {
		return w.labelsEnc
	}
	enc, valid := w.mapEncoding(5, m, keys)
	if valid {
		w.labels, w.labelsEnc = p, enc
	}
	return enc
}

// annotationsEncoding is mapEncoding for an object's annotations,
// predicted from the order of the last output.
func (w *hashWriter) annotationsEncoding(m map[string]string, keys *[]string) []byte {
	p := reflect.ValueOf(m).Pointer()
	if p == 0 {
		return nil
	}
	key := p | 6
	enc, ok := w.maps.predict(key)
	if !ok {
		if enc, ok = w.mapEncoding(6, m, keys); !ok {
			return enc
		}
	}
	w.maps.this = append(w.maps.this, mapUse{key, enc})
	return enc
}

// mapEncoding is the encoding of field num holding m, kept for the next
// object with the same map unless m has a string that is not UTF-8
// (valid is false then, and so is w.ok).
func (w *hashWriter) mapEncoding(num protowire.Number, m map[string]string, keys *[]string) (enc []byte, valid bool) {
	p := reflect.ValueOf(m).Pointer()
	if p == 0 {
		return nil, true
	}
	// A map's address is a multiple of 8 at least.
	key := p | uintptr(num&7)
	if enc, ok := w.maps.byKey[key]; ok {
		return enc, true
	}
	// Encode with the shared buffer's code, then move the bytes aside.
	ok := w.ok
	w.ok = true
	start := len(w.buf)
	w.strMap(num, m, keys)
	enc = w.maps.keep(w.buf[start:])
	w.buf = w.buf[:start]
	valid = w.ok
	if valid {
		if w.maps.byKey == nil {
			w.maps.byKey = map[uintptr][]byte{}
		}
		w.maps.byKey[key] = enc
	}
	w.ok = valid && ok
	return enc, valid
}

func (w *hashWriter) status(s *snapshotv1.ResourceStatus) {
	if s == nil || len(s.ProtoReflect().GetUnknown()) > 0 {
		w.ok = false
		return
	}
	gen := s.GetObservedGeneration()
	size := strSize(1, s.GetApiVersion()) + strSize(2, s.GetKind()) + strSize(3, s.GetNamespace()) + strSize(4, s.GetName()) +
		bytesSize(6, s.GetStatus())
	if gen != 0 {
		size += protowire.SizeTag(5) + protowire.SizeVarint(uint64(gen))
	}
	w.buf = protowire.AppendTag(w.buf, 5, protowire.BytesType)
	w.buf = protowire.AppendVarint(w.buf, uint64(size))
	w.str(1, s.GetApiVersion())
	w.str(2, s.GetKind())
	w.str(3, s.GetNamespace())
	w.str(4, s.GetName())
	if gen != 0 {
		w.buf = protowire.AppendTag(w.buf, 5, protowire.VarintType)
		w.buf = protowire.AppendVarint(w.buf, uint64(gen))
	}
	w.large(6, s.GetStatus())
	w.flushIfLarge()
}

// message appends a field holding m with protobuf's deterministic
// encoding, for the small lists that are not worth encoding by hand.
func (w *hashWriter) message(num protowire.Number, m proto.Message) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		w.ok = false
		return
	}
	w.buf = protowire.AppendTag(w.buf, num, protowire.BytesType)
	w.buf = protowire.AppendBytes(w.buf, b)
	w.flushIfLarge()
}

// OutputSealer seals outputs in turn, as SealOutput does, and keeps the
// encodings of their label and annotation maps from one output to the
// next: the outputs of one translation share most of them. The maps of
// the outputs it sealed must be neither modified nor freed while it is in
// use: keep it for the outputs of one translation. The zero value is
// ready to use; it is not safe for concurrent use.
type OutputSealer struct {
	maps mapEncodings
}

// Seal sorts s and sets its version, as SealOutput does.
func (z *OutputSealer) Seal(s *snapshotv1.OutputSnapshot) string {
	SortOutput(s)
	z.maps.nextOutput()
	v, ok := fastOutputVersion(s, &z.maps, true)
	if !ok {
		v = contentVersion(s, outputVolatile)
	}
	s.Version = v
	return v
}

// fastOutputVersion is OutputVersion without reflection; ok is false when
// the output holds something only the reflective encoding handles. maps
// may hold encodings of maps of s already; sealer keeps annotations there
// too, for the next outputs.
func fastOutputVersion(s *snapshotv1.OutputSnapshot, maps *mapEncodings, sealer bool) (version string, ok bool) {
	if !fastOutputOK || s == nil {
		return "", false
	}
	w := &hashWriter{h: sha256.New(), buf: make([]byte, 0, 40<<10), ok: true, maps: maps, sealer: sealer}
	var keys []string
	w.str(1, s.GetCluster())
	for _, o := range s.GetObjects() {
		w.object(o, &keys)
	}
	for _, st := range s.GetStatuses() {
		w.status(st)
	}
	for _, c := range s.GetIssuedCertificates() {
		w.message(7, c)
	}
	for _, f := range s.GetWasmFilters() {
		w.message(8, f)
	}
	for _, p := range s.GetAccessLogPolicies() {
		w.message(9, p)
	}
	if !w.ok {
		return "", false
	}
	w.h.Write(w.buf)
	var sum [sha256.Size]byte
	return VersionPrefix + hex.EncodeToString(w.h.Sum(sum[:0])), true
}

// CompareObjects orders the objects of an output as SortOutput does: by
// API version, kind, namespace and name.
func CompareObjects(a, b *snapshotv1.Object) int {
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

// strictlySorted says whether objs are in CompareObjects order with no two
// equal.
func strictlySorted(objs []*snapshotv1.Object) bool {
	for i := 1; i < len(objs); i++ {
		if CompareObjects(objs[i-1], objs[i]) >= 0 {
			return false
		}
	}
	return true
}
