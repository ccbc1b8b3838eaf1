// Package domain is the console's model: the views and the Kubernetes
// permission each needs, sessions, the overview's problems, the graph, and
// output snapshots as YAML with their recent versions. It does no I/O.
package domain

import (
	"fmt"
	"strings"
)

// View is a page of the console, named as WhoAmI lists it.
type View string

// The views, in the order WhoAmI lists them.
const (
	ViewOverview   View = "overview"
	ViewGraph      View = "graph"
	ViewPolicies   View = "policies"
	ViewDescribe   View = "describe"
	ViewOutput     View = "output"
	ViewAccessLogs View = "accesslogs"
)

// Views are all views in WhoAmI's order.
var Views = []View{ViewOverview, ViewGraph, ViewPolicies, ViewDescribe, ViewOutput, ViewAccessLogs}

// Attributes are a SubjectAccessReview's resource attributes: what a user
// must be allowed to do in the management cluster to see a view.
type Attributes struct {
	Verb        string
	Group       string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
}

// String names the verb and resource for a denial message:
// "list trafficpolicies.networking.meshplane.dev",
// "get kubernetesclusters.multicluster.meshplane.dev/output east".
func (a Attributes) String() string {
	var b strings.Builder
	b.WriteString(a.Verb + " " + a.Resource + "." + a.Group)
	if a.Subresource != "" {
		b.WriteString("/" + a.Subresource)
	}
	if a.Name != "" {
		b.WriteString(" " + a.Name)
	}
	if a.Namespace != "" {
		b.WriteString(" in namespace " + a.Namespace)
	}
	return b.String()
}

// API groups of the resources the views stand for.
const (
	GroupMulticluster  = "multicluster.meshplane.dev"
	GroupDiscovery     = "discovery.meshplane.dev"
	GroupNetworking    = "networking.meshplane.dev"
	GroupObservability = "observability.meshplane.dev"
)

// PolicyKind is a kind of user policy the Policies page lists.
type PolicyKind struct {
	Kind, Group, Resource string
}

// PolicyKinds are the policy kinds the console lists, in page order.
var PolicyKinds = []PolicyKind{
	{"TrafficPolicy", GroupNetworking, "trafficpolicies"},
	{"AccessPolicy", GroupNetworking, "accesspolicies"},
	{"VirtualMesh", GroupNetworking, "virtualmeshes"},
	{"VirtualDestination", GroupNetworking, "virtualdestinations"},
	{"WasmDeploymentPolicy", GroupNetworking, "wasmdeploymentpolicies"},
	{"AccessLogPolicy", GroupObservability, "accesslogpolicies"},
}

// discoveryKinds are the discovered kinds Describe shows, by the name the
// request uses.
var discoveryKinds = map[string]PolicyKind{
	"destination": {"Destination", GroupDiscovery, "destinations"},
	"workload":    {"Workload", GroupDiscovery, "workloads"},
	"mesh":        {"Mesh", GroupDiscovery, "meshes"},
}

// PolicyKindOf finds a policy kind by its Kind ("TrafficPolicy").
func PolicyKindOf(kind string) (PolicyKind, bool) {
	for _, k := range PolicyKinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return PolicyKind{}, false
}

// DescribeKind resolves Describe's kind: "destination", "workload", "mesh"
// or a policy kind.
func DescribeKind(kind string) (PolicyKind, error) {
	if k, ok := discoveryKinds[strings.ToLower(kind)]; ok {
		return k, nil
	}
	if k, ok := PolicyKindOf(kind); ok {
		return k, nil
	}
	return PolicyKind{}, fmt.Errorf("kind %q is not one Describe shows (destination, workload, mesh or a policy kind)", kind)
}

// OverviewAttributes may the user see the overview.
func OverviewAttributes() Attributes {
	return Attributes{Verb: "list", Group: GroupMulticluster, Resource: "kubernetesclusters"}
}

// GraphAttributes may the user see the graph.
func GraphAttributes() Attributes {
	return Attributes{Verb: "list", Group: GroupDiscovery, Resource: "destinations"}
}

// PolicyAttributes may the user list policies of kind in namespace (empty:
// all namespaces).
func PolicyAttributes(k PolicyKind, namespace string) Attributes {
	return Attributes{Verb: "list", Group: k.Group, Resource: k.Resource, Namespace: namespace}
}

// DescribeAttributes may the user describe objects of kind in namespace.
func DescribeAttributes(k PolicyKind, namespace string) Attributes {
	return Attributes{Verb: "get", Group: k.Group, Resource: k.Resource, Namespace: namespace}
}

// OutputAttributes may the user read cluster's output snapshot.
func OutputAttributes(cluster string) Attributes {
	return Attributes{Verb: "get", Group: GroupMulticluster, Resource: "kubernetesclusters", Subresource: "output", Name: cluster}
}

// AccessLogAttributes may the user tail cluster's access logs (empty: all
// clusters).
func AccessLogAttributes(cluster string) Attributes {
	return Attributes{Verb: "get", Group: GroupMulticluster, Resource: "kubernetesclusters", Subresource: "accesslogs", Name: cluster}
}

// ViewAttributes are the checks WhoAmI makes for a view, without names: a
// view is open when any of them is allowed.
func ViewAttributes(v View) []Attributes {
	switch v {
	case ViewOverview:
		return []Attributes{OverviewAttributes()}
	case ViewGraph:
		return []Attributes{GraphAttributes()}
	case ViewPolicies:
		out := make([]Attributes, 0, len(PolicyKinds))
		for _, k := range PolicyKinds {
			out = append(out, PolicyAttributes(k, ""))
		}
		return out
	case ViewDescribe:
		out := []Attributes{}
		for _, n := range []string{"destination", "workload", "mesh"} {
			out = append(out, DescribeAttributes(discoveryKinds[n], ""))
		}
		return out
	case ViewOutput:
		return []Attributes{OutputAttributes("")}
	case ViewAccessLogs:
		return []Attributes{AccessLogAttributes("")}
	}
	return nil
}
