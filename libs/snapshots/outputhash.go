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

// The output version (see OutputVersion) hashes the deterministic
// protobuf encoding of the snapshot with each object's annotations and spec
// replaced by the SHA-256 of their own encoding (its body digest), which
// ReflectOutputVersion computes by building that snapshot. Outputs hold up
// to millions of objects, and protobuf-go encodes their map fields through
// reflection and into one buffer as large as the snapshot;
// fastOutputVersion writes the same bytes straight into the hash instead,
// encoding Object and ResourceStatus by hand, and an OutputSealer digests
// each body once however many objects and outputs share it. The hand
// encoding covers the fields the messages had when it was written
// (outputFields, objectFields, statusFields): when the schema has more, or
// a message holds unknown fields or a string that is not UTF-8 (which
// protobuf refuses to encode), OutputVersion takes the reflective path.
// TestFastOutputVersion checks the two agree.

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

	cache  *outputCache
	sealer bool // body digests are kept for the next outputs
	// The last label map encoded and its encoding: translation gives all
	// objects of a cluster one label map.
	labels    uintptr
	labelsEnc []byte
	// Strings checked to be UTF-8 last, by field: objects in a row share
	// their API version, kind and namespace. A string's bytes never change.
	valid [5]string
}

// outputCache keeps the encodings of label maps and the digests of object
// bodies (annotations and spec) for the next objects that have the same:
// translation gives every object of a cluster one label map, and the
// objects it writes for one federated host in every client cluster one
// annotation map and one spec. Maps and specs are known by their
// addresses; the cache holds on to each one it keeps an entry for, so
// that none is freed and its address reused while the cache is in use.
// None may be modified.
type outputCache struct {
	labels map[uintptr]keptLabels
	bodies map[bodyKey]keptBody // only those of a sealer
	// The bodies of the objects of the last output, in order, and those
	// of this one so far: the outputs of one translation hold mostly the
	// same in the same order, so the next is predicted from there without
	// a look-up in bodies.
	last, this []bodyUse
	next       int // in last
}

type keptLabels struct {
	m   map[string]string
	enc []byte
}

// bodyKey is an object's annotation map and spec, by address.
type bodyKey struct {
	annotations, spec uintptr
	specLen           int
}

type keptBody struct {
	annotations map[string]string
	spec        []byte
	sum         [sha256.Size]byte
}

type bodyUse struct {
	key bodyKey
	sum [sha256.Size]byte
}

// predict finds key at the next place in the last output's order, or one
// place off: an object more or less than in the last output. Otherwise it
// takes the key to replace the next one.
func (c *outputCache) predict(key bodyKey) (sum [sha256.Size]byte, ok bool) {
	for _, i := range [3]int{c.next, c.next + 1, c.next - 1} {
		if i >= 0 && i < len(c.last) && c.last[i].key == key {
			c.next = i + 1
			return c.last[i].sum, true
		}
	}
	c.next++
	return sum, false
}

