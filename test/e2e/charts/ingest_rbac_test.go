package charts

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestIngestRBAC creates the ingest chart's ServiceAccount, ClusterRole and
// binding for real and checks with SubjectAccessReview that ingest may read
// the management cluster's Meshplane resources and write their status, and
// nothing more; with managementCluster.watch off there is no RBAC at all.
func TestIngestRBAC(t *testing.T) {
	c := apiServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns = "meshplane-ingest-rbac"
	createNamespace(ctx, t, c.Clientset().CoreV1().Namespaces(), ns)

	off, err := template(t, "ingest", "off", ns, "managementCluster:\n  watch: false\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range off {
		if k := o.GetKind(); k == "ClusterRole" || k == "ClusterRoleBinding" {
			t.Errorf("managementCluster.watch=false still renders %s %s", k, o.GetName())
		}
	}

	objs, err := template(t, "ingest", "r", ns, "{}\n")
	if err != nil {
		t.Fatal(err)
	}
	var sa string
	var docs []byte
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding":
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
		t.Fatal("the ingest chart renders no ServiceAccount")
	}
	if err := c.ApplyYAML(ctx, docs); err != nil {
		t.Fatalf("apply ingest's RBAC: %v", err)
	}
	user := "system:serviceaccount:" + ns + ":" + sa
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	allowed := func(a access) bool {
		t.Helper()
		res, err := c.Clientset().AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
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
	resources := []struct{ group, resource string }{
		{"networking.meshplane.dev", "virtualmeshes"}, {"networking.meshplane.dev", "trafficpolicies"},
		{"networking.meshplane.dev", "accesspolicies"}, {"networking.meshplane.dev", "virtualdestinations"},
		{"networking.meshplane.dev", "wasmdeploymentpolicies"}, {"observability.meshplane.dev", "accesslogpolicies"},
		{"settings.meshplane.dev", "settings"},
	}
	rbacInEffect(t, "ingest's RBAC to take effect", func() bool {
		return allowed(access{verb: "get", group: resources[0].group, resource: resources[0].resource})
	})
	for _, r := range resources {
		for _, v := range []string{"get", "list", "watch"} {
			if a := (access{verb: v, group: r.group, resource: r.resource}); !allowed(a) {
				t.Errorf("ingest cannot %s", a)
			}
		}
		for _, v := range []string{"update", "patch"} {
			if a := (access{verb: v, group: r.group, resource: r.resource, subresource: "status", namespace: "bookinfo"}); !allowed(a) {
				t.Errorf("ingest cannot %s", a)
			}
		}
		for _, v := range []string{"create", "update", "delete"} {
			if a := (access{verb: v, group: r.group, resource: r.resource, namespace: "bookinfo"}); allowed(a) {
				t.Errorf("ingest can %s", a)
			}
		}
	}
	for _, a := range []access{
		{verb: "get", resource: "secrets", namespace: ns},
		{verb: "list", resource: "pods"},
		{verb: "list", group: "networking.istio.io", resource: "virtualservices"},
		{verb: "list", group: "multicluster.meshplane.dev", resource: "kubernetesclusters"},
	} {
		if allowed(a) {
			t.Errorf("ingest can %s", a)
		}
	}
}
