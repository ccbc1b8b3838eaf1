package encode

// The parents annotation, which every output object carries.

import (
	"cmp"
	"encoding/json"
	"slices"
	"unsafe"

	"github.com/meshplane/meshplane/libs/snapshots"
)

// ParentRef names a resource an output object was translated from.
type ParentRef struct {
	Kind      string `json:"-"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Cluster   string `json:"cluster,omitempty"`
}

// ParentsAnnotation is the annotations of an object with these parents.
func ParentsAnnotation(parents []ParentRef) map[string]string {
	return map[string]string{snapshots.AnnotationParents: Parents(parents...)}
}

// Parents renders the parents annotation: parent refs grouped by kind, as
// JSON with sorted keys, each kind's refs sorted and without duplicates.
// The encoding is what encoding/json gives for map[string][]ParentRef; it
// is written by hand because every object carries one.
func Parents(refs ...ParentRef) string {
	// Sorted by kind, then as each kind's list is sorted, so that equal
	// refs are adjacent and each kind's refs follow one another.
	rs := refs
	if len(rs) > 1 {
		var small [8]ParentRef
		rs = append(small[:0], refs...)
		slices.SortFunc(rs, func(a, b ParentRef) int {
			return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		rs = slices.Compact(rs)
	}
	size := 2
	for _, r := range rs {
		size += len(r.Kind) + len(r.Name) + len(r.Namespace) + len(r.Cluster) + 48
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '{')
	for i, r := range rs {
		switch {
		case i == 0:
		case r.Kind != rs[i-1].Kind:
			buf = append(buf, "],"...)
		default:
			buf = append(buf, ',')
		}
		if i == 0 || r.Kind != rs[i-1].Kind {
			buf = appendParentString(buf, r.Kind)
			buf = append(buf, ":["...)
		}
		buf = append(buf, `{"name":`...)
		buf = appendParentString(buf, r.Name)
		if r.Namespace != "" {
			buf = append(buf, `,"namespace":`...)
			buf = appendParentString(buf, r.Namespace)
		}
		if r.Cluster != "" {
			buf = append(buf, `,"cluster":`...)
			buf = appendParentString(buf, r.Cluster)
		}
		buf = append(buf, '}')
	}
	if len(rs) > 0 {
		buf = append(buf, ']')
	}
	buf = append(buf, '}')
	// buf is not written again: the string may share its memory, as
	// strings.Builder's does.
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

// jsonPlain holds the bytes encoding/json writes as they are.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendParentString appends s quoted as encoding/json quotes it.
func appendParentString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !jsonPlain[s[i]] {
			b, _ := json.Marshal(s)
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}
