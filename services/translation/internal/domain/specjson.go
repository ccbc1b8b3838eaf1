package domain

import (
	"maps"
	"slices"

	"google.golang.org/protobuf/reflect/protoreflect"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

// simpleDestinationRuleJSON encodes a DestinationRule that sets only a
// host, a client TLS mode and subsets with a name and labels, which is
// most of them (every destination gets one, and so does every federated
// host), to the bytes MarshalSpec gives, without protojson. ok is false
// for any other DestinationRule, and for a string that JSON would have to
// escape; TestSimpleDestinationRuleJSON checks the bytes against
// MarshalSpec's reflective path.
func simpleDestinationRuleJSON(dr *istiov1alpha3.DestinationRule) (_ []byte, ok bool) {
	host := dr.GetHost()
	tp := dr.GetTrafficPolicy()
	tls := tp.GetTls()
	subsets := dr.GetSubsets()
	fields := 2
	if len(subsets) > 0 {
		fields = 3
	}
	if host == "" || tls == nil || !plainJSONString(host) ||
		fieldCount(dr.ProtoReflect()) != fields || fieldCount(tp.ProtoReflect()) != 1 {
		return nil, false
	}
	mode := tls.GetMode()
	// The mode only; DISABLE, the zero value, is written too
	// (explicitZero).
	if n := fieldCount(tls.ProtoReflect()); n > 1 || n == 1 && mode == 0 || n < 0 {
		return nil, false
	}
	name, ok := tlsModeName(mode)
	if !ok {
		return nil, false
	}
	size := len(host) + len(name) + 48
	for _, ss := range subsets {
		n, ok := simpleSubsetSize(ss)
		if !ok {
			return nil, false
		}
		size += n
	}
	b := make([]byte, 0, size)
	b = append(b, `{"host":"`...)
	b = append(b, host...)
	b = append(b, `","trafficPolicy":{"tls":{"mode":"`...)
	b = append(b, name...)
	b = append(b, `"}}`...)
	if len(subsets) > 0 {
		b = append(b, `,"subsets":[`...)
		for i, ss := range subsets {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendSimpleSubset(b, ss)
		}
		b = append(b, ']')
	}
	return append(b, '}'), true
}

// destinationRuleJSON is MarshalSpec(st.destinationRule(d, defaultTLS))
// written straight from st, without the DestinationRule, when that is one
// simpleDestinationRuleJSON encodes: every destination gets one. ok is
// false otherwise.
func (st *destState) destinationRuleJSON(d *destination, defaultTLS istiov1alpha3.ClientTLSSettings_TLSmode) (_ []byte, ok bool) {
	host := d.Host
	if st.outlier != nil || host == "" || !plainJSONString(host) {
		return nil, false
	}
	mode, ok := tlsModes[st.tlsMode]
	if !ok {
		mode = defaultTLS
	}
	name, ok := tlsModeName(mode)
	if !ok {
		return nil, false
	}
	subsets := st.subsets()
	size := len(host) + len(name) + 48
	for n, labels := range subsets {
		if !plainJSONString(n) {
			return nil, false
		}
		size += len(n) + 32
		for k, v := range labels {
			if !plainJSONString(k) || !plainJSONString(v) {
				return nil, false
			}
			size += len(k) + len(v) + 6
		}
	}
	b := make([]byte, 0, size)
	b = append(b, `{"host":"`...)
	b = append(b, host...)
	b = append(b, `","trafficPolicy":{"tls":{"mode":"`...)
	b = append(b, name...)
	b = append(b, `"}}`...)
	if len(subsets) > 0 {
		b = append(b, `,"subsets":[`...)
		for i, n := range slices.Sorted(maps.Keys(subsets)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendSubset(b, n, subsets[n])
		}
		b = append(b, ']')
	}
	return append(b, '}'), true
}

// tlsModeName is the name MarshalSpec writes for a client TLS mode,
// DISABLE, the zero value, included (explicitZero); ok is false for a
// mode without a name.
func tlsModeName(mode istiov1alpha3.ClientTLSSettings_TLSmode) (string, bool) {
	v := mode.Descriptor().Values().ByNumber(protoreflect.EnumNumber(mode))
	if v == nil {
		return "", false
	}
	return string(v.Name()), true
}

// simpleSubsetSize says whether a subset sets only a name and labels,
// all written in JSON as they are, and about how long its encoding is.
func simpleSubsetSize(ss *istiov1alpha3.Subset) (int, bool) {
	if ss == nil {
		return 0, false
	}
	fields, n := 0, 32+len(ss.GetName())
	if ss.GetName() != "" {
		fields++
	}
	if len(ss.GetLabels()) > 0 {
		fields++
	}
	if fieldCount(ss.ProtoReflect()) != fields || !plainJSONString(ss.GetName()) {
		return 0, false
	}
	for k, v := range ss.GetLabels() {
		if !plainJSONString(k) || !plainJSONString(v) {
			return 0, false
		}
		n += len(k) + len(v) + 6
	}
	return n, true
}

// appendSimpleSubset appends a subset that simpleSubsetSize accepts.
func appendSimpleSubset(b []byte, ss *istiov1alpha3.Subset) []byte {
	return appendSubset(b, ss.GetName(), ss.GetLabels())
}

// appendSubset appends a subset of this name and labels, which JSON
// writes as they are, its labels in key order as protojson writes maps.
func appendSubset(b []byte, name string, labels map[string]string) []byte {
	b = append(b, '{')
	if name != "" {
		b = append(b, `"name":"`...)
		b = append(b, name...)
		b = append(b, '"')
	}
	if len(labels) > 0 {
		if name != "" {
			b = append(b, ',')
		}
		b = append(b, `"labels":{`...)
		var small [4]string
		keys := small[:0]
		for k := range labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, k...)
			b = append(b, `":"`...)
			b = append(b, labels[k]...)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// fieldCount is the number of populated fields of m, or -1 when it holds
// unknown fields.
func fieldCount(m protoreflect.Message) int {
	if len(m.GetUnknown()) > 0 {
		return -1
	}
	n := 0
	m.Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool {
		n++
		return true
	})
	return n
}

// plainJSONString says whether s is written in JSON as it is, between
// quotes: letters, digits and the punctuation of host names.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_' || c == '*') {
			return false
		}
	}
	return true
}
