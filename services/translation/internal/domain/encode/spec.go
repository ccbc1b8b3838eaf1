// Package encode writes translation's outputs as bytes: Istio specs and
// user resources' statuses as compact JSON, and the parents annotation.
// Translation encodes tens of thousands of specs per run, so most are
// written by hand rather than through protojson's reflection; every hand
// encoding gives protojson's bytes exactly, which encode_test.go checks.
// The translation rules (package domain) decide which objects hold which
// fields and call in here for the bytes.
package encode

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

// Encoder encodes specs and statuses. The zero value is what translation
// runs with.
type Encoder struct {
	// Verify makes Spec check every encoding it writes without protojson
	// against protojson's, and panic on a difference: a test option, for
	// translating whole estates with each encoding checked.
	Verify bool
}

// Spec encodes an Istio spec or a status as compact JSON. protojson adds
// random whitespace on purpose; compacting removes it, so that the bytes,
// and with them the snapshot version, are the same in every process. As
// protojson, it leaves out fields at their zero value, except the
// explicitZero enum fields, whose zero value a reader must see.
func (e Encoder) Spec(m proto.Message) ([]byte, error) {
	if dr, ok := m.(*istiov1alpha3.DestinationRule); ok {
		if b, ok := simpleDestinationRuleJSON(dr); ok {
			return b, nil
		}
	}
	if b, ok := fastJSON(m); ok {
		if e.Verify {
			if want, err := Reflect(m); err != nil || string(want) != string(b) {
				panic(fmt.Sprintf("fastJSON gives %s for %T, protojson %s (%v)", b, m, want, err))
			}
		}
		return b, nil
	}
	return Reflect(m)
}

// Spec is Encoder.Spec of the zero Encoder.
func Spec(m proto.Message) ([]byte, error) {
	return Encoder{}.Spec(m)
}

// Reflect is Spec through protojson, for every spec: protojson's
// encoding, compacted, with the explicitZero fields added. Every hand
// encoding is held to it.
func Reflect(m proto.Message) ([]byte, error) {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return withExplicitZeros(buf.Bytes(), m.ProtoReflect())
}