// nextOutput starts the order of the next output.
func (c *outputCache) nextOutput() {
	c.last, c.this, c.next = c.this, c.last[:0], 0
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

// object appends o with its annotations and spec replaced by their digest.
func (w *hashWriter) object(o *snapshotv1.Object, keys *[]string) {
	if o == nil || len(o.ProtoReflect().GetUnknown()) > 0 {
		w.ok = false
		return
	}
	labels := w.labelsEncoding(o.GetLabels(), keys)
	sum, valid := w.bodyDigest(o.GetAnnotations(), o.GetSpec(), keys)
	if !valid {
		w.ok = false
		return
	}
	size := strSize(1, o.GetApiVersion()) + strSize(2, o.GetKind()) + strSize(3, o.GetNamespace()) + strSize(4, o.GetName()) +
		len(labels) + protowire.SizeTag(7) + protowire.SizeBytes(len(sum))
	w.buf = protowire.AppendTag(w.buf, 4, protowire.BytesType)
	w.buf = protowire.AppendVarint(w.buf, uint64(size))
	w.str(1, o.GetApiVersion())
	w.str(2, o.GetKind())
	w.str(3, o.GetNamespace())
	w.str(4, o.GetName())
	w.buf = append(w.buf, labels...)
	w.buf = protowire.AppendTag(w.buf, 7, protowire.BytesType)
	w.buf = protowire.AppendBytes(w.buf, sum[:])
	w.flushIfLarge()
}

// labelsEncoding is the encoding of field 5 holding an object's labels m,
// with the last map used checked first. A map with a string that is not
// UTF-8 sets w.ok to false.
func (w *hashWriter) labelsEncoding(m map[string]string, keys *[]string) []byte {
	if len(m) == 0 {
		return nil
	}
	p := reflect.ValueOf(m).Pointer()
	if p == w.labels {
		return w.labelsEnc
	}
	if kept, ok := w.cache.labels[p]; ok {
		w.labels, w.labelsEnc = p, kept.enc
		return kept.enc
	}
	// Encode with the shared buffer's code, then move the bytes aside.
	ok := w.ok
	w.ok = true
	start := len(w.buf)
	w.strMap(5, m, keys)
	enc := slices.Clone(w.buf[start:])
	w.buf = w.buf[:start]
	if w.ok {
		if w.cache.labels == nil {
			w.cache.labels = map[uintptr]keptLabels{}
		}
		w.cache.labels[p] = keptLabels{m, enc}
		w.labels, w.labelsEnc = p, enc
	}
	w.ok = w.ok && ok
	return enc
}

// bodyDigest is the digest of an object's annotations and spec, kept for
// the next objects and outputs by a sealer; valid is false when the
// annotations have a string that is not UTF-8.
func (w *hashWriter) bodyDigest(annotations map[string]string, spec []byte, keys *[]string) (sum [sha256.Size]byte, valid bool) {
	if !w.sealer {
		return w.digestBody(annotations, spec, keys)
	}
	c := w.cache
	key := bodyKey{reflect.ValueOf(annotations).Pointer(), uintptr(unsafe.Pointer(unsafe.SliceData(spec))), len(spec)}
	sum, ok := c.predict(key)
	if !ok {
		if kept, found := c.bodies[key]; found {
			sum = kept.sum
		} else {
			if sum, valid = w.digestBody(annotations, spec, keys); !valid {
				return sum, false
			}
			if c.bodies == nil {
				c.bodies = map[bodyKey]keptBody{}
			}
			c.bodies[key] = keptBody{annotations, spec, sum}
		}
	}
	c.this = append(c.this, bodyUse{key, sum})
	return sum, true
}

// digestBody is the SHA-256 of the deterministic encoding of an Object
// holding only annotations and spec.
func (w *hashWriter) digestBody(annotations map[string]string, spec []byte, keys *[]string) (sum [sha256.Size]byte, valid bool) {
	// Encode at the end of the shared buffer, then take the bytes off.
	ok := w.ok
	w.ok = true
	start := len(w.buf)
	w.strMap(6, annotations, keys)
	valid = w.ok
	w.ok = ok
	if len(spec) > 0 {
		w.buf = protowire.AppendTag(w.buf, 7, protowire.BytesType)
		w.buf = protowire.AppendBytes(w.buf, spec)
	}
	sum = sha256.Sum256(w.buf[start:])
	w.buf = w.buf[:start]
	return sum, valid
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
// encodings of their label maps and the digests of their objects'
// annotations and specs from one output to the next: the outputs of one
// translation share most of them, and so do the outputs of the next
// translations that reuse their objects. It holds on to every map and
// spec it saw, none of which may be modified while it is in use: keep it
// only as long as the objects it sealed are kept unchanged. The zero
// value is ready to use; it is not safe for concurrent use.
type OutputSealer struct {
	cache outputCache
}

// Seal sorts s and sets its version, as SealOutput does.
func (z *OutputSealer) Seal(s *snapshotv1.OutputSnapshot) string {
	SortOutput(s)
	z.cache.nextOutput()
	v, ok := fastOutputVersion(s, &z.cache, true)
	if !ok {
		v = ReflectOutputVersion(s)
	}
	s.Version = v
	return v
}

// fastOutputVersion is OutputVersion without reflection; ok is false when
// the output holds something only the reflective encoding handles. cache
// may hold encodings of maps of s already; sealer keeps body digests
// there too, for the next outputs.
func fastOutputVersion(s *snapshotv1.OutputSnapshot, cache *outputCache, sealer bool) (version string, ok bool) {
	if !fastOutputOK || s == nil {
		return "", false
	}
	w := &hashWriter{h: sha256.New(), buf: make([]byte, 0, 40<<10), ok: true, cache: cache, sealer: sealer}
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
