package encode

// fastJSON: protojson's encoding of any message translation writes,
// without protojson's reflection per field.

import (
	"encoding/base64"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// fastJSON encodes m to the bytes Reflect gives (protojson,
// compacted) without protojson, which spends most of its time on
// reflection it does for every field of every message: translation encodes
// tens of thousands of specs and statuses. It covers the kinds of field
// translation writes; ok is false for the rest (floating-point numbers,
// well-known types other than Duration and the integer, bool, string and
// bytes wrappers, extensions, enum values with options, strings that are
// not UTF-8), which are left to protojson.
func fastJSON(m protoreflect.ProtoMessage) (_ []byte, ok bool) {
	if m == nil {
		return nil, false
	}
	pm := m.ProtoReflect()
	if !pm.IsValid() {
		return nil, false
	}
	return appendJSONMessage(make([]byte, 0, 256), pm)
}

// explicitZero names the enum fields that Spec writes at their zero
// value too, whenever the message that holds them is written: there the
// zero value is a choice a reader of the YAML must see (`tls: {mode:
// DISABLE}`, `action: ALLOW`), not an absence. Istio reads both forms the
// same. protojson leaves every zero value out; writing all of them would
// fill every object with empty fields.
var explicitZero = map[protoreflect.FullName]bool{
	"istio.networking.v1alpha3.ClientTLSSettings.mode":  true,
	"istio.security.v1beta1.AuthorizationPolicy.action": true,
}

// writesField says whether Spec writes field fd of m: when it is
// set, as protojson does, and for an explicitZero field when it is not.
func writesField(m protoreflect.Message, fd protoreflect.FieldDescriptor) bool {
	return m.Has(fd) || isExplicitZero(m, fd)
}

// isExplicitZero says whether fd is an explicitZero field that m leaves at
// its zero value.
func isExplicitZero(m protoreflect.Message, fd protoreflect.FieldDescriptor) bool {
	return fd.Kind() == protoreflect.EnumKind && !fd.HasPresence() && !fd.IsList() && explicitZero[fd.FullName()] && !m.Has(fd)
}

// appendJSONMessage appends m's populated fields, and its explicitZero
// fields, in declaration order, as protojson orders them.
func appendJSONMessage(b []byte, m protoreflect.Message) ([]byte, bool) {
	md := m.Descriptor()
	if md.FullName().Parent() == "google.protobuf" {
		return appendJSONWellKnown(b, m)
	}
	if md.ExtensionRanges().Len() > 0 {
		return b, false
	}
	b = append(b, '{')
	first, ok := true, true
	fds := md.Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		if !writesField(m, fd) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		if b, ok = appendJSONString(b, fd.JSONName()); !ok {
			return b, false
		}
		b = append(b, ':')
		v := m.Get(fd)
		switch {
		case fd.IsList():
			b, ok = appendJSONList(b, v.List(), fd)
		case fd.IsMap():
			b, ok = appendJSONMap(b, v.Map(), fd)
		default:
			b, ok = appendJSONSingular(b, v, fd)
		}
		if !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func appendJSONList(b []byte, l protoreflect.List, fd protoreflect.FieldDescriptor) ([]byte, bool) {
	b = append(b, '[')
	ok := true
	for i := range l.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		if b, ok = appendJSONSingular(b, l.Get(i), fd); !ok {
			return b, false
		}
	}
	return append(b, ']'), true
}

// appendJSONMap appends a map with string keys in order, as protojson
// writes them; ok is false for other keys.
func appendJSONMap(b []byte, m protoreflect.Map, fd protoreflect.FieldDescriptor) ([]byte, bool) {
	if fd.MapKey().Kind() != protoreflect.StringKind {
		return b, false
	}
	keys := make([]string, 0, m.Len())
	m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k.String())
		return true
	})
	slices.Sort(keys)
	b = append(b, '{')
	ok := true
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		if b, ok = appendJSONString(b, k); !ok {
			return b, false
		}
		b = append(b, ':')
		if b, ok = appendJSONSingular(b, m.Get(protoreflect.ValueOfString(k).MapKey()), fd.MapValue()); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func appendJSONSingular(b []byte, v protoreflect.Value, fd protoreflect.FieldDescriptor) ([]byte, bool) {
	if !v.IsValid() {
		return append(b, "null"...), true
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v.Bool()), true
	case protoreflect.StringKind:
		return appendJSONString(b, v.String())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return strconv.AppendInt(b, v.Int(), 10), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.AppendUint(b, v.Uint(), 10), true
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		b = append(b, '"')
		return append(strconv.AppendInt(b, v.Int(), 10), '"'), true
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		b = append(b, '"')
		return append(strconv.AppendUint(b, v.Uint(), 10), '"'), true
	case protoreflect.BytesKind:
		b = append(b, '"')
		return append(base64.StdEncoding.AppendEncode(b, v.Bytes()), '"'), true
	case protoreflect.EnumKind:
		ed := fd.Enum()
		if ed.FullName() == "google.protobuf.NullValue" {
			return b, false
		}
		desc := ed.Values().ByNumber(v.Enum())
		if desc == nil {
			return strconv.AppendInt(b, int64(v.Enum()), 10), true
		}
		if opts := desc.Options(); opts != nil && opts.ProtoReflect().IsValid() {
			// It may name the value for JSON.
			return b, false
		}
		return appendJSONString(b, string(desc.Name()))
	case protoreflect.MessageKind:
		return appendJSONMessage(b, v.Message())
	}
	return b, false
}

