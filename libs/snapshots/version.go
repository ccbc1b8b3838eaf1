package snapshots

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// VersionPrefix starts every content-hash version.
const VersionPrefix = "sha256:"

// Fields that describe a snapshot rather than its content, and so are left
// out of its hash: two replicas, or two pushes of the same content, must get
// the same version.
var (
	inputVolatile = fieldSet((&snapshotv1.InputSnapshot{}).ProtoReflect().Descriptor(),
		"version", "generated_at", "agent")
	outputVolatile = fieldSet((&snapshotv1.OutputSnapshot{}).ProtoReflect().Descriptor(),
		"version", "generated_at", "input_versions")
)

func fieldSet(md protoreflect.MessageDescriptor, names ...string) map[protoreflect.FieldNumber]bool {
	set := make(map[protoreflect.FieldNumber]bool, len(names))
	for _, n := range names {
		fd := md.Fields().ByName(protoreflect.Name(n))
		if fd == nil {
			panic(fmt.Sprintf("snapshots: %s has no field %q", md.FullName(), n))
		}
		set[fd.Number()] = true
	}
	return set
}

// InputVersion returns the content hash of an input snapshot. Call
// SortInput first: the hash depends on list order.
func InputVersion(s *snapshotv1.InputSnapshot) string {
	v := contentVersion(s, inputVolatile)
	if a := s.GetAgent(); a != nil {
		// The agent version is content (a new agent may discover more), the
		// replica name is not.
		v = contentVersion(&snapshotv1.InputSnapshot{
			Version: v, Agent: &snapshotv1.AgentInfo{Version: a.GetVersion(), Namespace: a.GetNamespace()},
		}, nil)
	}
	return v
}

// OutputVersion returns the content hash of an output snapshot. Call
// SortOutput first.
//
// The version is VersionPrefix and the hex SHA-256 of the deterministic
// protobuf encoding of the snapshot without its version, generated_at and
// input_versions, in which every object's annotations and spec are
// replaced by their body digest: spec holds the SHA-256 of the
// deterministic encoding of an Object with only the object's annotations
// and spec set (so even an empty body has a digest), and annotations are
// left empty. Every other field, the statuses' included, is hashed as it
// is. Objects share bodies (a federated host's objects have the same
// annotations and spec in every client cluster), and the digest of one is
// computed once however many objects and outputs hold it (OutputSealer);
// the version is the same whichever way it is computed. Being a protobuf
// encoding, everything hashed is tagged and length-prefixed.
func OutputVersion(s *snapshotv1.OutputSnapshot) string {
	if v, ok := fastOutputVersion(s, &outputCache{}, false); ok {
		return v
	}
	return ReflectOutputVersion(s)
}

// ReflectOutputVersion is OutputVersion computed the obvious way: it builds
// the snapshot that OutputVersion defines, with body digests in place of
// annotations and specs, and hashes protobuf-go's deterministic encoding of
// it. It is the definition OutputVersion's faster hand encoding must
// match, for tests, and what OutputVersion falls back to for what the hand
// encoding does not cover (unknown fields, strings that are not UTF-8).
func ReflectOutputVersion(s *snapshotv1.OutputSnapshot) string {
	if s == nil || len(s.GetObjects()) == 0 {
		return contentVersion(s, outputVolatile)
	}
	digested := make([]*snapshotv1.Object, len(s.GetObjects()))
	for i, o := range s.GetObjects() {
		if o == nil {
			continue
		}
		d := proto.Clone(o).(*snapshotv1.Object)
		d.Annotations, d.Spec = nil, bodyDigest(o)
		digested[i] = d
	}
	out := ShallowCopy(s)
	out.Objects = digested
	return contentVersion(out, outputVolatile)
}

