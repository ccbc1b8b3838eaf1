// Package domain is the translation model and rules: a pure function from
// every cluster's input snapshot to every cluster's output snapshot. It knows
// nothing of RPC, Redis or Kubernetes clients; the snapshot and Istio messages
// are its data model.
package domain

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"

	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	"google.golang.org/protobuf/proto"
)

// Options are the install-wide settings translation needs.
type Options struct {
	// Install is the value of the managed-by label.
	Install string
	// ClusterDomain is the DNS suffix of Services, usually cluster.local.
	ClusterDomain string
	// ManagementCluster names the management cluster's input, whose
	// Settings are read; the install name when empty (the management
	// cluster is named by the install).
	ManagementCluster string
	// Namespace is the install's namespace, where the Settings named
	// "settings" is read; any namespace when empty.
	Namespace string

	// labels holds the label map of each cluster's objects, which they
	// share; set by withDefaults.
	labels *labelMaps
	// sealed is Incremental.OnSealed's function.
	sealed func(*snapshotv1.OutputSnapshot)
	// enc encodes every spec and status; tests set it to check the
	// encodings against protojson (WithVerifiedEncoding).
	enc encode.Encoder
}

// labelMaps gives the objects of one cluster one label map, instead of
// one each: outputs hold up to millions of objects. Nothing modifies an
// object's labels once it is made. Not safe for concurrent use: one
// translation at a time (Incremental reuses its full translation's).
type labelMaps struct {
	install   string
	byCluster map[string]map[string]string
}

func (l *labelMaps) get(install, cluster string) map[string]string {
	if l == nil || l.install != install {
		return map[string]string{snapshots.LabelManagedBy: install, snapshots.LabelCluster: cluster}
	}
	m, ok := l.byCluster[cluster]
	if !ok {
		m = map[string]string{snapshots.LabelManagedBy: install, snapshots.LabelCluster: cluster}
		l.byCluster[cluster] = m
	}
	return m
}

func (o Options) withDefaults() Options {
	if o.Install == "" {
		o.Install = snapshots.DefaultInstall
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = "cluster.local"
	}
	if o.ManagementCluster == "" {
		o.ManagementCluster = o.Install
	}
	o.labels = &labelMaps{install: o.Install, byCluster: map[string]map[string]string{}}
	return o
}

// Management is the name of the management cluster's input, with the
// defaults applied.
func (o Options) Management() string {
	return o.withDefaults().ManagementCluster
}

// Istio kinds written by translation.
const (
	IstioNetworkingV1       = "networking.istio.io/v1"
	SecurityV1              = "security.istio.io/v1"
	KindDestinationRule     = "DestinationRule"
	KindVirtualService      = "VirtualService"
	KindAuthorizationPolicy = "AuthorizationPolicy"
	KindPeerAuthentication  = "PeerAuthentication"
)

// Kinds of the parents named in the parents annotation, and of the user
// resources that get statuses.
const (
	NetworkingV1          = "networking.meshplane.dev/v1"
	KindTrafficPolicy     = "TrafficPolicy"
	KindAccessPolicy      = "AccessPolicy"
	KindVirtualMesh       = "VirtualMesh"
	parentKindDestination = "discovery.meshplane.dev/v1, Kind=Destination"
	parentKindMesh        = "discovery.meshplane.dev/v1, Kind=Mesh"
	parentKindTraffic     = NetworkingV1 + ", Kind=" + KindTrafficPolicy
	parentKindAccess      = NetworkingV1 + ", Kind=" + KindAccessPolicy
	parentKindVirtualMesh = NetworkingV1 + ", Kind=" + KindVirtualMesh
)

// Translate computes one output snapshot per cluster that has an input. The
// result depends only on the inputs and options: the same inputs give the
// same versions on any replica. Problems with user resources are not
// errors: they are reported in the resources' statuses. An error means an
// output could not be encoded.
func Translate(inputs map[string]*snapshotv1.InputSnapshot, opts Options) (map[string]*snapshotv1.OutputSnapshot, error) {
	outputs, _, err := TranslateWithLastGood(inputs, opts, LastGood{})
	return outputs, err
}

