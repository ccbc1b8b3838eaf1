package snapshots

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"math"
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
		7: "issued_certificates", 8: "wasm_filters", 9: "access_log_policies", 10: "missing_clusters",
		11: "gateway_detector",
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

// objectUnknown is where an Object keeps its unknown fields, which
// object checks without ProtoReflect: that stores the message's state in
// a message on first use, an atomic store for every object made. When the
// generated struct has no such field, ok is false and ProtoReflect is used.
var objectUnknown = func() (f struct {
	offset uintptr
	ok     bool
}) {
	sf, ok := reflect.TypeFor[snapshotv1.Object]().FieldByName("unknownFields")
	if ok && sf.Type == reflect.TypeFor[[]byte]() {
		f.offset, f.ok = sf.Offset, true
	}
	return f
}()

func hasUnknown(o *snapshotv1.Object) bool {
	if !objectUnknown.ok {
		return len(o.ProtoReflect().GetUnknown()) > 0
	}
	return len(*(*[]byte)(unsafe.Add(unsafe.Pointer(o), objectUnknown.offset))) > 0
}

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
	valid [4]string
	// scratch holds the encoding of one map or body.
	scratch []byte
	prefix  objectPrefix
}

// objectPrefix is the encoding of the API version, kind and namespace of
// the last object, which objects in a row share.
type objectPrefix struct {
	apiVersion, kind, namespace string
	enc                         []byte
}

func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// encoding is the encoding of fields 1 to 3 of an object with these
// values.
func (p *objectPrefix) encoding(w *hashWriter, apiVersion, kind, namespace string) []byte {
	if p.enc == nil || !sameString(apiVersion, p.apiVersion) || !sameString(kind, p.kind) || !sameString(namespace, p.namespace) {
		enc := w.str(p.enc[:0], 1, apiVersion)
		enc = w.str(enc, 2, kind)
		p.enc = w.str(enc, 3, namespace)
		p.apiVersion, p.kind, p.namespace = apiVersion, kind, namespace
	}
	return p.enc
}

// The encoders append to a buffer they are given and return it rather
// than append to the writer's: a store of a slice through a pointer
// costs a write barrier while the garbage collector marks, and they run
// for millions of objects.

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
	// The bodies of a sealer, in kept, which grows a block at a time so
	// that it is never copied, and their indexes in kept by key.
	kept  [][]keptBody
	nkept int
	index map[bodyKey]uint32
	// The bodies of the objects of the last output, in order, and those
	// of this one so far, by index in kept: the outputs of one translation
	// hold mostly the same in the same order, so the next is predicted
	// from there without a look-up in slots.
	last, this []uint32
	next       int // in last
	// sealed holds the bodies of the last output sealed for each
	// cluster, by index in kept: those of the outputs in use. compact
	// drops the others.
	sealed map[string][]uint32
}

// minKept is the number of kept bodies below which a sealer never
// compacts: dropping so few is not worth a rebuild.
const minKept = 4096

// sealedOutput records that the output of cluster just sealed holds the
// bodies in this, and compacts the cache when more than half of what it
// keeps is in no output sealed last for its cluster: the bodies of
// objects that were replaced or deleted, which would otherwise stay for
// as long as the sealer does.
func (c *outputCache) sealedOutput(cluster string) {
	if c.sealed == nil {
		c.sealed = map[string][]uint32{}
	}
	c.sealed[cluster] = append(c.sealed[cluster][:0], c.this...)
	inUse := 0
	for _, b := range c.sealed {
		inUse += len(b)
	}
	if c.nkept > minKept && c.nkept > 2*inUse {
		c.compact(cluster)
	}
}

// compact keeps only the bodies of the outputs last sealed for each
// cluster, and the label encodings to be found again as they are used.
// cluster's output was sealed last: its order predicts the next one's.
func (c *outputCache) compact(cluster string) {
	next := outputCache{sealed: c.sealed}
	moved := make([]uint32, c.nkept) // old index -> new index + 1
	for _, bodies := range c.sealed {
		for j, i := range bodies {
			if moved[i] == 0 {
				n, _ := next.keep(*c.body(int(i)))
				moved[i] = n + 1
			}
			bodies[j] = moved[i] - 1
		}
	}
	next.last = c.last[:0]
	next.this = append(c.this[:0], c.sealed[cluster]...)
	*c = next
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
	key         bodyKey
	sum         [sha256.Size]byte
	annotations map[string]string // held on to, for key to stay theirs
	spec        []byte
}

const keptBlock = 1024

func (c *outputCache) body(i int) *keptBody { return &c.kept[i/keptBlock][i%keptBlock] }

// find returns the index of the body kept with key.
func (c *outputCache) find(key bodyKey) (i uint32, ok bool) {
	i, ok = c.index[key]
	return i, ok
}

