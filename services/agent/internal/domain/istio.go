package domain

import (
	"cmp"
	"slices"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// Kinds of the Istio objects discovery reports when users own them.
const (
	KindVirtualService  = "VirtualService"
	KindDestinationRule = "DestinationRule"
)

// IstioObject is the part of an Istio VirtualService or DestinationRule
// that conflict detection needs.
type IstioObject struct {
	Kind      string
	Namespace string
	Name      string
	// ManagedBy is the value of the meshplane.dev/managed-by label, "" when
	// the object has none.
	ManagedBy string
	// Hosts are spec.hosts of a VirtualService, spec.host of a
	// DestinationRule, as written.
	Hosts    []string
	ExportTo []string
}

// userIstioObjects lists the Istio objects that this install did not
// write, sorted by kind, namespace and name. Every namespace counts, in
// scope or not: a user's object affects clients wherever it is exported.
func userIstioObjects(install string, objs []IstioObject) []*snapshotv1.UserIstioObject {
	install = cmp.Or(install, snapshots.DefaultInstall)
	var out []*snapshotv1.UserIstioObject
	for _, o := range objs {
		if o.ManagedBy == install || o.Name == "" || (o.Kind != KindVirtualService && o.Kind != KindDestinationRule) {
			continue
		}
		out = append(out, &snapshotv1.UserIstioObject{
			Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
			Hosts: slices.Clone(o.Hosts), ExportTo: slices.Clone(o.ExportTo),
		})
	}
	return out
}
