package domain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

// ObjectKey identifies an object in a cluster.
type ObjectKey struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

func (k ObjectKey) String() string {
	return fmt.Sprintf("%s %s %s/%s", k.APIVersion, k.Kind, k.Namespace, k.Name)
}

// KeyOf returns the key of an output object.
func KeyOf(o *snapshotv1.Object) ObjectKey {
	return ObjectKey{APIVersion: o.GetApiVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
}

// applyOrder puts kinds that others depend on first: a DestinationRule's
// subsets must exist before a VirtualService routes to them, a
// ServiceEntry before the rules for its host.
var applyOrder = map[string]int{
	"PeerAuthentication":  0,
	"ServiceEntry":        1,
	"DestinationRule":     2,
	"Gateway":             3,
	"VirtualService":      4,
	"AuthorizationPolicy": 5,
	"WasmPlugin":          6,
}

func kindRank(kind string) int {
	if r, ok := applyOrder[kind]; ok {
		return r
	}
	return len(applyOrder)
}

// OrderForApply returns the objects in dependency order.
func OrderForApply(objs []*snapshotv1.Object) []*snapshotv1.Object {
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b *snapshotv1.Object) int {
		return cmp.Or(cmp.Compare(kindRank(a.GetKind()), kindRank(b.GetKind())),
			cmpBool(allowsNothing(a), allowsNothing(b)),
			cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	return out
}

// allowsNothing reports an AuthorizationPolicy with an empty spec: Istio's
// deny-by-default policy. It goes after every ALLOW policy, so that turning
// global access on never denies traffic that its allow rules admit, not
// even for a moment.
func allowsNothing(o *snapshotv1.Object) bool {
	if o.GetKind() != "AuthorizationPolicy" {
		return false
	}
	spec := strings.TrimSpace(string(o.GetSpec()))
	return spec == "" || spec == "{}" || spec == "null"
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	default:
		return 1
	}
}

// ObjectID is an object's identity in the API server: the same object is
// served under every version of its group, so the version is left out.
type ObjectID struct {
	Group, Kind, Namespace, Name string
}

// ObjectIDOf returns the identity of the object k names.
func ObjectIDOf(k ObjectKey) ObjectID {
	group, _, ok := strings.Cut(k.APIVersion, "/")
	if !ok {
		group = "" // the core group: "v1"
	}
	return ObjectID{Group: group, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}
}

// Obsolete returns the owned objects that the desired set no longer holds,
// in reverse dependency order for deletion. owned must hold only objects
// that carry this install's and cluster's ownership labels.
//
// Objects are matched without their API version: the cluster lists an
// object under the version it is asked for, which need not be the version
// translation wrote, and the object must not be deleted for that.
func Obsolete(desired []*snapshotv1.Object, owned []ObjectKey) []ObjectKey {
	want := make(map[ObjectID]bool, len(desired))
	for _, o := range desired {
		want[ObjectIDOf(KeyOf(o))] = true
	}
	var out []ObjectKey
	for _, k := range owned {
		if !want[ObjectIDOf(k)] {
			out = append(out, k)
		}
	}
	SortForDelete(out)
	return out
}

// SortForDelete sorts keys in reverse dependency order: what other objects
// depend on goes last.
func SortForDelete(out []ObjectKey) {
	slices.SortStableFunc(out, func(a, b ObjectKey) int {
		return cmp.Or(cmp.Compare(kindRank(b.Kind), kindRank(a.Kind)),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}
