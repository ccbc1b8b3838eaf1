package charts

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/platform/platformtest"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// access is one request the agent's ServiceAccount makes (or must not be
// able to make). Empty namespace means cluster-wide.
type access struct {
	verb, group, resource, subresource, namespace string
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	where := "cluster-wide"
	if a.namespace != "" {
		where = "in " + a.namespace
	}
	return fmt.Sprintf("%s %s %s", a.verb, r, where)
}

// agentNeeds is every verb the agent's code uses: the discovery informers
// (list and watch, cluster-wide), the Meshplane resources and their status,
// and server-side apply plus garbage collection of the Istio kinds.
func agentNeeds() []access {
	var out []access
	for _, r := range []struct{ group, resource string }{
		{"", "pods"}, {"", "services"}, {"", "nodes"}, {"", "namespaces"}, {"", "configmaps"},
		{"discovery.k8s.io", "endpointslices"},
		{"apps", "replicasets"}, {"apps", "deployments"}, {"apps", "statefulsets"}, {"apps", "daemonsets"},
		{"networking.meshplane.dev", "virtualmeshes"}, {"networking.meshplane.dev", "trafficpolicies"},
		{"networking.meshplane.dev", "accesspolicies"}, {"networking.meshplane.dev", "virtualdestinations"},
		{"networking.meshplane.dev", "wasmdeploymentpolicies"}, {"observability.meshplane.dev", "accesslogpolicies"},
		{"settings.meshplane.dev", "settings"},
		{"discovery.meshplane.dev", "meshes"}, {"discovery.meshplane.dev", "workloads"}, {"discovery.meshplane.dev", "destinations"},
	} {
		for _, v := range []string{"get", "list", "watch"} {
			out = append(out, access{verb: v, group: r.group, resource: r.resource})
		}
	}
	for _, r := range []struct{ group, resource string }{
		{"networking.meshplane.dev", "trafficpolicies"}, {"networking.meshplane.dev", "accesspolicies"},
		{"networking.meshplane.dev", "virtualmeshes"}, {"networking.meshplane.dev", "virtualdestinations"},
		{"networking.meshplane.dev", "wasmdeploymentpolicies"}, {"observability.meshplane.dev", "accesslogpolicies"},
		{"settings.meshplane.dev", "settings"},
	} {
		for _, v := range []string{"update", "patch"} {
			out = append(out, access{verb: v, group: r.group, resource: r.resource, subresource: "status", namespace: "bookinfo"})
		}
	}
	for _, r := range []struct{ group, resource string }{
		{"networking.istio.io", "destinationrules"}, {"networking.istio.io", "virtualservices"},
		{"networking.istio.io", "serviceentries"}, {"networking.istio.io", "gateways"},
		{"security.istio.io", "authorizationpolicies"}, {"security.istio.io", "peerauthentications"},
		{"extensions.istio.io", "wasmplugins"},
	} {
		for _, v := range []string{"create", "patch", "update", "delete", "get"} {
			out = append(out, access{verb: v, group: r.group, resource: r.resource, namespace: "bookinfo"})
		}
		out = append(out, access{verb: "list", group: r.group, resource: r.resource}, access{verb: "watch", group: r.group, resource: r.resource})
	}
	return out
}

// agentMustNot lists what the agent must not be able to do.
var agentMustNot = []access{
	{verb: "get", resource: "secrets"},
	{verb: "list", resource: "secrets"},
	{verb: "watch", resource: "secrets"},
	{verb: "get", resource: "secrets", namespace: "istio-system"},
	{verb: "list", resource: "secrets", namespace: agentNamespace},
	{verb: "create", resource: "pods", namespace: "bookinfo"},
	{verb: "delete", resource: "pods", namespace: "bookinfo"},
	{verb: "delete", resource: "services", namespace: "bookinfo"},
	{verb: "update", resource: "services", namespace: "bookinfo"},
	{verb: "patch", resource: "configmaps", namespace: "bookinfo"},
	{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: agentNamespace},
	{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
	{verb: "update", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
	{verb: "bind", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
	{verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
	{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
	{verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", namespace: agentNamespace},
	{verb: "update", group: "networking.meshplane.dev", resource: "trafficpolicies", namespace: "bookinfo"},
	{verb: "delete", group: "networking.meshplane.dev", resource: "trafficpolicies", namespace: "bookinfo"},
	{verb: "create", group: "apiextensions.k8s.io", resource: "customresourcedefinitions"},
	{verb: "create", group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations"},
	{verb: "patch", group: "apps", resource: "deployments", namespace: "bookinfo"},
	{verb: "create", resource: "pods", subresource: "exec", namespace: "bookinfo"},
	{verb: "impersonate", resource: "serviceaccounts"},
	{verb: "get", resource: "nodes", subresource: "proxy"},
}

// TestAgentRBAC creates the agent chart's ServiceAccount, ClusterRole and
// ClusterRoleBinding for real, then asks the API server (SubjectAccessReview)
// whether the ServiceAccount may do what the agent does, and may not do the
// rest.
func TestAgentRBAC(t *testing.T) {
	c := apiServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createNamespace(ctx, t, c.Clientset().CoreV1().Namespaces(), agentNamespace)

	objs, err := template(t, "agent", "rbac", agentNamespace, agentRelayValues)
	if err != nil {
		t.Fatal(err)
	}
	var sa string
	var docs []byte
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if o.GetKind() == "ServiceAccount" {
				sa = o.GetName()
			}
			checkNoWildcards(t, o)
			b, err := yaml.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(append(docs, "---\n"...), b...)
		}
	}
	if sa == "" {
		t.Fatal("the agent chart renders no ServiceAccount")
	}
	if err := c.ApplyYAML(ctx, docs); err != nil {
		t.Fatalf("apply the agent's RBAC: %v", err)
	}

	user := "system:serviceaccount:" + agentNamespace + ":" + sa
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + agentNamespace, "system:authenticated"}
	sars := c.Clientset().AuthorizationV1().SubjectAccessReviews()
	allowed := func(a access) bool {
		t.Helper()
		res, err := sars.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace,
			},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview %s: %v", a, err)
		}
		return res.Status.Allowed
	}
	rbacInEffect(t, "the agent's RBAC to take effect", func() bool { return allowed(agentNeeds()[0]) })
	for _, a := range agentNeeds() {
		if !allowed(a) {
			t.Errorf("the agent cannot %s", a)
		}
	}
	for _, a := range agentMustNot {
		if allowed(a) {
			t.Errorf("the agent can %s", a)
		}
	}
}

// rbacInEffect waits until granted holds: the API server's authorizer
// follows Roles and bindings through informers, so a SubjectAccessReview
// right after they are created may not see them yet.
func rbacInEffect(t *testing.T, what string, granted func() bool) {
	t.Helper()
	platformtest.Eventually(t, 30*time.Second, what, granted)
}

// checkNoWildcards refuses "*" in any rule: least privilege is spelled out.
func checkNoWildcards(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
	for _, r := range rules {
		rm := r.(map[string]any)
		for _, field := range []string{"apiGroups", "resources", "verbs", "resourceNames"} {
			vals, _, _ := unstructured.NestedStringSlice(rm, field)
			for _, v := range vals {
				if v == "*" {
					t.Errorf("%s %s: a rule has %s \"*\"", o.GetKind(), o.GetName(), field)
				}
			}
		}
	}
}
