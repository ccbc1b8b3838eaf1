package snapshots

import (
	"encoding/binary"
	"maps"
	"slices"
	"sync"
	"unique"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

// LabelSets shares one map among label sets that are equal. The objects
// of an output carry one or a few label sets (the ownership labels), so an
// agent that holds 21,000 objects, or sees them in its cluster, needs a
// few maps, not 21,000. A shared map must not be modified. It keeps at
// most maxLabelSets sets; one more is left as it is. The zero value is
// ready to use; it is safe for concurrent use.
type LabelSets struct {
	mu   sync.Mutex
	last map[string]string
	sets map[string]map[string]string
}

// maxLabelSets bounds what a LabelSets keeps: a cluster's own objects may
// carry any number of label sets.
const maxLabelSets = 1024

// Share returns a map equal to m that the set holds: m itself when the
// set did not hold one (and now does), nil when m is empty.
func (s *LabelSets) Share(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil && maps.Equal(s.last, m) {
		return s.last
	}
	key := labelSetKey(m)
	if shared, ok := s.sets[key]; ok {
		s.last = shared
		return shared
	}
	if len(s.sets) >= maxLabelSets {
		return m
	}
	if s.sets == nil {
		s.sets = map[string]map[string]string{}
	}
	s.sets[key], s.last = m, m
	return m
}

// ShareObjects makes the labels of objs maps that the set holds, and the
// values of their annotations canonical strings (CanonicalValues). Call
// it before anything else reads objs.
func (s *LabelSets) ShareObjects(objs []*snapshotv1.Object) {
	for _, o := range objs {
		if o == nil {
			continue
		}
		if len(o.Labels) > 0 {
			o.Labels = s.Share(o.Labels)
		}
		CanonicalValues(o.Annotations, "")
	}
}

// CanonicalValues replaces the values of m but the one of key except
// with their canonical copies (unique.Make), which every other copy made
// canonical shares: the agent holds each object it applies as received
// and as its view of the cluster sees it, whose annotations are the same
// (translation's parents annotation is a few hundred bytes an object).
func CanonicalValues(m map[string]string, except string) {
	for k, v := range m {
		if k != except {
			m[k] = unique.Make(v).Value()
		}
	}
}

// labelSetKey is m's keys and values in key order, each after its
// length, so that no two different maps have the same key.
func labelSetKey(m map[string]string) string {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(m[k])))
		b = append(b, m[k]...)
	}
	return string(b)
}
