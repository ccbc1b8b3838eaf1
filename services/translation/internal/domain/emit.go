package domain

// The emitter: objects that several parents ask for, merged, and the
// federated objects, kept in blocks by client cluster; then each output
// sealed.

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	"google.golang.org/protobuf/proto"
)

// emitter gathers objects that several parents may ask for, such as one
// mesh-wide policy for two revisions of istiod in one namespace: the first
// spec asked for wins (callers ask in a deterministic order) and the
// parents are merged.
type emitter struct {
	// The objects by cluster: outputs of many clusters hold millions of
	// objects, and one cluster's fit the CPU caches better.
	shards map[string]map[shardKey]*pendingObject
	order  []*pendingObject
	// The shard used last, as callers add many objects to one cluster.
	lastCluster string
	last        map[shardKey]*pendingObject
	// The client-side objects of federation by client cluster, which are
	// most objects: kept out of the shards, see federatedBlock.
	federated map[string]*federatedBlock
	// enc encodes the specs.
	enc encode.Encoder
}

type shardKey struct {
	apiVersion, kind, namespace, name string
}

type emitKey struct {
	apiVersion, kind string
	at               ObjectKey
}

type pendingObject struct {
	key     emitKey
	parents []ParentRef
	spec    proto.Message
	raw     []byte // the spec already encoded, shared by identical objects
	// annotations made from parents in advance, shared by identical
	// objects; nil when parents were merged.
	annotations map[string]string
	// segment, when not nil, makes this a place in the order instead of
	// an object: where the pairs [from, to) of a federated block go.
	segment *federatedSegment
}

func newEmitter(enc encode.Encoder) *emitter {
	return &emitter{enc: enc, shards: map[string]map[shardKey]*pendingObject{}, federated: map[string]*federatedBlock{}}
}

func (e *emitter) shard(cluster string) map[shardKey]*pendingObject {
	if e.last != nil && cluster == e.lastCluster {
		return e.last
	}
	m, ok := e.shards[cluster]
	if !ok {
		m = map[shardKey]*pendingObject{}
		e.shards[cluster] = m
	}
	e.lastCluster, e.last = cluster, m
	return m
}

func (e *emitter) add(apiVersion, kind string, at ObjectKey, parents []ParentRef, spec proto.Message) {
	m := e.shard(at.Cluster)
	sk := shardKey{apiVersion, kind, at.Namespace, at.Name}
	if p, ok := m[sk]; ok {
		p.merge(parents)
		return
	}
	if fp, k := e.federatedPair(apiVersion, kind, at); fp != nil {
		fp.merge(k, parents)
		return
	}
	p := &pendingObject{key: emitKey{apiVersion, kind, at}, parents: slices.Clone(parents), spec: spec}
	m[sk] = p
	e.order = append(e.order, p)
}

func (p *pendingObject) merge(parents []ParentRef) {
	p.parents = append(p.parents, parents...)
	p.annotations = nil
}

// federatedBlock holds the client-side ServiceEntry and DestinationRule
// of every host federated to one cluster: one pair per host and client
// namespace. There are millions in large estates, so they are not in the
// emitter's maps: callers add them in host order, which keeps each
// host's pairs together for lookups, and flush writes the objects of a
// block at once, into one array.
type federatedBlock struct {
	cluster string
	pairs   []federatedPair // in the order added, and so by host
	// The segments of pairs in the emitter's order: pairs are added in one
	// run per cluster unless an object of the emitter's own comes between.
	segments []*federatedSegment
	// namespace is that of every pair when oneNamespace.
	namespace    string
	oneNamespace bool

	// labels of the cluster's objects, set by flush when the cluster has
	// an output.
	labels map[string]string
}

type federatedSegment struct {
	block    *federatedBlock
	from, to int
	// at is where the segment's objects go among the output's other
	// objects in the emitter's order; set by flush.
	at int
}

// pairObject names one of a federatedPair's two objects; it indexes
// federatedPair.merged.
type pairObject int

const (
	pairServiceEntry    pairObject = 0
	pairDestinationRule pairObject = 1
)

// federatedPair is a ServiceEntry and a DestinationRule at
// (namespace, x.host) in the block's cluster.
type federatedPair struct {
	namespace string
	x         *exportedDest // the name, annotations and usually the specs
	enc       *encodedHost  // the specs when not x's
	// merged are the parents of the ServiceEntry and the DestinationRule
	// once others were merged into x's.
	merged *[2][]ParentRef
}

// specs are the specs of the pair's ServiceEntry and DestinationRule.
func (p *federatedPair) specs() (se, dr []byte) {
	if p.enc != nil {
		return p.enc.se, p.enc.dr
	}
	return p.x.se, p.x.dr
}