// TranslateWithLastGood is Translate with last-known-good: a policy whose
// current version fails validation is translated from its last valid
// version in last, when there is one. It returns the outputs and the last
// valid versions to pass to the next translation. last is not modified.
func TranslateWithLastGood(inputs map[string]*snapshotv1.InputSnapshot, opts Options, last LastGood) (map[string]*snapshotv1.OutputSnapshot, LastGood, error) {
	r, err := TranslateResult(inputs, opts, last)
	if err != nil {
		return nil, LastGood{}, err
	}
	return r.Outputs, r.LastGood, nil
}

// TranslateResult is TranslateWithLastGood that also returns what was
// applied to each discovered entity, for Describe.
func TranslateResult(inputs map[string]*snapshotv1.InputSnapshot, opts Options, last LastGood) (*Result, error) {
	r, _, err := translateAll(inputs, opts, last)
	return r, err
}

// translateAll is a full translation; it also returns the state an
// incremental translation starts from.
func translateAll(inputs map[string]*snapshotv1.InputSnapshot, opts Options, last LastGood) (*Result, *incState, error) {
	opts = opts.withDefaults()
	next := newLastGood()
	outputs := make(map[string]*snapshotv1.OutputSnapshot, len(inputs))
	for _, cluster := range sortedKeys(inputs) {
		outputs[cluster] = &snapshotv1.OutputSnapshot{
			Cluster:       cluster,
			InputVersions: map[string]string{cluster: inputs[cluster].GetVersion()},
		}
	}

	scope := readScopes(inputs, opts.ManagementCluster)
	set, settingsObjects := readSettings(inputs, opts, last.Settings, scope)
	for c, out := range outputs {
		out.GatewayDetector = GatewayDetector(set.discovery, c)
	}
	ix := NewIndex(inputs, opts.ClusterDomain)
	ix.scope = scope
	vms := applyVirtualMeshes(ix, collectResources(inputs, (*snapshotv1.InputSnapshot).GetVirtualMeshes), last.VirtualMeshes)
	vds := applyVirtualDestinations(ix, vms, collectResources(inputs, (*snapshotv1.InputSnapshot).GetVirtualDestinations), last.VirtualDestinations)
	tr := newTrafficTranslation(ix)
	tr.vds = vds
	tr.fed = newFederationLookup(ix, vms)
	tr.lastGood = last.Traffic
	policies := collectTrafficPolicies(inputs)
	tr.apply(policies)
	// prepare was its last reader: the state kept for the next
	// translation must not hold the previous specs (deleted policies').
	tr.lastGood = nil
	warnPlaintextInStrictMesh(ix, tr, vms)
	access, accessPolicies := applyAccessPolicies(ix, vms, collectResources(inputs, (*snapshotv1.InputSnapshot).GetAccessPolicies), last.Access)

	users := indexUserObjects(inputs, opts.ClusterDomain)
	destObjs := make(map[ObjectKey][]*snapshotv1.Object, len(ix.destinations))
	clientObjs := map[ObjectKey][]clusterObject{}
	alloc := &objectAllocator{left: 2 * len(ix.destinations)}
	for _, d := range ix.destinations {
		objs, err := destinationObjects(d, tr, users, set, opts, alloc)
		if err != nil {
			return nil, nil, err
		}
		destObjs[d.Key] = objs
		outputs[d.Key.Cluster].Objects = append(outputs[d.Key.Cluster].Objects, objs...)
		cobjs, err := clientObjects(d, tr, users, set, opts)
		if err != nil {
			return nil, nil, err
		}
		if len(cobjs) > 0 {
			clientObjs[d.Key] = cobjs
			for _, co := range cobjs {
				if out, ok := outputs[co.cluster]; ok {
					out.Objects = append(out.Objects, co.obj)
				}
			}
		}
	}
	e := newEmitter(opts.enc)
	emitMeshWide(e, vms)
	access.emit(e)
	addrs := map[string]*addrSet{}
	if err := emitFederation(e, ix, vms, tr, addrs); err != nil {
		return nil, nil, err
	}
	emitVirtualDestinations(e, ix, vds, addrs)
	if err := e.flush(outputs, opts); err != nil {
		return nil, nil, err
	}
	apObjs, apShared := destinationAuthorizationPolicies(outputs, ix, access)
	emitIssuedCertificates(outputs, vms)

	for _, p := range policies {
		st, err := trafficPolicyStatus(opts.enc, p)
		if err != nil {
			return nil, nil, err
		}
		outputs[p.Key.Cluster].Statuses = append(outputs[p.Key.Cluster].Statuses, st)
		if g, ok := p.goodVersion(); ok {
			next.Traffic[p.Key] = g
		}
	}
	for _, p := range accessPolicies {
		st, err := accessPolicyStatus(opts.enc, p)
		if err != nil {
			return nil, nil, err
		}
		outputs[p.Key.Cluster].Statuses = append(outputs[p.Key.Cluster].Statuses, st)
		if g, ok := p.goodVersion(); ok {
			next.Access[p.Key] = g
		}
	}
	for _, vm := range vms.all {
		st, err := virtualMeshStatus(opts.enc, vm)
		if err != nil {
			return nil, nil, err
		}
		outputs[vm.Key.Cluster].Statuses = append(outputs[vm.Key.Cluster].Statuses, st)
		if g, ok := vm.goodVersion(); ok {
			next.VirtualMeshes[vm.Key] = g
		}
	}
	for _, so := range settingsObjects {
		st, err := settingsStatus(opts.enc, so)
		if err != nil {
			return nil, nil, err
		}
		outputs[so.Key.Cluster].Statuses = append(outputs[so.Key.Cluster].Statuses, st)
		if g, ok := so.goodVersion(); ok {
			next.Settings[so.Key] = g
		}
	}
	for _, g := range ix.scope.all {
		st, err := scopeGrantStatus(opts.enc, g)
		if err != nil {
			return nil, nil, err
		}
		outputs[g.Key.Cluster].Statuses = append(outputs[g.Key.Cluster].Statuses, st)
	}
	for _, vd := range vds.all {
		st, err := virtualDestinationStatus(opts.enc, vd)
		if err != nil {
			return nil, nil, err
		}
		outputs[vd.Key.Cluster].Statuses = append(outputs[vd.Key.Cluster].Statuses, st)
		if g, ok := vd.goodVersion(); ok {
			next.VirtualDestinations[vd.Key] = g
		}
	}
	// WasmDeploymentPolicies and AccessLogPolicies; the incremental path
	// leaves any change to them to a full translation.
	if err := translateExtensions(inputs, ix, outputs, opts, last, next); err != nil {
		return nil, nil, err
	}
	sealers := sealOutputs(outputs, e, opts.sealed)
	applied := &Applied{inputs: inputs, ix: ix, traffic: tr, policies: policies, access: access, accessPs: accessPolicies, vms: vms, vds: vds}
	res := &Result{Outputs: outputs, LastGood: next, Applied: applied}
	return res, &incState{opts: opts, result: res, set: set, users: users, destObjs: destObjs, clientObjs: clientObjs, exported: exportedSubsetNames(vms, tr), apObjs: apObjs, apShared: apShared, sealers: sealers}, nil
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

// destinationAuthorizationPolicies finds the AuthorizationPolicy written
// for each destination with AccessPolicies. shared holds the destinations
// whose key is also that of a mesh-wide object, which their policy was
// merged into.
func destinationAuthorizationPolicies(outputs map[string]*snapshotv1.OutputSnapshot, ix *Index, access *accessTranslation) (objs map[ObjectKey]*snapshotv1.Object, shared map[ObjectKey]bool) {
	objs, shared = map[ObjectKey]*snapshotv1.Object{}, map[ObjectKey]bool{}
	for cluster, out := range outputs {
		for _, o := range out.GetObjects() {
			if o.GetApiVersion() != SecurityV1 || o.GetKind() != KindAuthorizationPolicy {
				continue
			}
			k := ObjectKey{Cluster: cluster, Namespace: o.GetNamespace(), Name: o.GetName()}
			d, ok := ix.byKey[k]
			if !ok {
				continue
			}
			if ap, _ := access.policy(d); ap == nil || strings.Contains(o.GetAnnotations()[snapshots.AnnotationParents], parentKindVirtualMesh) {
				shared[k] = true
				continue
			}
			objs[k] = o
		}
	}
	return objs, shared
}

// makeObject wraps an encoded spec as flush does.
func makeObject(apiVersion, kind string, at ObjectKey, parents []ParentRef, specJSON []byte, opts Options) *snapshotv1.Object {
	return makeObjectAnnotated(apiVersion, kind, at, encode.ParentsAnnotation(parents), specJSON, opts)
}

// makeObjectAnnotated is makeObject with the annotations already made;
// objects may share them, as they share label maps.
func makeObjectAnnotated(apiVersion, kind string, at ObjectKey, annotations map[string]string, specJSON []byte, opts Options) *snapshotv1.Object {
	return &snapshotv1.Object{
		ApiVersion:  apiVersion,
		Kind:        kind,
		Namespace:   at.Namespace,
		Name:        at.Name,
		Labels:      opts.labels.get(opts.Install, at.Cluster),
		Annotations: annotations,
		Spec:        specJSON,
	}
}

// destinationObjects are the VirtualService (when policies set routes) and
// the DestinationRule of destination d, less those that a user's own
// object for the same host blocks.
//
// alloc, when not nil, hands out the objects and their slice.
func destinationObjects(d *destination, tr *trafficTranslation, users userObjects, set settings, opts Options, alloc *objectAllocator) ([]*snapshotv1.Object, error) {
	var out []*snapshotv1.Object
	st := tr.states[d.Key]
	var vsObj *snapshotv1.Object
	if vs := st.virtualService(); vs != nil {
		if u := users.conflicts(d.Key.Cluster, KindVirtualService, d.Host); len(u) == 0 || reportConflict(set.conflicts, d, d.Host, st.vsParents, tr.policy, KindVirtualService, u) {
			obj, err := newObject(KindVirtualService, d, st.vsParents, vs, nil, opts, alloc.object())
			if err != nil {
				return nil, err
			}
			out = alloc.objects(2)[:1]
			out[0], vsObj = obj, obj
		}
	}
	drParents := st.allDRParents()
	if u := users.conflicts(d.Key.Cluster, KindDestinationRule, d.Host); len(u) > 0 && !reportConflict(set.conflicts, d, d.Host, drParents, tr.policy, KindDestinationRule, u) {
		return out, nil
	}
	// The VirtualService's annotations when its parents are the same.
	var ann map[string]string
	if vsObj != nil && slices.Equal(st.vsParents, drParents) {
		ann = vsObj.Annotations
	}
	var obj *snapshotv1.Object
	if raw, ok := st.destinationRuleJSON(d, set.defaultTLS); ok {
		obj = newObjectEncoded(KindDestinationRule, d, drParents, raw, ann, opts, alloc.object())
	} else {
		var err error
		if obj, err = newObject(KindDestinationRule, d, drParents, st.destinationRule(d, set.defaultTLS), ann, opts, alloc.object()); err != nil {
			return nil, err
		}
	}
	if out == nil {
		out = alloc.objects(1)[:0]
	}
	return append(out, obj), nil
}

// clusterObject is an object made for a destination in another cluster
// than the destination's.
type clusterObject struct {
	cluster string
	obj     *snapshotv1.Object
}

// clientObjects are the VirtualServices written for destination d in the
// clusters of the meshes it is federated to (clientVirtualService), for
// its federated host, in the client mesh's namespace as the federated
// ServiceEntry: one per client cluster and namespace (the first client
// mesh's, by key, when two share one), less those a user's own object for
// the host blocks.
func clientObjects(d *destination, tr *trafficTranslation, users userObjects, set settings, opts Options) ([]clusterObject, error) {
	st := tr.states[d.Key]
	if len(st.inForce) == 0 {
		return nil, nil
	}
	// Most clients get the same VirtualService: what was made for a
	// client key without warnings is reused.
	type made struct {
		raw         []byte // nil: no VirtualService
		policies    []ObjectKey
		annotations map[string]string
	}
	var byKey map[string]*made
	var out []clusterObject
	seen := map[ObjectKey]bool{}
	for _, c := range tr.fed.clients(d) {
		at := ObjectKey{Cluster: c.mesh.Key.Cluster, Namespace: c.mesh.Namespace, Name: c.host}
		if seen[at] {
			continue
		}
		seen[at] = true
		key := tr.clientKey(st, c)
		m := byKey[key]
		if m == nil {
			vs, policies, warned := tr.clientVirtualService(st, c)
			m = &made{policies: policies}
			if vs != nil {
				raw, err := opts.enc.Spec(vs)
				if err != nil {
					return nil, fmt.Errorf("%s %s/%s in %s: %w", KindVirtualService, at.Namespace, at.Name, at.Cluster, err)
				}
				parents := make([]ParentRef, 0, len(policies)+2)
				parents = append(parents,
					ParentRef{Kind: parentKindDestination, Name: d.Key.Name, Namespace: d.Key.Namespace, Cluster: d.Key.Cluster},
					ParentRef{Kind: parentKindVirtualMesh, Name: c.vm.Key.Name, Namespace: c.vm.Key.Namespace, Cluster: c.vm.Key.Cluster})
				for _, p := range policies {
					parents = append(parents, ParentRef{Kind: parentKindTraffic, Name: p.Name, Namespace: p.Namespace, Cluster: p.Cluster})
				}
				m.raw, m.annotations = raw, encode.ParentsAnnotation(parents)
			}
			if !warned {
				if byKey == nil {
					byKey = map[string]*made{}
				}
				byKey[key] = m
			}
		}
		if m.raw == nil {
			continue
		}
		if u := users.conflicts(at.Cluster, KindVirtualService, c.host); len(u) > 0 && !reportConflict(set.conflicts, d, c.host+" in cluster "+at.Cluster, m.policies, tr.policy, KindVirtualService, u) {
			continue
		}
		out = append(out, clusterObject{cluster: at.Cluster, obj: makeObjectAnnotated(IstioNetworkingV1, KindVirtualService, at, m.annotations, m.raw, opts)})
	}
	return out, nil
}

// newObject wraps an Istio spec for destination d with the labels and
// parents annotation every Meshplane object carries. ann, when not nil, is
// that annotation made already. The object is o, a new one.
func newObject(kind string, d *destination, policies []ObjectKey, spec proto.Message, ann map[string]string, opts Options, o *snapshotv1.Object) (*snapshotv1.Object, error) {
	specJSON, err := opts.enc.Spec(spec)
	if err != nil {
		return nil, fmt.Errorf("%s for %s/%s in %s: %w", kind, d.Key.Namespace, d.Key.Name, d.Key.Cluster, err)
	}
	return newObjectEncoded(kind, d, policies, specJSON, ann, opts, o), nil
}

// newObjectEncoded is newObject for a spec encoded already.
func newObjectEncoded(kind string, d *destination, policies []ObjectKey, specJSON []byte, ann map[string]string, opts Options, o *snapshotv1.Object) *snapshotv1.Object {
	if ann == nil {
		var small [4]ParentRef
		parents := append(small[:0], ParentRef{Kind: parentKindDestination, Name: d.Key.Name, Namespace: d.Key.Namespace, Cluster: d.Key.Cluster})
		for _, p := range policies {
			parents = append(parents, ParentRef{Kind: parentKindTraffic, Name: p.Name, Namespace: p.Namespace, Cluster: p.Cluster})
		}
		ann = encode.ParentsAnnotation(parents)
	}
	o.ApiVersion, o.Kind, o.Namespace, o.Name = IstioNetworkingV1, kind, d.Key.Namespace, d.Key.Name
	o.Labels, o.Annotations, o.Spec = opts.labels.get(opts.Install, d.Key.Cluster), ann, specJSON
	return o
}

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

// objectAllocator hands out objects a few at a time: one array for all
// would be cleared with stores that bypass the caches, and then filled
// from memory.
type objectAllocator struct {
	chunk []snapshotv1.Object
	left  int // objects still to be asked for
	// Room for slices of objects, for objects.
	room []*snapshotv1.Object
}

// object is next, or a new object on its own when a is nil or has
// handed out as many as it was to.
func (a *objectAllocator) object() *snapshotv1.Object {
	if a == nil || (a.left <= 0 && len(a.chunk) == 0) {
		return &snapshotv1.Object{}
	}
	return a.next()
}

// objects is a slice of n objects, cut from a larger array when a is not
// nil; appending to it copies.
func (a *objectAllocator) objects(n int) []*snapshotv1.Object {
	if a == nil {
		return make([]*snapshotv1.Object, n)
	}
	if len(a.room) < n {
		a.room = make([]*snapshotv1.Object, max(n, 256))
	}
	s := a.room[:n:n]
	a.room = a.room[n:]
	return s
}

func (a *objectAllocator) next() *snapshotv1.Object {
	if len(a.chunk) == 0 {
		a.chunk = make([]snapshotv1.Object, min(a.left, 128))
	}
	o := &a.chunk[0]
	a.chunk = a.chunk[1:]
	a.left--
	return o
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

// warnPlaintextInStrictMesh warns a TrafficPolicy that disables mTLS to a
// destination whose mesh requires it: its clients will be refused.
func warnPlaintextInStrictMesh(ix *Index, tr *trafficTranslation, vms *virtualMeshes) {
	for _, d := range ix.destinations {
		warnPlaintext(tr, vms, d)
	}
}

func warnPlaintext(tr *trafficTranslation, vms *virtualMeshes, d *destination) {
	st := tr.states[d.Key]
	if st.tlsMode != networkingv1.TrafficPolicySpec_Policy_MTLS_Istio_DISABLE {
		return
	}
	vm := vms.vmOf(d.Mesh)
	if vm == nil || !vm.sharedMTLS() {
		return
	}
	p := st.destOwners[fieldMTLS]
	if as := p.Status.GetDestinations()[d.Key.String()]; as != nil {
		as.Warnings = append(as.Warnings, fmt.Sprintf("spec.policy.mtls.istio.tlsMode: VirtualMesh %s requires STRICT mTLS in mesh %s.%s; clients sending plaintext to this destination will be refused (no PERMISSIVE PeerAuthentication is written)", vm.Key, d.Mesh.Name, d.Mesh.Namespace))
	}
}

// resourceStatus encodes st as the status to write to one user resource,
// the resource of kind at key, computed for generation.
func resourceStatus(enc encode.Encoder, apiVersion, kind string, key ObjectKey, generation int64, st proto.Message) (*snapshotv1.ResourceStatus, error) {
	raw, err := enc.Spec(st)
	if err != nil {
		return nil, fmt.Errorf("status of %s %s: %w", kind, key, err)
	}
	return &snapshotv1.ResourceStatus{
		ApiVersion: apiVersion, Kind: kind, Namespace: key.Namespace, Name: key.Name,
		ObservedGeneration: generation, Status: raw,
	}, nil
}

// ParentRef names a resource an output object was translated from: the
// parents annotation (encode.Parents) lists them.
type ParentRef = encode.ParentRef
