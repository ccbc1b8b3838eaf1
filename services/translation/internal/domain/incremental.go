package domain

import (
	"bytes"
	"maps"
	"slices"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Incremental translates a sequence of inputs. When only TrafficPolicies
// and AccessPolicies changed since the last call, it recomputes only the
// destinations that the old and new versions of the changed policies
// select (and, for TrafficPolicies, those they add subsets to), the
// statuses of the policies applied there, and the outputs of the clusters
// concerned; every other output is the previous one. Anything else that changed (discovery, any other resource, the set
// of clusters) means a full translation. The result is the one
// TranslateResult gives for the same inputs and LastGood.
//
// The state of the last result is updated in place: a caller that reads a
// previous Result's Applied while Translate runs must serialize the two.
// An Incremental is not safe for concurrent use.
type Incremental struct {
	opts Options
	st   *incState
	// The encodings of the policies' sources, by kind: what diffPolicies
	// compares a new input's policies with. They outlive full
	// translations: each names the message it encodes.
	trafficEnc, accessEnc sourceEncodings
	// Counts of full and incremental translations.
	full, incremental int
	// sealed is OnSealed's function.
	sealed func(*snapshotv1.OutputSnapshot)
}

// OnSealed sets a function that each translation calls with every output
// as soon as it is sealed, before the translation returns: on the
// goroutine that sealed it, several at once (each with other clusters'
// outputs), in cluster order within each. A caller may publish an output
// then, rather than after every output is sealed: an edit that changes
// the outputs of 100 clusters seals them for about half a second on two
// cores. It must not modify the output; nil sets none.
func (in *Incremental) OnSealed(f func(*snapshotv1.OutputSnapshot)) { in.sealed = f }

// Counts returns how many translations were full and how many
// incremental.
func (in *Incremental) Counts() (full, incremental int) { return in.full, in.incremental }

// incState is what a translation leaves for the next one.
type incState struct {
	opts   Options
	inputs map[string]*snapshotv1.InputSnapshot
	result *Result
	set    settings
	users  userObjects
	// destObjs are the VirtualService and DestinationRule written for
	// each destination.
	destObjs map[ObjectKey][]*snapshotv1.Object
	// clientObjs are the VirtualServices written for each destination in
	// the clusters of the meshes it is federated to.
	clientObjs map[ObjectKey][]clusterObject
	// exported are the subsets (subsetNames) of the federated destinations
	// that have some, which federation's DestinationRules have: when they
	// change, the translation is a full one.
	exported map[ObjectKey]string
	// apObjs are the AuthorizationPolicies written for destinations;
	// apShared the destinations whose key a mesh-wide object also has.
	apObjs   map[ObjectKey]*snapshotv1.Object
	apShared map[ObjectKey]bool
	// sealers seal the outputs of incremental translations: they know the
	// digests of the bodies of the objects they keep. Nothing modifies
	// an object once it is made, and a caller that changes outputs
	// invalidates the state.
	sealers sealShards
}

// NewIncremental returns an incremental translator.
func NewIncremental(opts Options) *Incremental {
	return &Incremental{opts: opts, trafficEnc: sourceEncodings{}, accessEnc: sourceEncodings{}}
}

// Invalidate makes the next translation a full one, for a caller that
// changed the outputs of the last result.
func (in *Incremental) Invalidate() { in.st = nil }

// SourceIDs identify the policies of one cluster's input by bytes, for a
// caller that holds the encoding the input was decoded from: Traffic[i]
// stands for the input's TrafficPolicies[i], and Access[i] for its
// AccessPolicies[i]. Two equal IDs must mean two equal policies (the
// bytes a policy was decoded from, with whatever the caller set on it
// afterwards); two different ones may still be equal policies, which
// costs a translation. A list whose length is not the input's is not
// used. The IDs are not modified, and are kept until the next full
// translation.
type SourceIDs struct {
	Traffic, Access [][]byte
}

// Translate translates inputs. last is the LastGood of the previous result
// (or the one to start from); inputs must not be modified afterwards.
func (in *Incremental) Translate(inputs map[string]*snapshotv1.InputSnapshot, last LastGood) (*Result, error) {
	return in.TranslateWithIDs(inputs, nil, last)
}

// TranslateWithIDs is Translate with the SourceIDs of the inputs that came
// with them, by cluster: an incremental translation tells the unchanged
// policies of those by their IDs instead of encoding each policy.
func (in *Incremental) TranslateWithIDs(inputs map[string]*snapshotv1.InputSnapshot, ids map[string]SourceIDs, last LastGood) (*Result, error) {
	if in.st != nil {
		if r, ok, err := in.update(inputs, ids); ok || err != nil {
			if err != nil {
				in.st = nil
			} else {
				in.incremental++
			}
			return r, err
		}
	}
	in.full++
	// A full translation makes every policy anew: no kept encoding names
	// the source of one any more, and those of deleted policies must not
	// hold their messages.
	clear(in.trafficEnc)
	clear(in.accessEnc)
	opts := in.opts
	opts.sealed = in.sealed
	r, st, err := translateAll(inputs, opts, last)
	if err != nil {
		in.st = nil
		return nil, err
	}
	st.inputs = inputs
	in.st = st
	// The IDs of the policies made now: the next incremental translation
	// compares with them and encodes none of these.
	for c, id := range ids {
		keepIDs(in.trafficEnc, c, inputs[c].GetTrafficPolicies(), id.Traffic)
		keepIDs(in.accessEnc, c, inputs[c].GetAccessPolicies(), id.Access)
	}
	return r, nil
}

// keepIDs keeps the IDs of a cluster's resources, when they stand for
// them (as many). Each is used only for the message it names, so one of a
// resource that made no policy (a duplicate) is never used.
func keepIDs[R interface {
	proto.Message
	GetMetadata() *commonv1.ObjectMeta
}](enc sourceEncodings, cluster string, list []R, ids [][]byte) {
	if len(ids) != len(list) {
		return
	}
	for i, r := range list {
		md := r.GetMetadata()
		if key := (ObjectKey{Cluster: cluster, Namespace: md.GetNamespace(), Name: md.GetName()}); key.Name != "" {
			enc[key] = encodedSource{src: r, b: ids[i], id: true}
		}
	}
}

// policyFields are the InputSnapshot fields an incremental translation
// handles, and those translation does not read. Any other field that
// differs (including fields added to the API later) means a full
// translation.
var policyFields = map[protoreflect.Name]bool{
	"traffic_policies": true, "access_policies": true,
	"version": true, "agent": true, "generated_at": true,
}

// samePolicyless says whether two inputs of a cluster differ at most in
// their TrafficPolicies and AccessPolicies (and version and agent
// details). List elements are compared by pointer first: inputs that
// share them are cheap to compare.
func samePolicyless(a, b *snapshotv1.InputSnapshot) bool {
	ra, rb := a.ProtoReflect(), b.ProtoReflect()
	fields := ra.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if policyFields[fd.Name()] {
			continue
		}
		va, vb := ra.Get(fd), rb.Get(fd)
		if !fd.IsList() || fd.Kind() != protoreflect.MessageKind {
			if !va.Equal(vb) {
				return false
			}
			continue
		}
		la, lb := va.List(), vb.List()
		if la.Len() != lb.Len() {
			return false
		}
		for j := range la.Len() {
			ma, mb := la.Get(j).Message().Interface(), lb.Get(j).Message().Interface()
			if ma != mb && !proto.Equal(ma, mb) {
				return false
			}
		}
	}
	return true
}

