package snapshots

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"maps"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// An object's digest is what the agent writes into the object's
// AnnotationDigest and compares to decide whether the cluster holds it
// already. It is the hex SHA-256 of the deterministic protobuf encoding of
// the object with its annotations and spec replaced by their body digest:
// the same message that OutputVersion hashes for the object, so that a
// distribution that keeps per-object digests to compute deltas, and an
// agent that checks the state it reached against a version, can share
// it. It covers the API version, kind, namespace, name, labels,
// annotations and spec: everything the agent applies. The digest
// annotation itself must not be among the annotations digested (the agent
// adds it after).

// ObjectDigester computes object digests, reusing its buffers. The zero
// value is ready to use; it is not safe for concurrent use.
type ObjectDigester struct {
	w      hashWriter
	keys   []string
	labels []byte
	buf    []byte
}

// ObjectDigest returns the digest of o (see ObjectDigester).
func ObjectDigest(o *snapshotv1.Object) string {
	var d ObjectDigester
	return d.Digest(o)
}

// Digest returns the digest of o.
func (d *ObjectDigester) Digest(o *snapshotv1.Object) string {
	if !fastOutputOK || o == nil || hasUnknown(o) {
		return ReflectObjectDigest(o)
	}
	w := &d.w
	w.ok = true
	body, valid := w.digestBody(o.GetAnnotations(), o.GetSpec(), &d.keys)
	d.labels = w.strMap(d.labels[:0], 5, o.GetLabels(), &d.keys)
	b := w.str(d.buf[:0], 1, o.GetApiVersion())
	b = w.str(b, 2, o.GetKind())
	b = w.str(b, 3, o.GetNamespace())
	b = w.str(b, 4, o.GetName())
	b = append(b, d.labels...)
	b = protowire.AppendTag(b, 7, protowire.BytesType)
	b = protowire.AppendBytes(b, body[:])
	d.buf = b
	if !w.ok || !valid {
		return ReflectObjectDigest(o)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ReflectObjectDigest is the object digest computed with protobuf-go's
// deterministic encoding: the definition Digest must match.
func ReflectObjectDigest(o *snapshotv1.Object) string {
	d := proto.Clone(o).(*snapshotv1.Object)
	if d == nil {
		d = &snapshotv1.Object{}
	}
	d.Annotations, d.Spec = nil, bodyDigest(o)
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(d)
	if err != nil {
		// As in contentVersion: a string that is not UTF-8.
		b = []byte("marshal error: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// SameObject reports whether a and b hold the same content, everything
// their digests cover (unknown fields included), and so have the same
// digest: an agent that receives a whole snapshot again takes the digests
// of the objects it held unchanged instead of computing them.
func SameObject(a, b *snapshotv1.Object) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.GetApiVersion() == b.GetApiVersion() && a.GetKind() == b.GetKind() &&
		a.GetNamespace() == b.GetNamespace() && a.GetName() == b.GetName() &&
		bytes.Equal(a.GetSpec(), b.GetSpec()) &&
		maps.Equal(a.GetLabels(), b.GetLabels()) && maps.Equal(a.GetAnnotations(), b.GetAnnotations()) &&
		(!hasUnknown(a) && !hasUnknown(b) || bytes.Equal(a.ProtoReflect().GetUnknown(), b.ProtoReflect().GetUnknown()))
}
