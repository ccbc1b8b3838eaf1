package encode

// Templates: one encoding of a spec, filled in with a few strings for many
// objects that differ in nothing else.

import "bytes"

// Template is an encoded spec cut at two placeholder strings, which
// appear in it once each, quoted.
type Template struct {
	parts         [3][]byte
	firstIsSecond bool // the second placeholder comes first
}

// NewTemplate cuts raw at placeholders a and b, or returns nil when
// either is not found exactly once.
func NewTemplate(raw []byte, a, b string) *Template {
	qa, qb := []byte(`"`+a+`"`), []byte(`"`+b+`"`)
	if bytes.Count(raw, qa) != 1 || bytes.Count(raw, qb) != 1 {
		return nil
	}
	ia, ib := bytes.Index(raw, qa), bytes.Index(raw, qb)
	t := &Template{}
	first, firstLen, second, secondLen := ia, len(qa), ib, len(qb)
	if ib < ia {
		t.firstIsSecond = true
		first, firstLen, second, secondLen = ib, len(qb), ia, len(qa)
	}
	// Keep the quotes in the parts.
	t.parts[0] = raw[:first+1]
	t.parts[1] = raw[first+firstLen-1 : second+1]
	t.parts[2] = raw[second+secondLen-1:]
	return t
}

// Fill writes the template with a and b in place of its placeholders a
// and b; they must need no escaping in JSON (Plain).
func (t *Template) Fill(a, b string) []byte {
	if t.firstIsSecond {
		a, b = b, a
	}
	out := make([]byte, 0, len(t.parts[0])+len(a)+len(t.parts[1])+len(b)+len(t.parts[2]))
	out = append(out, t.parts[0]...)
	out = append(out, a...)
	out = append(out, t.parts[1]...)
	out = append(out, b...)
	return append(out, t.parts[2]...)
}