// keyedPolicy is a policy that diffPolicies follows between translations:
// the key of the resource it was made from, and that resource.
type keyedPolicy interface {
	comparable
	key() ObjectKey
	source() proto.Message
}

func (p *trafficPolicy) key() ObjectKey        { return p.Key }
func (p *trafficPolicy) source() proto.Message { return p.src }
func (p *accessPolicy) key() ObjectKey         { return p.Key }
func (p *accessPolicy) source() proto.Message  { return p.src }

// sourceEncodings keeps the deterministic encoding of the resource each
// policy was made from, or its SourceID, so that telling whether a
// cluster's new input holds the same resource costs one encoding, or none,
// instead of a reflective comparison: at the reference estate, proto.Equal
// over 10,000 policies was a quarter of an edit's CPU, and encoding them
// a half. An entry is used only for the message it names; otherwise that
// message is encoded again.
type sourceEncodings map[ObjectKey]encodedSource

type encodedSource struct {
	src proto.Message
	b   []byte
	// id: b is a SourceID, comparable only with SourceIDs.
	id bool
}

var deterministic = proto.MarshalOptions{Deterministic: true}

// same reports whether r, the resource of key in a new input, is the same
// as src, the one its policy was made from, and keeps r's encoding (or
// id, r's SourceID, when not nil) for the next comparison, as src's when
// they are the same: the policy keeps src. Equal encodings or IDs mean
// equal messages; messages that are equal but encode differently count as
// changed, which costs a translation, never a missed change.
func (e sourceEncodings) same(key ObjectKey, src, r proto.Message, id []byte) bool {
	if src == r {
		return true
	}
	old, ok := e[key]
	usable := ok && old.src == src
	if id != nil && usable && old.id {
		if bytes.Equal(old.b, id) {
			return true
		}
		e[key] = encodedSource{src: r, b: id, id: true}
		return false
	}
	same := e.sameEncoded(key, src, r, old, usable && !old.id)
	if id != nil {
		// An ID stands for r, and so for src when they are the same.
		kept := r
		if same {
			kept = src
		}
		e[key] = encodedSource{src: kept, b: id, id: true}
	}
	return same
}

