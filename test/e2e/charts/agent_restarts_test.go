package charts

import (
	"context"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestAgentPodRestartsRBAC applies the agent's RBAC with each podRestarts
// setting and asks the API server who may delete pods where: nobody by
// default, the listed namespaces only, or every namespace when clusterWide
// is set. The agent's flags follow the same setting.
func TestAgentPodRestartsRBAC(t *testing.T) {
	c := apiServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cases := []struct {
		name, values string
		deleteIn     []string // namespaces where delete of pods is allowed
		deleteNotIn  []string
		flag         string // the restart flag the Deployment passes
	}{
		{name: "off", values: "", deleteNotIn: []string{"bookinfo", "istio-system"}, flag: "--restart-pods=false"},
		{name: "namespaces", values: "podRestarts:\n  namespaces: [istio-system, bookinfo]\n",
			deleteIn: []string{"istio-system", "bookinfo"}, deleteNotIn: []string{"kube-system", "default"}, flag: "--restart-namespaces=istio-system,bookinfo"},
		{name: "cluster-wide", values: "podRestarts:\n  clusterWide: true\n  namespaces: [bookinfo]\n",
			deleteIn: []string{"bookinfo", "default", "kube-system"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := "restarts-" + tc.name
			createNamespace(ctx, t, c.Clientset().CoreV1().Namespaces(), ns)
			for _, n := range append(slices.Clone(tc.deleteIn), tc.deleteNotIn...) {
				createNamespace(ctx, t, c.Clientset().CoreV1().Namespaces(), n)
			}
			objs, err := template(t, "agent", "restarts-"+tc.name, ns, agentRelayValues+tc.values)
			if err != nil {
				t.Fatal(err)
			}
			var sa string
			var docs []byte
			var args []string
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
				case "Deployment":
					cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
					for _, cm := range cs {
						a, _, _ := unstructured.NestedStringSlice(cm.(map[string]any), "args")
						args = append(args, a...)
					}
				}
			}
			if err := c.ApplyYAML(ctx, docs); err != nil {
				t.Fatalf("apply the agent's RBAC: %v", err)
			}
			var restartFlags []string
			for _, a := range args {
				if len(a) > 10 && a[:10] == "--restart-" {
					restartFlags = append(restartFlags, a)
				}
			}
			if tc.flag == "" && len(restartFlags) != 0 || tc.flag != "" && !slices.Equal(restartFlags, []string{tc.flag}) {
				t.Errorf("restart flags %v, want %q", restartFlags, tc.flag)
			}

			user := "system:serviceaccount:" + ns + ":" + sa
			allowed := func(verb, namespace string) bool {
				t.Helper()
				res, err := c.Clientset().AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: "pods", Namespace: namespace},
				}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return res.Status.Allowed
			}
			rbacInEffect(t, "the agent's RBAC to take effect", func() bool { return allowed("list", "") })
			for _, n := range tc.deleteIn {
				if !allowed("delete", n) {
					t.Errorf("the agent cannot delete pods in %s", n)
				}
			}
			for _, n := range tc.deleteNotIn {
				if allowed("delete", n) {
					t.Errorf("the agent can delete pods in %s", n)
				}
			}
			for _, n := range append(slices.Clone(tc.deleteIn), tc.deleteNotIn...) {
				if allowed("create", n) || allowed("update", n) {
					t.Errorf("the agent can create or update pods in %s", n)
				}
			}
		})
	}
}