// federatedBlock returns the block of cluster, making room for n pairs.
func (e *emitter) federatedBlock(cluster string, n int) *federatedBlock {
	b := e.federated[cluster]
	if b == nil {
		b = &federatedBlock{cluster: cluster, oneNamespace: true}
		e.federated[cluster] = b
	}
	b.pairs = slices.Grow(b.pairs, n)
	return b
}

// addFederated adds the pair of x at namespace to b. The caller adds pairs
// in host order and makes sure the emitter has neither object yet.
func (e *emitter) addFederated(b *federatedBlock, namespace string, x *exportedDest, enc *encodedHost) {
	if len(b.pairs) == 0 {
		b.namespace = namespace
	} else if namespace != b.namespace {
		b.oneNamespace = false
	}
	if n := len(b.segments); n == 0 || e.order[len(e.order)-1].segment != b.segments[n-1] {
		seg := &federatedSegment{block: b, from: len(b.pairs), to: len(b.pairs)}
		b.segments = append(b.segments, seg)
		e.order = append(e.order, &pendingObject{segment: seg})
	}
	b.pairs = append(b.pairs, federatedPair{namespace: namespace, x: x, enc: enc})
	b.segments[len(b.segments)-1].to++
}

// hostPairIn finds the pair in namespace among the pairs from run on, those
// of the last host added.
func (b *federatedBlock) hostPairIn(run int, namespace string) *federatedPair {
	for i := run; i < len(b.pairs); i++ {
		if b.pairs[i].namespace == namespace {
			return &b.pairs[i]
		}
	}
	return nil
}

// namesOutsideBlocks lists the (name, namespace) of the objects of one kind the
// emitter has in cluster outside the federated blocks, in order.
func (e *emitter) namesOutsideBlocks(cluster, apiVersion, kind string) [][2]string {
	var out [][2]string
	for k := range e.shards[cluster] {
		if k.apiVersion == apiVersion && k.kind == kind {
			out = append(out, [2]string{k.name, k.namespace})
		}
	}
	slices.SortFunc(out, func(a, b [2]string) int { return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1])) })
	return out
}

// federatedPair finds the pair holding the object, and which of the two
// it is.
func (e *emitter) federatedPair(apiVersion, kind string, at ObjectKey) (*federatedPair, pairObject) {
	b := e.federated[at.Cluster]
	if b == nil || apiVersion != IstioNetworkingV1 {
		return nil, 0
	}
	var k pairObject
	switch kind {
	case KindServiceEntry:
		k = pairServiceEntry
	case KindDestinationRule:
		k = pairDestinationRule
	default:
		return nil, 0
	}
	i, _ := slices.BinarySearchFunc(b.pairs, at.Name, func(p federatedPair, host string) int { return strings.Compare(p.x.host, host) })
	for ; i < len(b.pairs) && b.pairs[i].x.host == at.Name; i++ {
		if b.pairs[i].namespace == at.Namespace {
			return &b.pairs[i], k
		}
	}
	return nil, 0
}

// merge adds parents to those of the pair's object k.
func (p *federatedPair) merge(k pairObject, parents []ParentRef) {
	if p.merged == nil {
		shared := p.x.parents[:len(p.x.parents):len(p.x.parents)]
		dr := shared
		if p.x.drParents != nil {
			dr = p.x.drParents[:len(p.x.drParents):len(p.x.drParents)]
		}
		p.merged = &[2][]ParentRef{shared, dr}
	}
	p.merged[k] = append(p.merged[k], parents...)
}

// annotations are those of the pair's object k.
func (p *federatedPair) annotations(k pairObject) map[string]string {
	if p.merged == nil {
		if k == pairDestinationRule && p.x.drAnnotations != nil {
			return p.x.drAnnotations
		}
		return p.x.annotations
	}
	return encode.ParentsAnnotation(p.merged[k])
}

// flush encodes the objects into the outputs of their clusters. Objects for
// a cluster without an output (no agent has reported for it) are dropped.
// The federated blocks' objects are not added to the outputs yet: see
// addObjectsTo.
func (e *emitter) flush(outputs map[string]*snapshotv1.OutputSnapshot, opts Options) error {
	for _, p := range e.order {
		if s := p.segment; s != nil {
			if out, ok := outputs[s.block.cluster]; ok {
				// The objects are made when the output is sealed, which
				// finds them in the caches then.
				s.at = len(out.Objects)
				s.block.labels = opts.labels.get(opts.Install, s.block.cluster)
			}
			continue
		}
		k := p.key
		out, ok := outputs[k.at.Cluster]
		if !ok {
			continue
		}
		specJSON := p.raw
		if specJSON == nil {
			var err error
			if specJSON, err = e.enc.Spec(p.spec); err != nil {
				return fmt.Errorf("%s %s/%s in %s: %w", k.kind, k.at.Namespace, k.at.Name, k.at.Cluster, err)
			}
		}
		ann := p.annotations
		if ann == nil {
			ann = encode.ParentsAnnotation(p.parents)
		}
		out.Objects = append(out.Objects, makeObjectAnnotated(k.apiVersion, k.kind, k.at, ann, specJSON, opts))
	}
	return nil
}

