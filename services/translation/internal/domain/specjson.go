package domain

import (
	"google.golang.org/protobuf/reflect/protoreflect"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

// simpleDestinationRuleJSON encodes a DestinationRule that sets only a
// host and a client TLS mode, which is most of them (every destination gets
// one, and so does every federated host), to the bytes MarshalSpec gives,
// without protojson. ok is false for any other DestinationRule, and for a
// host that JSON would have to escape; TestSimpleDestinationRuleJSON
// checks the bytes against MarshalSpec's reflective path.
func simpleDestinationRuleJSON(dr *istiov1alpha3.DestinationRule) (_ []byte, ok bool) {
	host := dr.GetHost()
	tp := dr.GetTrafficPolicy()
	tls := tp.GetTls()
	if host == "" || tls == nil || !plainJSONString(host) ||
		fieldCount(dr.ProtoReflect()) != 2 || fieldCount(tp.ProtoReflect()) != 1 {
		return nil, false
	}
	mode := tls.GetMode()
	var name string
	switch fieldCount(tls.ProtoReflect()) {
	case 0: // DISABLE, the zero value, is left out
	case 1:
		v := mode.Descriptor().Values().ByNumber(protoreflect.EnumNumber(mode))
		if v == nil || mode == 0 {
			return nil, false
		}
		name = string(v.Name())
	default:
		return nil, false
	}
	b := make([]byte, 0, len(host)+len(name)+48)
	b = append(b, `{"host":"`...)
	b = append(b, host...)
	b = append(b, `","trafficPolicy":{"tls":{`...)
	if name != "" {
		b = append(b, `"mode":"`...)
		b = append(b, name...)
		b = append(b, '"')
	}
	return append(b, "}}}"...), true
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
