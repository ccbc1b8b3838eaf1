package domain

import (
	"errors"
	"fmt"
	"slices"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	"google.golang.org/protobuf/proto"
)

// LastGood remembers, per user resource (kind, cluster, namespace and
// name), the last spec that was translated and ACCEPTED. When a later
// version goes bad for any reason (a field value, a reference to something
// that does not exist, a conflict, a spec that did not decode), translation
// goes on with that spec instead, so that an invalid edit never removes
// working config (DESIGN.md section 7). The resource's status still says
// INVALID, with the errors, and sets lastKnownGood. A resource that was
// never valid has no last valid version: it has no effect.
//
// Translation does not modify a LastGood it is given: it returns a new one,
// which holds only the resources that still exist. A deleted resource
// loses its last valid spec with its outputs.
type LastGood struct {
	Traffic             map[ObjectKey]LastGoodTraffic
	Access              map[ObjectKey]LastGoodAccess
	VirtualMeshes       map[ObjectKey]Kept[*networkingv1.VirtualMeshSpec]
	VirtualDestinations map[ObjectKey]Kept[*networkingv1.VirtualDestinationSpec]
	Settings            map[ObjectKey]Kept[*settingsv1.SettingsSpec]
	Wasm                map[ObjectKey]Kept[*networkingv1.WasmDeploymentPolicySpec]
	AccessLogs          map[ObjectKey]Kept[*observabilityv1.AccessLogPolicySpec]
}

// newLastGood returns a LastGood with every map made.
func newLastGood() LastGood {
	return LastGood{
		Traffic:             map[ObjectKey]LastGoodTraffic{},
		Access:              map[ObjectKey]LastGoodAccess{},
		VirtualMeshes:       map[ObjectKey]Kept[*networkingv1.VirtualMeshSpec]{},
		VirtualDestinations: map[ObjectKey]Kept[*networkingv1.VirtualDestinationSpec]{},
		Settings:            map[ObjectKey]Kept[*settingsv1.SettingsSpec]{},
		Wasm:                map[ObjectKey]Kept[*networkingv1.WasmDeploymentPolicySpec]{},
		AccessLogs:          map[ObjectKey]Kept[*observabilityv1.AccessLogPolicySpec]{},
	}
}

// Len is the number of resources with a last valid version.
func (l LastGood) Len() int {
	return len(l.Traffic) + len(l.Access) + len(l.VirtualMeshes) + len(l.VirtualDestinations) +
		len(l.Settings) + len(l.Wasm) + len(l.AccessLogs)
}

// Kept is the last valid version of a resource: its generation and spec,
// and the UID of the object it belongs to. A resource deleted and created
// again under the same name is a new object: it does not inherit the last
// valid version of the old one.
type Kept[S any] struct {
	Generation int64
	UID        string
	Spec       S
}

// keptOf is the version of the resource with metadata md and spec.
func keptOf[S any](md *commonv1.ObjectMeta, spec S) Kept[S] {
	return Kept[S]{Generation: md.GetGeneration(), UID: md.GetUid(), Spec: spec}
}

// lastOf returns the last valid version of the resource with key and
// metadata md, if kept holds one for the same object.
func lastOf[S any](kept map[ObjectKey]Kept[S], key ObjectKey, md *commonv1.ObjectMeta) (Kept[S], bool) {
	good, ok := kept[key]
	if ok && good.UID != "" && md.GetUid() != "" && good.UID != md.GetUid() {
		return Kept[S]{}, false
	}
	return good, ok
}

// LastGoodTraffic is the last valid version of a TrafficPolicy.
type LastGoodTraffic = Kept[*networkingv1.TrafficPolicySpec]

// LastGoodAccess is the last valid version of an AccessPolicy.
type LastGoodAccess = Kept[*networkingv1.AccessPolicySpec]

// validateVersion returns the errors of a resource's current version: the
// decode error its reader recorded when the spec did not decode (it names
// the field, and the spec is then empty), or what check finds.
func validateVersion[S any](md *commonv1.ObjectMeta, spec S, check func(S) []string) []string {
	if e := md.GetDecodeError(); e != "" {
		return []string{e}
	}
	return check(spec)
}

// inForce decides which version of a resource translation uses. With no
// errors it is the current spec. With errors, it is the last valid version
// in kept, when there is one: kept is then returned too, and the caller
// reports the errors with lastKnownGood. Without one, the resource was
// never valid and has no effect.
func inForce[S any](key ObjectKey, md *commonv1.ObjectMeta, current S, errs []string, kept map[ObjectKey]Kept[S]) (S, *Kept[S]) {
	if len(errs) == 0 {
		return current, nil
	}
	good, ok := lastOf(kept, key, md)
	if !ok {
		return current, nil
	}
	return good.Spec, &good
}

// keep records the version of a resource to keep as its last valid one:
// the one held in force when there is one, else the current version when
// it is valid. valid is the resource's verdict after translation.
func keep[S any](into map[ObjectKey]Kept[S], key ObjectKey, held *Kept[S], md *commonv1.ObjectMeta, spec S, valid bool) {
	switch {
	case held != nil:
		into[key] = *held
	case valid:
		into[key] = keptOf(md, spec)
	}
}

// lastGoodMessage is appended to the errors of a resource kept in force by
// its last valid version.
func lastGoodMessage(generation int64) string {
	return fmt.Sprintf("the last valid version (generation %d) stays in force until the errors are fixed", generation)
}

// heldMessage is appended to a destination's errors when the last valid
// version of a policy stays in force there.
func heldMessage(generation int64) string {
	return fmt.Sprintf("the last valid version (generation %d) stays in force for this destination", generation)
}

