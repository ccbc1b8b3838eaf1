package domain

import (
	"fmt"

	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
)

// LastGood remembers, per policy (cluster, namespace and name), the last
// spec that was translated and ACCEPTED. When an edit makes a policy fail
// validation, translation goes on with that spec instead, so that an
// invalid edit never removes working config (DESIGN.md section 7). The
// policy's status still says INVALID, with the errors, and sets
// lastKnownGood.
//
// Translation does not modify a LastGood it is given: it returns a new one,
// which holds only the policies that still exist. A deleted policy loses
// its last valid spec with its outputs.
type LastGood struct {
	Traffic map[ObjectKey]LastGoodTraffic
	Access  map[ObjectKey]LastGoodAccess
}

// LastGoodTraffic is the last valid version of a TrafficPolicy.
type LastGoodTraffic struct {
	Generation int64
	Spec       *networkingv1.TrafficPolicySpec
}

// LastGoodAccess is the last valid version of an AccessPolicy.
type LastGoodAccess struct {
	Generation int64
	Spec       *networkingv1.AccessPolicySpec
}

// lastGoodMessage is appended to the errors of a policy kept in force by
// its last valid version.
func lastGoodMessage(generation int64) string {
	return fmt.Sprintf("the last valid version (generation %d) stays in force until the errors are fixed", generation)
}
