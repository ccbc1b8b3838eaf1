package encode

// The DestinationRules that translation writes most, encoded by hand.

import (
	"maps"
	"slices"

	"google.golang.org/protobuf/reflect/protoreflect"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

// simpleDestinationRuleJSON encodes a DestinationRule that sets only a
// host, a client TLS mode and subsets with a name and labels, which is
// most of them (every destination gets one, and so does every federated
// host), to the bytes Spec gives, without protojson. ok is false
// for any other DestinationRule, and for a string that JSON would have to
// escape; TestSimpleDestinationRuleJSON checks the bytes against
// Reflect.
func simpleDestinationRuleJSON(dr *istiov1alpha3.DestinationRule) (_ []byte, ok bool) {
	host := dr.GetHost()
	tp := dr.GetTrafficPolicy()
	tls := tp.GetTls()
	subsets := dr.GetSubsets()
	fields := 2
	if len(subsets) > 0 {
		fields = 3
	}
	if host == "" || tls == nil || !Plain(host) ||
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

// TLSDestinationRule encodes the DestinationRule that sets host, client
// TLS mode mode and the subsets of these names and labels (in name
// order), and nothing else, as Spec would: every destination gets one.
// It writes the bytes straight from its arguments, without making the
// DestinationRule. ok is false when a string would need escaping in JSON,
// or mode has no name.
func TLSDestinationRule(host string, mode istiov1alpha3.ClientTLSSettings_TLSmode, subsets map[string]map[string]string) (_ []byte, ok bool) {
	if host == "" || !Plain(host) {
		return nil, false
	}
	name, ok := tlsModeName(mode)
	if !ok {
		return nil, false
	}
	size := len(host) + len(name) + 48
	for n, labels := range subsets {
		if !Plain(n) {
			return nil, false
		}
		size += len(n) + 32
		for k, v := range labels {
			if !Plain(k) || !Plain(v) {
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

// IstioMutualDestinationRule encodes the DestinationRule that sets host
// and the client TLS mode ISTIO_MUTUAL only, as Spec would: the
// client-side DestinationRule of most federated hosts. ok is false when
// host is empty or would need escaping in JSON.
func IstioMutualDestinationRule(host string) (_ []byte, ok bool) {
	if host == "" || !Plain(host) {
		return nil, false
	}
	return []byte(`{"host":"` + host + `","trafficPolicy":{"tls":{"mode":"ISTIO_MUTUAL"}}}`), true
}

// tlsModeName is the name Spec writes for a client TLS mode,
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
	if fieldCount(ss.ProtoReflect()) != fields || !Plain(ss.GetName()) {
		return 0, false
	}
	for k, v := range ss.GetLabels() {
		if !Plain(k) || !Plain(v) {
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

// Plain says whether s is written in JSON as it is, between quotes:
// letters, digits and the punctuation of host names. Such strings can be
// put into encodings without escaping, as templates are filled.
func Plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_' || c == '*') {
			return false
		}
	}
	return true
}
