package snapshots

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Encoded is a snapshot together with its version and its wire encoding, so
// that stores keep the bytes instead of encoding the snapshot again.
type Encoded[T proto.Message] struct {
	Version string
	// Value is the decoded snapshot, or nil when only the encoding is at
	// hand (ingest stores and forwards an agent's encoding without decoding
	// it).
	Value T
	// Data decodes to Value. It is shared: nobody may modify it.
	Data []byte
	// Table, when not nil, is Data's output table (OutputEncoder's),
	// which stores keep beside it. Shared too.
	Table []byte
}

// Decoded returns e.Value, decoding e.Data when e has no Value.
func (e Encoded[T]) Decoded() (T, error) {
	m := e.Value.ProtoReflect()
	if m.IsValid() || e.Data == nil {
		return e.Value, nil
	}
	v := m.Type().New().Interface()
	if err := proto.Unmarshal(e.Data, v); err != nil {
		var zero T
		return zero, fmt.Errorf("decode snapshot: %w", err)
	}
	return v.(T), nil
}

// EncodeInput returns the content-hash version of s (the value InputVersion
// returns) and its whole wire encoding, from one encoding of s: the
// deterministic encoding of the content that the hash covers, followed by
// the encoding of the fields that it does not. Protobuf decoders accept
// fields in any order, so the two parts decode as one message. Call
// SortInput first, as for InputVersion.
func EncodeInput(s *snapshotv1.InputSnapshot) (Encoded[*snapshotv1.InputSnapshot], error) {
	content, rest := split(s, inputVolatile)
	head, err := proto.Marshal(rest)
	if err != nil {
		return Encoded[*snapshotv1.InputSnapshot]{}, fmt.Errorf("encode snapshot of cluster %q: %w", s.GetCluster(), err)
	}
	// The content goes after the small part, so that the large encoding is
	// written once into a buffer that already holds both.
	data, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(head, content)
	if err != nil {
		return Encoded[*snapshotv1.InputSnapshot]{}, fmt.Errorf("encode snapshot of cluster %q: %w", s.GetCluster(), err)
	}
	sum := sha256.Sum256(data[len(head):])
	v := VersionPrefix + hex.EncodeToString(sum[:])
	if a := s.GetAgent(); a != nil {
		v = contentVersion(&snapshotv1.InputSnapshot{
			Version: v, Agent: &snapshotv1.AgentInfo{Version: a.GetVersion(), Namespace: a.GetNamespace()},
		}, nil)
	}
	return Encoded[*snapshotv1.InputSnapshot]{Version: v, Value: s, Data: data}, nil
}

// split returns two shallow copies of m: one without the skipped fields,
// and one with only them.
func split(m proto.Message, skip map[protoreflect.FieldNumber]bool) (content, rest proto.Message) {
	src := m.ProtoReflect()
	c, r := src.New(), src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if skip[fd.Number()] {
			r.Set(fd, v)
		} else {
			c.Set(fd, v)
		}
		return true
	})
	r.SetUnknown(src.GetUnknown())
	return c.Interface(), r.Interface()
}
