// Package meshview holds the pure reading of the management plane's state
// that both meshctl and the console show: a user resource's status as
// translation wrote it, the output objects a parent produced, and the
// per-cluster health check. It imports only the generated types, so a
// command line and a service can share it without sharing their I/O.
package meshview

import (
	"cmp"
	"encoding/json"
	"slices"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// Status is the part of a user resource's status (ResourceStatus.status,
// JSON) that the views read.
type Status struct {
	State        string                 `json:"state"`
	Errors       []string               `json:"errors"`
	LastGood     bool                   `json:"lastKnownGood"`
	Destinations map[string]TargetState `json:"destinations"`
	Meshes       map[string]TargetState `json:"meshes"`
	Workloads    []Ref                  `json:"workloads"`
}

// TargetState is a policy's outcome for one destination or mesh.
type TargetState struct {
	Order    uint32   `json:"acceptanceOrder"`
	State    string   `json:"state"`
	Errors   []string `json:"errors"`
	Warnings []string `json:"warnings"`
}

// Ref names an object by name, namespace and cluster.
type Ref struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Cluster   string `json:"cluster"`
}

// ParseStatus reads rs's JSON status. A status translation has not written
// yet, or cannot be read, is PENDING: the views show it as not decided
// rather than failing.
func ParseStatus(rs *snapshotv1.ResourceStatus) Status {
	var st Status
	_ = json.Unmarshal(rs.GetStatus(), &st)
	st.State = cmp.Or(st.State, "PENDING")
	return st
}

// Kinds of the parents named in the meshplane.dev/parents annotation.
const (
	ParentDestination = "discovery.meshplane.dev/v1, Kind=Destination"
	ParentMesh        = "discovery.meshplane.dev/v1, Kind=Mesh"
)

// ParentKey is the annotation's key for a parent of apiVersion and kind.
func ParentKey(apiVersion, kind string) string { return apiVersion + ", Kind=" + kind }

// Parents reads an output object's parents annotation: parent kind (as
// ParentKey) to the parents of that kind. An object without a readable
// annotation has none.
func Parents(o *snapshotv1.Object) map[string][]Ref {
	raw, ok := o.GetAnnotations()[snapshots.AnnotationParents]
	if !ok {
		return nil
	}
	var parents map[string][]Ref
	if json.Unmarshal([]byte(raw), &parents) != nil {
		return nil
	}
	return parents
}

// OutputObject is one object of a cluster's output, by name.
type OutputObject struct {
	Cluster    string `json:"cluster"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// ObjectsWithParent lists the objects of every cluster's output (in the
// order of clusters) that name the parent of kind (as in the annotation)
// with name, namespace and cluster.
func ObjectsWithParent(clusters []string, outputs map[string]*snapshotv1.OutputSnapshot, kind string, parent Ref) []OutputObject {
	var out []OutputObject
	for _, cl := range clusters {
		for _, o := range outputs[cl].GetObjects() {
			if slices.Contains(Parents(o)[kind], parent) {
				out = append(out, OutputObject{Cluster: cl, APIVersion: o.GetApiVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()})
			}
		}
	}
	return out
}