// sameEncoded is same by deterministic encodings; old is src's when
// usable.
func (e sourceEncodings) sameEncoded(key ObjectKey, src, r proto.Message, old encodedSource, usable bool) bool {
	rb, err := deterministic.Marshal(r)
	if err != nil {
		return proto.Equal(src, r)
	}
	if !usable {
		b, err := deterministic.Marshal(src)
		if err != nil {
			return proto.Equal(src, r)
		}
		old = encodedSource{src: src, b: b}
	}
	if bytes.Equal(old.b, rb) {
		e[key] = old
		return true
	}
	e[key] = encodedSource{src: r, b: rb}
	return false
}

// diffPolicies finds the policies of the changed clusters that are new,
// edited or deleted, and returns the new list in acceptance order (compare):
// old holds the previous list in that order and oldByKey indexes it. list
// reads a cluster's resources and make turns one into a policy. Unchanged
// policies keep their instances. ok is false when a changed cluster's list
// holds one policy twice: a full translation resolves that.
func diffPolicies[P keyedPolicy, R interface {
	proto.Message
	GetMetadata() *commonv1.ObjectMeta
}](
	old []P, oldByKey map[ObjectKey]P, inputs map[string]*snapshotv1.InputSnapshot, changedClusters []string,
	list func(*snapshotv1.InputSnapshot) []R, make func(ObjectKey, R) P, compare func(a, b P) int, enc sourceEncodings,
	ids func(cluster string) [][]byte,
) (policies []P, byKey map[ObjectKey]P, changed map[P]bool, deleted []P, ok bool) {
	changed = map[P]bool{}
	byKey = maps.Clone(oldByKey)
	replaced := map[P]P{} // old instance -> new, same acceptance position
	var added []P
	for _, c := range changedClusters {
		seen := map[ObjectKey]bool{}
		rs := list(inputs[c])
		cids := ids(c)
		if len(cids) != len(rs) {
			cids = nil
		}
		for i, r := range rs {
			var id []byte
			if cids != nil {
				id = cids[i]
			}
			md := r.GetMetadata()
			key := ObjectKey{Cluster: c, Namespace: md.GetNamespace(), Name: md.GetName()}
			if key.Name == "" {
				continue
			}
			if seen[key] {
				return nil, nil, nil, nil, false
			}
			seen[key] = true
			prev, had := oldByKey[key]
			if had && enc.same(key, prev.source(), r, id) {
				continue
			}
			if !had && id != nil {
				enc[key] = encodedSource{src: r, b: id, id: true}
			}
			p := make(key, r)
			byKey[key] = p
			changed[p] = true
			if !had {
				added = append(added, p)
				continue
			}
			changed[prev] = true
			if compare(prev, p) == 0 {
				replaced[prev] = p
			} else {
				// Its place in the acceptance order changed: it moves.
				added = append(added, p)
				deleted = append(deleted, prev)
			}
		}
		for key, prev := range oldByKey {
			if key.Cluster == c && !seen[key] {
				changed[prev] = true
				deleted = append(deleted, prev)
				delete(byKey, key)
				delete(enc, key)
			}
		}
	}
	gone := map[P]bool{}
	for _, p := range deleted {
		gone[p] = true
	}
	policies = slices.Grow([]P(nil), len(old)+len(added))
	for _, p := range old {
		if gone[p] {
			continue
		}
		if r, ok := replaced[p]; ok {
			p = r
		}
		policies = append(policies, p)
	}
	slices.SortFunc(added, compare)
	for _, p := range added {
		i, _ := slices.BinarySearchFunc(policies, p, compare)
		policies = slices.Insert(policies, i, p)
	}
	// A policy deleted because it moved is not deleted.
	deleted = slices.DeleteFunc(deleted, func(p P) bool { _, ok := byKey[p.key()]; return ok })
	return policies, byKey, changed, deleted, true
}