// addObjectsTo adds the objects of b to out, its cluster's output, once every
// other object is in: in the output's order when that costs only a merge,
// as sorting two million objects is most of sealing. The order is then the
// one SortOutput gives for the emitter's order, since no two objects have
// the same key. When two do, the objects are added in the emitter's order,
// as the other objects are, for SortOutput to order as it always has.
// Outputs of different blocks may be placed concurrently.
func (b *federatedBlock) addObjectsTo(out *snapshotv1.OutputSnapshot) {
	if b.oneNamespace {
		if merged, ok := b.mergeInto(out.Objects); ok {
			out.Objects = merged
			return
		}
	}
	objects := b.objects()
	n := len(b.pairs)
	if !b.oneNamespace {
		fed := slices.Clone(objects)
		slices.SortFunc(fed, snapshots.CompareObjects)
		others := slices.Clone(out.Objects)
		slices.SortFunc(others, snapshots.CompareObjects)
		if merged, ok := mergeObjects(others, fed); ok {
			out.Objects = merged
			return
		}
	}
	inOrder := make([]*snapshotv1.Object, 0, len(out.Objects)+2*n)
	prev := 0
	for _, s := range b.segments {
		inOrder = append(inOrder, out.Objects[prev:s.at]...)
		for i := s.from; i < s.to; i++ {
			inOrder = append(inOrder, objects[n+i], objects[i])
		}
		prev = s.at
	}
	out.Objects = append(inOrder, out.Objects[prev:]...)
}

// object makes the pair's object k.
func (b *federatedBlock) object(p *federatedPair, k pairObject, o *snapshotv1.Object) *snapshotv1.Object {
	se, dr := p.specs()
	o.ApiVersion, o.Namespace, o.Name, o.Labels, o.Annotations = IstioNetworkingV1, p.namespace, p.x.host, b.labels, p.annotations(k)
	if k == pairDestinationRule {
		o.Kind, o.Spec = KindDestinationRule, dr
	} else {
		o.Kind, o.Spec = KindServiceEntry, se
	}
	return o
}

// objects makes the objects of the pairs: their DestinationRules, then
// their ServiceEntries, in the pairs' order.
func (b *federatedBlock) objects() []*snapshotv1.Object {
	n := len(b.pairs)
	objs := make([]*snapshotv1.Object, 2*n)
	alloc := objectAllocator{left: 2 * n}
	for i := range b.pairs {
		p := &b.pairs[i]
		objs[i] = b.object(p, pairDestinationRule, alloc.next())
		objs[n+i] = b.object(p, pairServiceEntry, alloc.next())
	}
	return objs
}

// mergeInto merges the objects of b, whose pairs have one namespace and
// so are in order by host, into others, making each where it goes: all
// DestinationRules, then all ServiceEntries. ok is false, and nothing
// is merged, when two objects have the same key.
func (b *federatedBlock) mergeInto(others []*snapshotv1.Object) (merged []*snapshotv1.Object, ok bool) {
	others = slices.Clone(others)
	slices.SortFunc(others, snapshots.CompareObjects)
	for i := 1; i < len(others); i++ {
		if snapshots.CompareObjects(others[i-1], others[i]) == 0 {
			return nil, false
		}
	}
	n := len(b.pairs)
	merged = make([]*snapshotv1.Object, 0, len(others)+2*n)
	alloc := objectAllocator{left: 2 * n}
	for _, k := range [2]pairObject{pairDestinationRule, pairServiceEntry} { // DestinationRule < ServiceEntry
		kind := KindServiceEntry
		if k == pairDestinationRule {
			kind = KindDestinationRule
		}
		// The others before this kind in b's namespace, then those of it,
		// which are merged by name.
		for len(others) > 0 && compareObjectKey(others[0], IstioNetworkingV1, kind, b.namespace, "") < 0 {
			merged = append(merged, others[0])
			others = others[1:]
		}
		same := 0
		for same < len(others) && others[same].GetApiVersion() == IstioNetworkingV1 && others[same].GetKind() == kind && others[same].GetNamespace() == b.namespace {
			same++
		}
		named := others[:same]
		others = others[same:]
		for i := range b.pairs {
			p := &b.pairs[i]
			for len(named) > 0 && named[0].GetName() <= p.x.host {
				if named[0].GetName() == p.x.host {
					return nil, false
				}
				merged = append(merged, named[0])
				named = named[1:]
			}
			merged = append(merged, b.object(p, k, alloc.next()))
		}
		merged = append(merged, named...)
	}
	return append(merged, others...), true
}

