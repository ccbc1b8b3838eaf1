package encode

// The explicitZero fields added to protojson's encoding: the reference
// that fastJSON is held to writes them too.

import (
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// withExplicitZeros adds to raw, the compact protojson encoding of m, the
// explicitZero fields that m's messages leave at zero, each where
// protojson would write it if it were set (in declaration order). It is
// how Reflect gives the bytes fastJSON does, and an encoding
// written apart from fastJSON's, for checking it.
func withExplicitZeros(raw []byte, m protoreflect.Message) ([]byte, error) {
	out, rest, err := zerosInMessage(make([]byte, 0, len(raw)+32), raw, m)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%d bytes after the JSON of %s", len(rest), m.Descriptor().FullName())
	}
	return out, nil
}

var errNotCompact = errors.New("not compact protojson")

// zerosInMessage copies the JSON object at the start of in, the encoding
// of m, to out with m's explicitZero fields added, and returns what
// follows it in in.
func zerosInMessage(out, in []byte, m protoreflect.Message) ([]byte, []byte, error) {
	md := m.Descriptor()
	if md.FullName().Parent() == "google.protobuf" {
		// The well-known types have JSON forms of their own, and no
		// explicitZero fields.
		return copyJSONValue(out, in)
	}
	if len(in) == 0 || in[0] != '{' {
		return nil, nil, errNotCompact
	}
	in = in[1:]
	fields := md.Fields()
	var zeros []protoreflect.FieldDescriptor
	for i := range fields.Len() {
		if fd := fields.Get(i); isExplicitZero(m, fd) {
			zeros = append(zeros, fd)
		}
	}
	out = append(out, '{')
	first := true
	field := func(fd protoreflect.FieldDescriptor) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out, _ = appendJSONString(out, fd.JSONName())
		out = append(out, ':')
	}
	var err error
	for len(in) > 0 && in[0] != '}' {
		if !first {
			if in[0] != ',' {
				return nil, nil, errNotCompact
			}
			in = in[1:]
		}
		var keyJSON []byte
		if keyJSON, in, err = splitJSONValue(in); err != nil {
			return nil, nil, err
		}
		var key string
		if err := json.Unmarshal(keyJSON, &key); err != nil || len(in) == 0 || in[0] != ':' {
			return nil, nil, errNotCompact
		}
		in = in[1:]
		fd := fields.ByJSONName(key)
		if fd == nil {
			return nil, nil, fmt.Errorf("%s has no field %q", md.FullName(), key)
		}
		for len(zeros) > 0 && zeros[0].Index() < fd.Index() {
			field(zeros[0])
			out = appendZeroEnum(out, zeros[0])
			zeros = zeros[1:]
		}
		field(fd)
		if out, in, err = zerosInValue(out, in, m.Get(fd), fd); err != nil {
			return nil, nil, err
		}
	}
	if len(in) == 0 {
		return nil, nil, errNotCompact
	}
	for _, fd := range zeros {
		field(fd)
		out = appendZeroEnum(out, fd)
	}
	return append(out, '}'), in[1:], nil
}

// zerosInValue copies the JSON value at the start of in, the encoding of
// field fd's value v, adding the explicitZero fields of the messages in it.
func zerosInValue(out, in []byte, v protoreflect.Value, fd protoreflect.FieldDescriptor) ([]byte, []byte, error) {
	var err error
	switch {
	case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
		l := v.List()
		if len(in) == 0 || in[0] != '[' {
			return nil, nil, errNotCompact
		}
		out, in = append(out, '['), in[1:]
		for i := range l.Len() {
			if i > 0 {
				if len(in) == 0 || in[0] != ',' {
					return nil, nil, errNotCompact
				}
				out, in = append(out, ','), in[1:]
			}
			if out, in, err = zerosInMessage(out, in, l.Get(i).Message()); err != nil {
				return nil, nil, err
			}
		}
		if len(in) == 0 || in[0] != ']' {
			return nil, nil, errNotCompact
		}
		return append(out, ']'), in[1:], nil
	case fd.IsMap() && fd.MapValue().Kind() == protoreflect.MessageKind:
		if fd.MapKey().Kind() != protoreflect.StringKind {
			return nil, nil, fmt.Errorf("map %s: only string keys are supported", fd.FullName())
		}
		mv := v.Map()
		if len(in) == 0 || in[0] != '{' {
			return nil, nil, errNotCompact
		}
		out, in = append(out, '{'), in[1:]
		for first := true; len(in) > 0 && in[0] != '}'; first = false {
			if !first {
				if in[0] != ',' {
					return nil, nil, errNotCompact
				}
				out, in = append(out, ','), in[1:]
			}
			var keyJSON []byte
			if keyJSON, in, err = splitJSONValue(in); err != nil {
				return nil, nil, err
			}
			var key string
			if err := json.Unmarshal(keyJSON, &key); err != nil || len(in) == 0 || in[0] != ':' {
				return nil, nil, errNotCompact
			}
			out = append(append(out, keyJSON...), ':')
			if out, in, err = zerosInMessage(out, in[1:], mv.Get(protoreflect.ValueOfString(key).MapKey()).Message()); err != nil {
				return nil, nil, err
			}
		}
		if len(in) == 0 {
			return nil, nil, errNotCompact
		}
		return append(out, '}'), in[1:], nil
	case !fd.IsList() && !fd.IsMap() && fd.Kind() == protoreflect.MessageKind:
		return zerosInMessage(out, in, v.Message())
	}
	return copyJSONValue(out, in)
}

// appendZeroEnum appends the name of enum field fd's zero value.
func appendZeroEnum(out []byte, fd protoreflect.FieldDescriptor) []byte {
	out, _ = appendJSONString(out, string(fd.Enum().Values().ByNumber(0).Name()))
	return out
}

// copyJSONValue copies the JSON value at the start of in to out.
func copyJSONValue(out, in []byte) ([]byte, []byte, error) {
	v, rest, err := splitJSONValue(in)
	if err != nil {
		return nil, nil, err
	}
	return append(out, v...), rest, nil
}

// splitJSONValue splits the compact JSON value at the start of in from
// what follows it.
func splitJSONValue(in []byte) (value, rest []byte, err error) {
	depth := 0
	for i := 0; i < len(in); i++ {
		switch c := in[i]; c {
		case '"':
			for i++; i < len(in) && in[i] != '"'; i++ {
				if in[i] == '\\' {
					i++
				}
			}
			if i >= len(in) {
				return nil, nil, errNotCompact
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return in[:i], in[i:], nil
			}
			depth--
		case ',':
			if depth == 0 {
				return in[:i], in[i:], nil
			}
		}
		if depth == 0 && (in[i] == '"' || in[i] == '}' || in[i] == ']') {
			return in[:i+1], in[i+1:], nil
		}
	}
	if depth != 0 || len(in) == 0 {
		return nil, nil, errNotCompact
	}
	return in, nil, nil
}