// update is the incremental path; ok is false when it does not apply.
// Its phases: which policies changed (nothing is changed before it is
// known that the incremental path applies), the destinations they select
// get their policy lists again and are recomputed with every destination
// whose subsets they add, their objects and those of the AccessPolicies
// are made again, then the statuses, and the outputs of the clusters
// concerned are rebuilt and sealed.
func (in *Incremental) update(inputs map[string]*snapshotv1.InputSnapshot, ids map[string]SourceIDs) (*Result, bool, error) {
	prev := in.st
	changedClusters, ok := changedInputs(prev.inputs, inputs)
	if !ok {
		return nil, false, nil
	}
	if len(changedClusters) == 0 {
		return prev.result, true, nil
	}
	opts := prev.opts
	a := prev.result.Applied
	tr := a.traffic

	d, ok := in.diffAll(a, tr, inputs, ids, changedClusters)
	if !ok {
		return nil, false, nil
	}
	aFresh, aAffected, ok := prev.accessAffected(a, d)
	if !ok {
		return nil, false, nil
	}
	tr.byKey = d.newByKey
	tr.lastGood = prev.result.LastGood.Traffic
	affected, fresh, isFresh := reapplyTraffic(tr, d)
	order, recomputed := recomputeDestinations(tr, affected, isFresh, prev.result.LastGood.Traffic)
	for _, k := range order {
		if subsetNames(tr.states[k]) != prev.exported[k] && len(tr.fed.clients(a.ix.byKey[k])) > 0 {
			// Federation's DestinationRules change: they are made by a
			// full translation only. The state is dropped with it.
			return nil, false, nil
		}
	}

	// Policy-level conflict messages about recomputed destinations are
	// made again below.
	for _, p := range d.policies {
		for k := range p.conflicts {
			if recomputed[k] {
				delete(p.conflicts, k)
			}
		}
	}
	rb, err := prev.rebuildDestinations(a, tr, order, fresh, d.newByKey, changedClusters, opts)
	if err != nil {
		return nil, true, err
	}

	// AccessPolicies: the destinations they select get their lists, the
	// statuses for them and their AuthorizationPolicies made again.
	aTouched, newAPObjs, aOrder, err := a.rebuildAccess(aAffected, d.aChanged, aFresh, opts)
	if err != nil {
		return nil, true, err
	}
	for _, k := range aOrder {
		rb.outClusters[k.Cluster] = true
	}

	// Statuses of the touched policies, and of none for deleted ones.
	sc, next, err := policyStatuses(opts.enc, prev.result.LastGood, d.deleted, d.aDeleted, rb.touched, aTouched, d.newByKey, d.accessByKey, len(d.aChanged) > 0)
	if err != nil {
		return nil, true, err
	}
	for c := range sc.drop {
		rb.outClusters[c] = true
	}

	// New outputs for the clusters concerned; the others are reused.
	outputs := maps.Clone(prev.result.Outputs)
	rebuilt := make([]*snapshotv1.OutputSnapshot, 0, len(rb.outClusters))
	for c := range rb.outClusters {
		if inputs[c] == nil {
			continue // a client cluster without an output
		}
		outputs[c] = prev.rebuildOutput(c, inputs[c].GetVersion(), order, aOrder, rb.newObjs, rb.newClient, newAPObjs, sc)
		rebuilt = append(rebuilt, outputs[c])
	}
	prev.sealers.seal(rebuilt, nil, in.sealed)
	prev.keepObjects(order, aOrder, rb, newAPObjs)

	applied := *a
	applied.inputs = inputs
	applied.policies = d.policies
	applied.accessPs = d.accessPs
	res := &Result{Outputs: outputs, LastGood: next, Applied: &applied}
	prev.inputs = inputs
	prev.result = res
	return res, true, nil
}