// bodyDigest is the SHA-256 of the deterministic encoding of an Object
// with only o's annotations and spec.
func bodyDigest(o *snapshotv1.Object) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&snapshotv1.Object{Annotations: o.GetAnnotations(), Spec: o.GetSpec()})
	if err != nil {
		// As in contentVersion: annotations that are not UTF-8.
		b = []byte("marshal error: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// contentVersion hashes a shallow copy of m without the skipped fields. The
// copy shares every field value with m, so hashing costs one marshal.
func contentVersion(m proto.Message, skip map[protoreflect.FieldNumber]bool) string {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if !skip[fd.Number()] {
			dst.Set(fd, v)
		}
		return true
	})
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(dst.Interface())
	if err != nil {
		// Marshalling a valid in-memory message does not fail; a failure
		// means an invalid UTF-8 string slipped in, and hashing the error
		// keeps the version distinct rather than colliding on "".
		b = []byte("marshal error: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return VersionPrefix + hex.EncodeToString(sum[:])
}

type metaHolder interface {
	GetMetadata() *commonv1.ObjectMeta
}

func byMeta[T metaHolder](a, b T) int {
	ma, mb := a.GetMetadata(), b.GetMetadata()
	return cmp.Or(
		cmp.Compare(ma.GetCluster(), mb.GetCluster()),
		cmp.Compare(ma.GetNamespace(), mb.GetNamespace()),
		cmp.Compare(ma.GetName(), mb.GetName()),
	)
}

// SortInput puts every list of an input snapshot in a canonical order.
func SortInput(s *snapshotv1.InputSnapshot) {
	slices.SortFunc(s.Meshes, byMeta)
	slices.SortFunc(s.Workloads, byMeta)
	slices.SortFunc(s.Destinations, byMeta)
	slices.SortFunc(s.VirtualMeshes, byMeta)
	slices.SortFunc(s.TrafficPolicies, byMeta)
	slices.SortFunc(s.AccessPolicies, byMeta)
	slices.SortFunc(s.VirtualDestinations, byMeta)
	slices.SortFunc(s.WasmDeploymentPolicies, byMeta)
	slices.SortFunc(s.AccessLogPolicies, byMeta)
	slices.SortFunc(s.Settings, byMeta)
	slices.SortFunc(s.UserIstioObjects, func(a, b *snapshotv1.UserIstioObject) int {
		return cmp.Or(
			cmp.Compare(a.GetKind(), b.GetKind()),
			cmp.Compare(a.GetNamespace(), b.GetNamespace()),
			cmp.Compare(a.GetName(), b.GetName()),
		)
	})
}

// SortOutput puts the objects, statuses and issued certificates of an
// output snapshot in a canonical order.
func SortOutput(s *snapshotv1.OutputSnapshot) {
	// Translation gives most objects in this order already: checking costs
	// a fraction of sorting. Only an order without two equal keys is kept
	// as it is, so that the result is the one sorting gives.
	if !strictlySorted(s.Objects) {
		slices.SortFunc(s.Objects, CompareObjects)
	}
	slices.SortFunc(s.Statuses, CompareStatuses)
	slices.SortFunc(s.IssuedCertificates, func(a, b *snapshotv1.IssuedCertificate) int {
		return cmp.Or(
			cmp.Compare(a.GetMesh().GetNamespace(), b.GetMesh().GetNamespace()),
			cmp.Compare(a.GetMesh().GetName(), b.GetMesh().GetName()),
			cmp.Compare(a.GetSecretNamespace(), b.GetSecretNamespace()),
			cmp.Compare(a.GetSecretName(), b.GetSecretName()),
		)
	})
}

// SealInput sorts an input snapshot and sets its version.
func SealInput(s *snapshotv1.InputSnapshot) string {
	SortInput(s)
	s.Version = InputVersion(s)
	return s.Version
}

// SealOutput sorts an output snapshot and sets its version.
func SealOutput(s *snapshotv1.OutputSnapshot) string {
	SortOutput(s)
	s.Version = OutputVersion(s)
	return s.Version
}