// keep adds a body that find did not find, and returns its index; ok is
// false when there is no room left.
func (c *outputCache) keep(b keptBody) (i uint32, ok bool) {
	if c.nkept >= math.MaxUint32-1 {
		return 0, false
	}
	if c.index == nil {
		c.index = map[bodyKey]uint32{}
	}
	if c.nkept%keptBlock == 0 {
		c.kept = append(c.kept, make([]keptBody, 0, keptBlock))
	}
	last := &c.kept[len(c.kept)-1]
	*last = append(*last, b)
	i = uint32(c.nkept)
	c.index[b.key] = i
	c.nkept++
	return i, true
}

// predict finds key at the next place in the last output's order, or one
// place off: an object more or less than in the last output. Otherwise it
// takes the key to replace the next one.
func (c *outputCache) predict(key bodyKey) (body uint32, ok bool) {
	for _, i := range [3]int{c.next, c.next + 1, c.next - 1} {
		if i >= 0 && i < len(c.last) && c.body(int(c.last[i])).key == key {
			c.next = i + 1
			return c.last[i], true
		}
	}
	c.next++
	return 0, false
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

func (w *hashWriter) str(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
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
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
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
func (w *hashWriter) strMap(b []byte, num protowire.Number, m map[string]string, keys *[]string) []byte {
	switch len(m) {
	case 0:
		return b
	case 1:
		for k, v := range m {
			b = w.entry(b, num, k, v)
		}
		return b
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
		b = w.entry(b, num, k0, m[k0])
		return w.entry(b, num, k1, m[k1])
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
		b = w.entry(b, num, k, m[k])
	}
	return b
}

// entry appends one entry of a map<string, string> field.
func (w *hashWriter) entry(b []byte, num protowire.Number, k, v string) []byte {
	if !utf8.ValidString(k) || !utf8.ValidString(v) {
		w.ok = false
	}
	return appendMapEntry(b, num, k, v)
}

// object appends o, with its annotations and spec replaced by their
// digest, to b, which holds the end of w.buf; the caller stores b back.
func (w *hashWriter) object(b []byte, o *snapshotv1.Object, keys *[]string) []byte {
	if o == nil || hasUnknown(o) {
		w.ok = false
		return b
	}
	labels := w.labelsEncoding(o.GetLabels(), keys)
	sum, valid := w.bodyDigest(o.GetAnnotations(), o.GetSpec(), keys)
	if !valid {
		w.ok = false
		return b
	}
	prefix := w.prefix.encoding(w, o.GetApiVersion(), o.GetKind(), o.GetNamespace())
	name := o.GetName()
	size := len(prefix) + strSize(4, name) + len(labels) + protowire.SizeTag(7) + protowire.SizeBytes(len(sum))
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = append(b, prefix...)
	b = w.str(b, 4, name)
	b = append(b, labels...)
	b = protowire.AppendTag(b, 7, protowire.BytesType)
	return protowire.AppendBytes(b, sum[:])
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
	ok := w.ok
	w.ok = true
	b := w.strMap(w.scratch[:0], 5, m, keys)
	enc := slices.Clone(b)
	w.scratch = b
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
	i, ok := c.predict(key)
	if !ok {
		if i, ok = c.find(key); !ok {
			if sum, valid = w.digestBody(annotations, spec, keys); !valid {
				return sum, false
			}
			if i, ok = c.keep(keptBody{key, sum, annotations, spec}); !ok {
				return sum, true
			}
		}
	}
	c.this = append(c.this, i)
	return c.body(int(i)).sum, true
}

// digestBody is the SHA-256 of the deterministic encoding of an Object
// holding only annotations and spec.
func (w *hashWriter) digestBody(annotations map[string]string, spec []byte, keys *[]string) (sum [sha256.Size]byte, valid bool) {
	ok := w.ok
	w.ok = true
	b := w.strMap(w.scratch[:0], 6, annotations, keys)
	valid = w.ok
	w.ok = ok
	if len(spec) > 0 {
		b = protowire.AppendTag(b, 7, protowire.BytesType)
		b = protowire.AppendBytes(b, spec)
	}
	sum = sha256.Sum256(b)
	if cap(b) != cap(w.scratch) {
		w.scratch = b
	}
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
	b := protowire.AppendTag(w.buf, 5, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = w.str(b, 1, s.GetApiVersion())
	b = w.str(b, 2, s.GetKind())
	b = w.str(b, 3, s.GetNamespace())
	b = w.str(b, 4, s.GetName())
	if gen != 0 {
		b = protowire.AppendTag(b, 5, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(gen))
	}
	w.buf = b
	w.large(6, s.GetStatus())
	w.flushIfLarge()
}

// element appends one element of a repeated string field: unlike a
// singular field, an empty element is encoded too.
func (w *hashWriter) element(num protowire.Number, s string) {
	if !utf8.ValidString(s) {
		w.ok = false
		return
	}
	w.buf = protowire.AppendTag(w.buf, num, protowire.BytesType)
	w.buf = protowire.AppendString(w.buf, s)
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
// translations that reuse their objects. It holds on to the maps and
// specs it saw, none of which may be modified while it is in use: keep it
// only as long as the objects it sealed are kept unchanged. Once more
// than half of the bodies it keeps are in none of the outputs it sealed
// last for each cluster (objects replaced or deleted since), it drops
// them, so that a sealer kept across many incremental translations holds
// about what the outputs in use hold. The zero value is ready to use; it
// is not safe for concurrent use.
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
	z.cache.sealedOutput(s.GetCluster())
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
	w := &hashWriter{h: sha256.New(), buf: make([]byte, 0, 40<<10), scratch: make([]byte, 0, 4<<10), ok: true, cache: cache, sealer: sealer}
	var keys []string
	w.buf = w.str(w.buf, 1, s.GetCluster())
	b := w.buf
	for _, o := range s.GetObjects() {
		b = w.object(b, o, &keys)
		if len(b) >= 32<<10 {
			w.h.Write(b)
			b = b[:0]
		}
	}
	w.buf = b
	for _, st := range s.GetStatuses() {
		w.status(st)
	}
	return w.rest(s)
}

// rest hashes the fields of s after its statuses, and returns the version.
func (w *hashWriter) rest(s *snapshotv1.OutputSnapshot) (version string, ok bool) {
	for _, c := range s.GetIssuedCertificates() {
		w.message(7, c)
	}
	for _, f := range s.GetWasmFilters() {
		w.message(8, f)
	}
	for _, p := range s.GetAccessLogPolicies() {
		w.message(9, p)
	}
	for _, c := range s.GetMissingClusters() {
		w.element(10, c)
	}
	if d := s.GetGatewayDetector(); d != nil {
		w.message(11, d)
	}
	if !w.ok {
		return "", false
	}
	w.h.Write(w.buf)
	var sum [sha256.Size]byte
	return VersionPrefix + hex.EncodeToString(w.h.Sum(sum[:0])), true
}

// partsVersion is fastOutputVersion from the encodings of the objects
// and statuses of s, as hashWriter.object and statusEncoding make them,
// by index; a nil encoding is made and stored. An output that one delta
// made from another shares all but the changed objects' and statuses'
// encodings with it (DeltaReceiver). s must be sorted.
func partsVersion(s *snapshotv1.OutputSnapshot, objEnc, stEnc [][]byte) (version string, ok bool) {
	if !fastOutputOK || s == nil || len(objEnc) != len(s.GetObjects()) || len(stEnc) != len(s.GetStatuses()) {
		return "", false
	}
	w := &hashWriter{h: sha256.New(), buf: make([]byte, 0, 40<<10), scratch: make([]byte, 0, 4<<10), ok: true, cache: &outputCache{}}
	var (
		keys  []string
		arena []byte
		chunk = 8 << 10
	)
	// keep makes an encoding appended to arena its own slice; arena
	// grows a chunk at a time so that the encodings of a whole output are
	// a few allocations, in chunks that double from 8 KB, so that the few
	// encodings of an edit take a few KB.
	keep := func(enc func([]byte) []byte) []byte {
		if cap(arena)-len(arena) < 4<<10 {
			arena = make([]byte, 0, chunk)
			chunk = min(2*chunk, 256<<10)
		}
		start := len(arena)
		arena = enc(arena)
		return arena[start:len(arena):len(arena)]
	}
	w.buf = w.str(w.buf, 1, s.GetCluster())
	for i, o := range s.GetObjects() {
		if objEnc[i] == nil {
			objEnc[i] = keep(func(b []byte) []byte { return w.object(b, o, &keys) })
		}
		w.buf = append(w.buf, objEnc[i]...)
		w.flushIfLarge()
	}
	for i, st := range s.GetStatuses() {
		if stEnc[i] == nil {
			stEnc[i] = keep(func(b []byte) []byte { return w.statusEncoding(b, st) })
		}
		w.buf = append(w.buf, stEnc[i]...)
		w.flushIfLarge()
	}
	if !w.ok {
		return "", false
	}
	return w.rest(s)
}

// statusEncoding appends the encoding of field 5 holding s to b, the
// bytes status hashes.
func (w *hashWriter) statusEncoding(b []byte, s *snapshotv1.ResourceStatus) []byte {
	out, ok := appendStatus(b, s)
	if !ok {
		w.ok = false
		return b
	}
	return out
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