// policyDiff is which TrafficPolicies and AccessPolicies an update
// changed: the new lists and indexes, the changed (new or edited) and
// the deleted ones.
type policyDiff struct {
	policies    []*trafficPolicy
	newByKey    map[ObjectKey]*trafficPolicy
	changed     map[*trafficPolicy]bool
	deleted     []*trafficPolicy
	accessPs    []*accessPolicy
	accessByKey map[ObjectKey]*accessPolicy
	aChanged    map[*accessPolicy]bool
	aDeleted    []*accessPolicy
}

// diffAll finds which policies changed: a new or edited policy gets a
// new instance; an unchanged one keeps its instance, status and all.
func (in *Incremental) diffAll(a *Applied, tr *trafficTranslation, inputs map[string]*snapshotv1.InputSnapshot, ids map[string]SourceIDs, changedClusters []string) (d policyDiff, ok bool) {
	d.policies, d.newByKey, d.changed, d.deleted, ok = diffPolicies(a.policies, tr.byKey, inputs, changedClusters,
		(*snapshotv1.InputSnapshot).GetTrafficPolicies, newTrafficPolicy, compareAcceptance, in.trafficEnc,
		func(c string) [][]byte { return ids[c].Traffic })
	if !ok {
		return d, false
	}
	oldAccess := make(map[ObjectKey]*accessPolicy, len(a.accessPs))
	for _, p := range a.accessPs {
		oldAccess[p.Key] = p
	}
	d.accessPs, d.accessByKey, d.aChanged, d.aDeleted, ok = diffPolicies(a.accessPs, oldAccess, inputs, changedClusters,
		(*snapshotv1.InputSnapshot).GetAccessPolicies, newAccessPolicy, compareAccessAcceptance, in.accessEnc,
		func(c string) [][]byte { return ids[c].Access })
	return d, ok
}

// accessAffected prepares the new and edited AccessPolicies and returns
// them with the destinations the changed ones select; ok is false when one
// of those shares its AuthorizationPolicy's key with a mesh-wide object,
// which a full translation sorts out.
func (prev *incState) accessAffected(a *Applied, d policyDiff) (fresh []*accessPolicy, affected map[ObjectKey]bool, ok bool) {
	affected = map[ObjectKey]bool{}
	for p := range d.aChanged {
		if d.accessByKey[p.Key] == p {
			a.access.prepare(p, prev.result.LastGood.Access)
			fresh = append(fresh, p)
		}
		for _, k := range p.selected {
			if prev.apShared[k] {
				return nil, nil, false
			}
			affected[k] = true
		}
	}
	return fresh, affected, true
}

// reapplyTraffic prepares the new and edited TrafficPolicies, and gives
// the destinations that the old and new versions select their policy
// lists again. It returns those destinations and the fresh policies.
func reapplyTraffic(tr *trafficTranslation, d policyDiff) (affected map[ObjectKey]bool, fresh []*trafficPolicy, isFresh map[*trafficPolicy]bool) {
	affected = map[ObjectKey]bool{}
	for p := range d.changed {
		if d.newByKey[p.Key] == p {
			tr.prepare(p)
			fresh = append(fresh, p)
		}
		for _, k := range p.selected {
			affected[k] = true
		}
	}
	tr.lastGood = nil // as in translateAll: prepare was its last reader
	isFresh = make(map[*trafficPolicy]bool, len(fresh))
	for _, p := range fresh {
		isFresh[p] = true
	}
	for k := range affected {
		st := tr.states[k]
		applied := slices.DeleteFunc(slices.Clone(st.applied), func(p *trafficPolicy) bool { return d.changed[p] })
		for _, p := range fresh {
			if _, found := slices.BinarySearchFunc(p.selected, k, ObjectKey.compare); found {
				applied = append(applied, p)
			}
		}
		slices.SortFunc(applied, compareAcceptance)
		st.applied = applied
	}
	return affected, fresh, isFresh
}