// appendJSONWellKnown appends the well-known types protojson writes in
// their own way that translation uses; ok is false for the others.
func appendJSONWellKnown(b []byte, m protoreflect.Message) ([]byte, bool) {
	fds := m.Descriptor().Fields()
	switch m.Descriptor().Name() {
	case "Duration":
		secs, nanos := m.Get(fds.ByNumber(1)).Int(), m.Get(fds.ByNumber(2)).Int()
		if secs < -315576000000 || secs > 315576000000 || nanos < -999999999 || nanos > 999999999 ||
			secs > 0 && nanos < 0 || secs < 0 && nanos > 0 {
			return b, false // protojson refuses it
		}
		b = append(b, '"')
		if secs < 0 || nanos < 0 {
			b = append(b, '-')
			secs, nanos = -secs, -nanos
		}
		b = strconv.AppendInt(b, secs, 10)
		// 0, 3, 6 or 9 fractional digits, as the nanoseconds need.
		if nanos != 0 {
			frac := strconv.AppendInt(make([]byte, 0, 9), nanos+1e9, 10)[1:]
			for range 2 {
				if len(frac) > 3 && string(frac[len(frac)-3:]) == "000" {
					frac = frac[:len(frac)-3]
				}
			}
			b = append(b, '.')
			b = append(b, frac...)
		}
		return append(b, `s"`...), true
	case "BoolValue", "Int32Value", "Int64Value", "UInt32Value", "UInt64Value", "StringValue", "BytesValue":
		fd := fds.ByNumber(1)
		return appendJSONSingular(b, m.Get(fd), fd)
	case "Empty":
		return append(b, "{}"...), true
	}
	return b, false
}

// appendJSONString appends s quoted as protojson quotes strings; ok is
// false when s is not UTF-8, which protojson refuses.
func appendJSONString(b []byte, s string) ([]byte, bool) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				return b, false
			}
			i += n
			continue
		}
		if c >= ' ' && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		b = append(b, '\\')
		switch c {
		case '"', '\\':
			b = append(b, c)
		case '\b':
			b = append(b, 'b')
		case '\f':
			b = append(b, 'f')
		case '\n':
			b = append(b, 'n')
		case '\r':
			b = append(b, 'r')
		case '\t':
			b = append(b, 't')
		default:
			b = append(b, 'u')
			b = append(b, "0000"[1+(bits.Len32(uint32(c))-1)/4:]...)
			b = strconv.AppendUint(b, uint64(c), 16)
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}