// compareObjectKey is snapshots.CompareObjects of o and an object with
// this key.
func compareObjectKey(o *snapshotv1.Object, apiVersion, kind, namespace, name string) int {
	if c := strings.Compare(o.GetApiVersion(), apiVersion); c != 0 {
		return c
	}
	if c := strings.Compare(o.GetKind(), kind); c != 0 {
		return c
	}
	if c := strings.Compare(o.GetNamespace(), namespace); c != 0 {
		return c
	}
	return strings.Compare(o.GetName(), name)
}

// mergeObjects merges a and b, each sorted with snapshots.CompareObjects
// and b without two equal keys; ok is false when two objects have the
// same key.
func mergeObjects(a, b []*snapshotv1.Object) (merged []*snapshotv1.Object, ok bool) {
	for i := 1; i < len(a); i++ {
		if snapshots.CompareObjects(a[i-1], a[i]) == 0 {
			return nil, false
		}
	}
	merged = make([]*snapshotv1.Object, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		switch c := snapshots.CompareObjects(a[0], b[0]); {
		case c < 0:
			merged = append(merged, a[0])
			a = a[1:]
		case c > 0:
			merged = append(merged, b[0])
			b = b[1:]
		default:
			return nil, false
		}
	}
	merged = append(merged, a...)
	return append(merged, b...), true
}

// sealOutputs adds the federated objects of e to the outputs and seals
// every output (sealShards). It returns the sealers, for incremental
// translations that reuse the objects.
func sealOutputs(outputs map[string]*snapshotv1.OutputSnapshot, e *emitter, sealed func(*snapshotv1.OutputSnapshot)) sealShards {
	sealers := newSealShards()
	sealers.seal(slices.Collect(maps.Values(outputs)), func(out *snapshotv1.OutputSnapshot) {
		if b := e.federated[out.GetCluster()]; b != nil && b.labels != nil {
			b.addObjectsTo(out)
		}
	}, sealed)
	return sealers
}

// sealShards seal outputs on as many goroutines as Go may run at once:
// each output is sorted and hashed on its own, and they share nothing that
// is written (label maps, annotations and specs they share are only read).
// Each shard is a snapshots.OutputSealer, which keeps the encodings of the
// maps and the digests of the bodies it saw for the next outputs (nothing
// modifies them), and always seals the same clusters: those whose name
// hashes to it, so that an incremental translation finds in it the bodies
// of the cluster's last output.
type sealShards []*snapshots.OutputSealer

func newSealShards() sealShards {
	s := make(sealShards, max(runtime.GOMAXPROCS(0), 1))
	for i := range s {
		s[i] = &snapshots.OutputSealer{}
	}
	return s
}

// shard is the sealer of cluster's outputs.
func (s sealShards) shard(cluster string) int {
	h := fnv.New32a()
	h.Write([]byte(cluster))
	return int(h.Sum32() % uint32(len(s)))
}

// seal seals outs, each by its cluster's sealer, the sealers in parallel;
// prepare, when not nil, runs on each output first, and sealed after it
// is sealed, on the same goroutine.
func (s sealShards) seal(outs []*snapshotv1.OutputSnapshot, prepare, sealed func(*snapshotv1.OutputSnapshot)) {
	byShard := make([][]*snapshotv1.OutputSnapshot, len(s))
	for _, out := range outs {
		i := s.shard(out.GetCluster())
		byShard[i] = append(byShard[i], out)
	}
	var wg sync.WaitGroup
	for i, outs := range byShard {
		if len(outs) == 0 {
			continue
		}
		// Cluster order within a shard: the sealer predicts each output's
		// bodies from the last one's.
		slices.SortFunc(outs, func(a, b *snapshotv1.OutputSnapshot) int { return strings.Compare(a.GetCluster(), b.GetCluster()) })
		wg.Go(func() {
			for _, out := range outs {
				if prepare != nil {
					prepare(out)
				}
				s[i].Seal(out)
				if sealed != nil {
					sealed(out)
				}
			}
		})
	}
	wg.Wait()
}