// KeptVersion is what a store holds about one resource: its kind and key,
// the UID of the object, its last valid version (Generation and Spec; a
// nil Spec when it was never valid) and when the plane first saw it
// (FirstSeen; zero when unknown), which orders conflicting policies.
type KeptVersion struct {
	Kind       string
	Key        ObjectKey
	Generation int64
	UID        string
	Spec       proto.Message
	FirstSeen  time.Time
}

// lastGoodKind reads and writes one kind's map of a LastGood.
type lastGoodKind struct {
	kind    string
	newSpec func() proto.Message
	list    func(LastGood) []KeptVersion
	each    func(LastGood, func(KeptVersion))
	put     func(LastGood, KeptVersion) bool
}

func keptKind[S proto.Message](kind string, newSpec func() S, m func(LastGood) map[ObjectKey]Kept[S]) lastGoodKind {
	return lastGoodKind{
		kind:    kind,
		newSpec: func() proto.Message { return newSpec() },
		list: func(l LastGood) []KeptVersion {
			var out []KeptVersion
			for k, v := range m(l) {
				out = append(out, KeptVersion{Kind: kind, Key: k, Generation: v.Generation, UID: v.UID, Spec: v.Spec})
			}
			return out
		},
		each: func(l LastGood, fn func(KeptVersion)) {
			for k, v := range m(l) {
				fn(KeptVersion{Kind: kind, Key: k, Generation: v.Generation, UID: v.UID, Spec: v.Spec})
			}
		},
		put: func(l LastGood, v KeptVersion) bool {
			s, ok := v.Spec.(S)
			if ok {
				m(l)[v.Key] = Kept[S]{Generation: v.Generation, UID: v.UID, Spec: s}
			}
			return ok
		},
	}
}

var lastGoodKinds = []lastGoodKind{
	keptKind(KindTrafficPolicy, func() *networkingv1.TrafficPolicySpec { return &networkingv1.TrafficPolicySpec{} }, func(l LastGood) map[ObjectKey]LastGoodTraffic { return l.Traffic }),
	keptKind(KindAccessPolicy, func() *networkingv1.AccessPolicySpec { return &networkingv1.AccessPolicySpec{} }, func(l LastGood) map[ObjectKey]LastGoodAccess { return l.Access }),
	keptKind(KindVirtualMesh, func() *networkingv1.VirtualMeshSpec { return &networkingv1.VirtualMeshSpec{} }, func(l LastGood) map[ObjectKey]Kept[*networkingv1.VirtualMeshSpec] { return l.VirtualMeshes }),
	keptKind(KindVirtualDestination, func() *networkingv1.VirtualDestinationSpec { return &networkingv1.VirtualDestinationSpec{} }, func(l LastGood) map[ObjectKey]Kept[*networkingv1.VirtualDestinationSpec] {
		return l.VirtualDestinations
	}),
	keptKind(KindSettings, func() *settingsv1.SettingsSpec { return &settingsv1.SettingsSpec{} }, func(l LastGood) map[ObjectKey]Kept[*settingsv1.SettingsSpec] { return l.Settings }),
	keptKind(KindWasmDeploymentPolicy, func() *networkingv1.WasmDeploymentPolicySpec { return &networkingv1.WasmDeploymentPolicySpec{} }, func(l LastGood) map[ObjectKey]Kept[*networkingv1.WasmDeploymentPolicySpec] {
		return l.Wasm
	}),
	keptKind(KindAccessLogPolicy, func() *observabilityv1.AccessLogPolicySpec { return &observabilityv1.AccessLogPolicySpec{} }, func(l LastGood) map[ObjectKey]Kept[*observabilityv1.AccessLogPolicySpec] {
		return l.AccessLogs
	}),
}

// Versions lists every last valid version of l, by kind and key.
func (l LastGood) Versions() []KeptVersion {
	var out []KeptVersion
	for _, k := range lastGoodKinds {
		vs := k.list(l)
		slices.SortFunc(vs, func(a, b KeptVersion) int { return a.Key.compare(b.Key) })
		out = append(out, vs...)
	}
	return out
}

// Each calls fn with every last valid version of l, in no order, without
// building a list: translation's caller does this after every translation.
func (l LastGood) Each(fn func(KeptVersion)) {
	for _, k := range lastGoodKinds {
		k.each(l, fn)
	}
}

// NewSpec returns an empty spec of a kind that has last valid versions, for
// a store to decode one into.
func NewSpec(kind string) (proto.Message, bool) {
	for _, k := range lastGoodKinds {
		if k.kind == kind {
			return k.newSpec(), true
		}
	}
	return nil, false
}

// LastGoodOf builds a LastGood from versions a store held. A version
// without a spec (a resource that was never valid) is left out. A version
// of an unknown kind, or whose spec is not that kind's, is returned as an
// error and left out.
func LastGoodOf(versions []KeptVersion) (LastGood, error) {
	l := newLastGood()
	var errs []error
	for _, v := range versions {
		i := slices.IndexFunc(lastGoodKinds, func(k lastGoodKind) bool { return k.kind == v.Kind })
		if i >= 0 && v.Spec == nil {
			continue
		}
		if i < 0 || v.Spec == nil || !lastGoodKinds[i].put(l, v) {
			errs = append(errs, fmt.Errorf("last valid version of %s %s: unknown kind or wrong spec", v.Kind, v.Key))
		}
	}
	return l, errors.Join(errs...)
}

// Clone returns a LastGood with copies of l's maps, which share the specs.
func (l LastGood) Clone() LastGood {
	out, _ := LastGoodOf(l.Versions())
	return out
}
