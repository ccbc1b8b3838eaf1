package domain

import (
	"fmt"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
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

// Kept is the last valid version of a resource: its generation and spec.
type Kept[S any] struct {
	Generation int64
	Spec       S
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
func inForce[S any](key ObjectKey, current S, errs []string, kept map[ObjectKey]Kept[S]) (S, *Kept[S]) {
	if len(errs) == 0 {
		return current, nil
	}
	good, ok := kept[key]
	if !ok {
		return current, nil
	}
	return good.Spec, &good
}

// keep records the version of a resource to keep as its last valid one:
// the one held in force when there is one, else the current version when
// it is valid. valid is the resource's verdict after translation.
func keep[S any](into map[ObjectKey]Kept[S], key ObjectKey, held *Kept[S], generation int64, spec S, valid bool) {
	switch {
	case held != nil:
		into[key] = *held
	case valid:
		into[key] = Kept[S]{Generation: generation, Spec: spec}
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
