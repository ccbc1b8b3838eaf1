package kube

import (
	"github.com/meshplane/meshplane/libs/kube/meshcrs"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// userResource is one Meshplane CRD that the agent reads into the input
// snapshot. The decoding is shared with ingest, which reads the management
// cluster's resources the same way (libs/kube/meshcrs).
type userResource struct {
	gvr  schema.GroupVersionResource
	kind meshcrs.Kind
}

var userResources = func() []userResource {
	var out []userResource
	for _, k := range meshcrs.Kinds() {
		out = append(out, userResource{gvr: k.GVR, kind: k})
	}
	return out
}()

// decodeUserResource adds u to r. The error names the resource and, through
// protojson, the offending field; a resource that does not decode is added
// all the same, with the error as its decode error (meshcrs.Kind.Decode).
func decodeUserResource(r *domain.UserResources, ur userResource, u *unstructured.Unstructured, cluster string) error {
	var got meshcrs.Resources
	err := ur.kind.Decode(&got, u, cluster)
	// A resource that does not decode is added with its decode error.
	r.VirtualMeshes = append(r.VirtualMeshes, got.VirtualMeshes...)
	r.TrafficPolicies = append(r.TrafficPolicies, got.TrafficPolicies...)
	r.AccessPolicies = append(r.AccessPolicies, got.AccessPolicies...)
	r.VirtualDestinations = append(r.VirtualDestinations, got.VirtualDestinations...)
	r.WasmDeployments = append(r.WasmDeployments, got.WasmDeployments...)
	r.AccessLogPolicies = append(r.AccessLogPolicies, got.AccessLogPolicies...)
	r.Settings = append(r.Settings, got.Settings...)
	return err
}