// recomputeDestinations recomputes the affected destinations, and every
// destination whose subsets they add or added; each recomputed
// destination's targets join in turn. It returns them in key order.
func recomputeDestinations(tr *trafficTranslation, affected map[ObjectKey]bool, isFresh map[*trafficPolicy]bool, lastGood map[ObjectKey]LastGoodTraffic) (order []ObjectKey, recomputed map[ObjectKey]bool) {
	queue := slices.SortedFunc(maps.Keys(affected), ObjectKey.compare)
	recomputed = map[ObjectKey]bool{}
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		if recomputed[k] {
			continue
		}
		recomputed[k] = true
		order = append(order, k)
		st := tr.states[k]
		for _, p := range st.applied {
			if p.lastGood == nil && !isFresh[p] {
				// Its prior version is the last valid one kept now, as a
				// full translation's prepare finds it: it may have been
				// accepted in a newer generation since it was made.
				p.refreshPrior(lastGood)
			}
		}
		lost := st.reset(tr.states)
		tr.applyAll(st)
		queue = append(queue, lost...)
		queue = append(queue, st.targets...)
	}
	slices.SortFunc(order, ObjectKey.compare)
	return order, recomputed
}

// rebuilt is what rebuildDestinations made: each recomputed destination's
// objects in its own cluster and in its clients', the clusters whose
// outputs change, and the TrafficPolicies whose statuses do.
type rebuilt struct {
	newObjs     map[ObjectKey][]*snapshotv1.Object
	newClient   map[ObjectKey][]clusterObject
	outClusters map[string]bool
	touched     map[*trafficPolicy]bool
}

// rebuildDestinations makes the objects of the recomputed destinations
// (order) again.
func (prev *incState) rebuildDestinations(a *Applied, tr *trafficTranslation, order []ObjectKey, fresh []*trafficPolicy, newByKey map[ObjectKey]*trafficPolicy, changedClusters []string, opts Options) (rebuilt, error) {
	rb := rebuilt{
		newObjs: map[ObjectKey][]*snapshotv1.Object{}, newClient: map[ObjectKey][]clusterObject{},
		outClusters: map[string]bool{}, touched: map[*trafficPolicy]bool{},
	}
	for _, p := range fresh {
		rb.touched[p] = true
	}
	for _, c := range changedClusters {
		rb.outClusters[c] = true
	}
	for _, k := range order {
		d := a.ix.byKey[k]
		warnPlaintext(tr, a.vms, d)
		objs, err := destinationObjects(d, tr, prev.users, prev.set, opts, nil)
		if err != nil {
			return rb, err
		}
		rb.newObjs[k] = objs
		rb.outClusters[k.Cluster] = true
		cobjs, err := clientObjects(d, tr, prev.users, prev.set, opts)
		if err != nil {
			return rb, err
		}
		rb.newClient[k] = cobjs
		for _, co := range prev.clientObjs[k] {
			rb.outClusters[co.cluster] = true
		}
		for _, co := range cobjs {
			rb.outClusters[co.cluster] = true
		}
		st := tr.states[k]
		for _, p := range st.applied {
			rb.touched[p] = true
		}
		for _, pk := range st.allDRParents() {
			if p := newByKey[pk]; p != nil {
				rb.touched[p] = true
			}
		}
	}
	// A policy whose subset contribution to a recomputed destination went
	// away was applied to a destination that was recomputed itself, so it
	// is touched above.
	return rb, nil
}

// keepObjects keeps the objects made for the next update.
func (prev *incState) keepObjects(order, aOrder []ObjectKey, rb rebuilt, newAPObjs map[ObjectKey]*snapshotv1.Object) {
	for _, k := range order {
		prev.destObjs[k] = rb.newObjs[k]
		if len(rb.newClient[k]) > 0 {
			prev.clientObjs[k] = rb.newClient[k]
		} else {
			delete(prev.clientObjs, k)
		}
	}
	for _, k := range aOrder {
		if o := newAPObjs[k]; o != nil {
			prev.apObjs[k] = o
		} else {
			delete(prev.apObjs, k)
		}
	}
}

// rebuildAccess gives each destination that changed AccessPolicies select
// (affected) its list, statuses and AuthorizationPolicy again. It returns
// the policies whose status changes, the new AuthorizationPolicies and the
// destinations in order.
func (a *Applied) rebuildAccess(aAffected map[ObjectKey]bool, aChanged map[*accessPolicy]bool, aFresh []*accessPolicy, opts Options) (map[*accessPolicy]bool, map[ObjectKey]*snapshotv1.Object, []ObjectKey, error) {
	access := a.access
	for k := range aAffected {
		applied := slices.DeleteFunc(slices.Clone(access.applied[k]), func(p *accessPolicy) bool { return aChanged[p] })
		for _, p := range aFresh {
			if _, found := slices.BinarySearchFunc(p.selected, k, ObjectKey.compare); found {
				applied = append(applied, p)
			}
		}
		slices.SortFunc(applied, compareAccessAcceptance)
		if len(applied) == 0 {
			delete(access.applied, k)
		} else {
			access.applied[k] = applied
		}
	}
	aTouched := map[*accessPolicy]bool{}
	for _, p := range aFresh {
		aTouched[p] = true
	}
	newAPObjs := map[ObjectKey]*snapshotv1.Object{}
	aOrder := slices.SortedFunc(maps.Keys(aAffected), ObjectKey.compare)
	for _, k := range aOrder {
		d := a.ix.byKey[k]
		access.setStatuses(d)
		for _, p := range access.applied[k] {
			aTouched[p] = true
		}
		ap, parents := access.policy(d)
		if ap == nil {
			continue
		}
		raw, err := opts.enc.Spec(ap)
		if err != nil {
			return nil, nil, nil, err
		}
		newAPObjs[k] = makeObject(SecurityV1, KindAuthorizationPolicy, k, parents, raw, opts)
	}
	return aTouched, newAPObjs, aOrder, nil
}

// changedInputs returns the clusters whose input differs from the last
// translation's, and false when the incremental path does not apply: a
// cluster came or went, or an input changed beyond its policies.
func changedInputs(prev, inputs map[string]*snapshotv1.InputSnapshot) ([]string, bool) {
	if len(inputs) != len(prev) {
		return nil, false
	}
	var changed []string
	for c, n := range inputs {
		o, ok := prev[c]
		if !ok {
			return nil, false
		}
		if o == n {
			continue
		}
		if !samePolicyless(o, n) {
			return nil, false
		}
		changed = append(changed, c)
	}
	return changed, true
}

// statusChanges are the policy statuses an incremental translation makes
// again, by cluster, and those it drops from the last outputs (by kind,
// namespace and name).
type statusChanges struct {
	statuses map[string][]*snapshotv1.ResourceStatus
	drop     map[string]map[[3]string]bool
}

func (sc *statusChanges) dropKey(kind string, key ObjectKey) {
	c := key.Cluster
	if sc.drop[c] == nil {
		sc.drop[c] = map[[3]string]bool{}
	}
	sc.drop[c][[3]string{kind, key.Namespace, key.Name}] = true
}

// policyStatuses makes, with enc, the statuses of the touched policies that are
// current (byKey, accessByKey), drops those of the deleted ones, and
// returns the last valid versions that follow from them, last's for every
// other policy.
func policyStatuses(enc encode.Encoder, last LastGood, deleted []*trafficPolicy, aDeleted []*accessPolicy, touched map[*trafficPolicy]bool, aTouched map[*accessPolicy]bool,
	byKey map[ObjectKey]*trafficPolicy, accessByKey map[ObjectKey]*accessPolicy, accessChanged bool,
) (statusChanges, LastGood, error) {
	sc := statusChanges{statuses: map[string][]*snapshotv1.ResourceStatus{}, drop: map[string]map[[3]string]bool{}}
	// Only TrafficPolicies and AccessPolicies change here: the other
	// kinds' last valid versions carry over as they are.
	next := last
	next.Traffic = maps.Clone(next.Traffic)
	if accessChanged {
		next.Access = maps.Clone(next.Access)
	}
	for _, p := range deleted {
		sc.dropKey(KindTrafficPolicy, p.Key)
		delete(next.Traffic, p.Key)
	}
	for _, p := range aDeleted {
		sc.dropKey(KindAccessPolicy, p.Key)
		delete(next.Access, p.Key)
	}
	for _, p := range slices.SortedFunc(maps.Keys(aTouched), func(x, y *accessPolicy) int { return x.Key.compare(y.Key) }) {
		if accessByKey[p.Key] != p {
			continue
		}
		sc.dropKey(KindAccessPolicy, p.Key)
		st, err := accessPolicyStatus(enc, p)
		if err != nil {
			return sc, next, err
		}
		sc.statuses[p.Key.Cluster] = append(sc.statuses[p.Key.Cluster], st)
		if g, ok := p.goodVersion(); ok {
			next.Access[p.Key] = g
		} else {
			delete(next.Access, p.Key)
		}
	}
	for _, p := range slices.SortedFunc(maps.Keys(touched), func(x, y *trafficPolicy) int { return x.Key.compare(y.Key) }) {
		if byKey[p.Key] != p {
			continue
		}
		sc.dropKey(KindTrafficPolicy, p.Key)
		st, err := trafficPolicyStatus(enc, p)
		if err != nil {
			return sc, next, err
		}
		sc.statuses[p.Key.Cluster] = append(sc.statuses[p.Key.Cluster], st)
		if p.lastGood == nil && len(p.heldOn) == 0 {
			// Not prepared again: its prior version may be one the last
			// valid versions have moved past since.
			p.findPrior(last.Traffic)
		}
		if g, ok := p.goodVersion(); ok {
			next.Traffic[p.Key] = g
		} else {
			delete(next.Traffic, p.Key)
		}
	}
	return sc, next, nil
}

// rebuildOutput makes cluster c's new output from its last one: the objects
// of the recomputed destinations (order, aOrder) replaced by the new ones,
// and the statuses sc names replaced; the caller seals it.
func (st *incState) rebuildOutput(c, inputVersion string, order, aOrder []ObjectKey, newObjs map[ObjectKey][]*snapshotv1.Object, newClient map[ObjectKey][]clusterObject, newAPObjs map[ObjectKey]*snapshotv1.Object, sc statusChanges) *snapshotv1.OutputSnapshot {
	old := st.result.Outputs[c]
	stale := map[*snapshotv1.Object]bool{}
	var added []*snapshotv1.Object
	for _, k := range order {
		for _, co := range st.clientObjs[k] {
			if co.cluster == c {
				stale[co.obj] = true
			}
		}
		for _, co := range newClient[k] {
			if co.cluster == c {
				added = append(added, co.obj)
			}
		}
		if k.Cluster != c {
			continue
		}
		for _, o := range st.destObjs[k] {
			stale[o] = true
		}
		added = append(added, newObjs[k]...)
	}
	for _, k := range aOrder {
		if k.Cluster != c {
			continue
		}
		if o := st.apObjs[k]; o != nil {
			stale[o] = true
		}
		if o := newAPObjs[k]; o != nil {
			added = append(added, o)
		}
	}
	out := &snapshotv1.OutputSnapshot{
		Cluster:            c,
		InputVersions:      map[string]string{c: inputVersion},
		IssuedCertificates: old.GetIssuedCertificates(),
		WasmFilters:        old.GetWasmFilters(),
		AccessLogPolicies:  old.GetAccessLogPolicies(),
		GatewayDetector:    old.GetGatewayDetector(),
		Objects:            make([]*snapshotv1.Object, 0, len(old.GetObjects())+len(added)),
		Statuses:           make([]*snapshotv1.ResourceStatus, 0, len(old.GetStatuses())+len(sc.statuses[c])),
	}
	for _, o := range old.GetObjects() {
		if !stale[o] {
			out.Objects = append(out.Objects, o)
		}
	}
	out.Objects = append(out.Objects, added...)
	for _, s := range old.GetStatuses() {
		if s.GetApiVersion() == NetworkingV1 && sc.drop[c][[3]string{s.GetKind(), s.GetNamespace(), s.GetName()}] {
			continue
		}
		out.Statuses = append(out.Statuses, s)
	}
	out.Statuses = append(out.Statuses, sc.statuses[c]...)
	return out
}
