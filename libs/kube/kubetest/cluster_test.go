package kubetest_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	networkingv1 "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/meshplane/meshplane/libs/kube"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
)

var (
	destinationRules = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}
	widgets          = schema.GroupVersionResource{Group: "test.meshplane.io", Version: "v1", Resource: "widgets"}
)

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.meshplane.io
spec:
  group: test.meshplane.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`

// TestClusters starts two clusters once and checks the harness against them
// in subtests: starting a cluster is the slow part.
func TestClusters(t *testing.T) {
	start := time.Now()
	clusters := kubetest.StartMany(t,
		kubetest.Options{Name: "east", CRDs: [][]byte{[]byte(widgetCRD)}},
		kubetest.Options{Name: "west", Audit: true},
	)
	east, west := clusters[0], clusters[1]
	t.Logf("two clusters ready in %v: %s at %s, %s at %s", time.Since(start).Round(time.Millisecond),
		east.Name, east.Host(), west.Name, west.Host())

	t.Run("Independent", func(t *testing.T) {
		ctx := t.Context()
		if east.Host() == west.Host() || east.EtcdURL() == west.EtcdURL() {
			t.Fatalf("clusters share an endpoint: %s %s / %s %s", east.Host(), east.EtcdURL(), west.Host(), west.EtcdURL())
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
		if _, err := east.Clientset().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "cart", Namespace: "shop"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
		}
		created, err := east.Clientset().CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Spec.ClusterIP == "" {
			t.Errorf("service got no cluster IP")
		}
		if _, err := east.Clientset().CoreV1().Services("shop").Get(ctx, "cart", metav1.GetOptions{}); err != nil {
			t.Fatalf("east: %v", err)
		}
		if _, err := west.Clientset().CoreV1().Namespaces().Get(ctx, "shop", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("west: namespace shop: got %v, want NotFound", err)
		}
		if _, err := west.Clientset().CoreV1().Services("shop").Get(ctx, "cart", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("west: service shop/cart: got %v, want NotFound", err)
		}
	})

	t.Run("AuditLog", func(t *testing.T) {
		ctx := t.Context()
		if _, err := east.AuditEvents(); err == nil {
			t.Errorf("east has no audit log, but AuditEvents did not say so")
		}
		cfg := west.RESTConfig()
		cfg.UserAgent = "audit-check/1 (replica r2; term 7)"
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited", Namespace: "default"}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "audited", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		events, err := west.AuditEvents()
		if err != nil {
			t.Fatal(err)
		}
		var found int
		for _, e := range events {
			if e.Verb == "get" {
				t.Errorf("a read was logged: %+v", e)
			}
			if e.UserAgent != cfg.UserAgent {
				continue
			}
			found++
			if e.Verb != "create" || e.ObjectRef.Resource != "configmaps" || e.ObjectRef.Name != "audited" ||
				e.User.Username != kubetest.AdminUser || e.ResponseStatus.Code != 201 ||
				e.RequestReceived.IsZero() || e.Completed.Before(e.RequestReceived) {
				t.Errorf("audit event %+v, want the create of configmap default/audited by %s, answered 201", e, kubetest.AdminUser)
			}
		}
		if found != 1 {
			t.Errorf("%d audit events carry the user agent %q, want 1 (the create); log %s", found, cfg.UserAgent, west.AuditLog())
		}
	})

	t.Run("IstioCRDs", func(t *testing.T) {
		ctx := t.Context()
		for _, c := range clusters {
			crd, err := c.Dynamic().Resource(kubetest.CRDResource).Get(ctx, "destinationrules.networking.istio.io", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			if !established(crd) {
				t.Errorf("%s: destinationrules.networking.istio.io is not Established", c.Name)
			}
			versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
			served := false
			for _, v := range versions {
				if m, _ := v.(map[string]any); m["name"] == "v1" && m["served"] == true {
					served = true
				}
			}
			if !served {
				t.Errorf("%s: destinationrules.networking.istio.io does not serve v1", c.Name)
			}
		}
		dr := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "networking.istio.io/v1",
			"kind":       "DestinationRule",
			"metadata":   map[string]any{"name": "reviews", "namespace": "default"},
			"spec": map[string]any{
				"host": "reviews.default.svc.cluster.local",
				"trafficPolicy": map[string]any{
					"connectionPool": map[string]any{"tcp": map[string]any{"maxConnections": int64(100)}},
				},
				"subsets": []any{map[string]any{"name": "v1", "labels": map[string]any{"version": "v1"}}},
			},
		}}
		if _, err := east.Dynamic().Resource(destinationRules).Namespace("default").Create(ctx, dr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The typed Istio client reads it back: istio.io/client-go
		// v1.31.1 works against this API server with client-go v0.37.
		got, err := east.Istio().NetworkingV1().DestinationRules("default").Get(ctx, "reviews", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.GetHost() != "reviews.default.svc.cluster.local" || got.Spec.GetTrafficPolicy().GetConnectionPool().GetTcp().GetMaxConnections() != 100 {
			t.Errorf("typed DestinationRule: %v", &got.Spec)
		}
		// A schema violation is rejected: the CRD carries the real
		// OpenAPI schema.
		bad := &networkingv1.DestinationRule{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"}}
		if _, err := east.Istio().NetworkingV1().DestinationRules("default").Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("DestinationRule without host: got %v, want Invalid", err)
		}
		if _, err := west.Dynamic().Resource(destinationRules).Namespace("default").Get(ctx, "reviews", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("west: DestinationRule: got %v, want NotFound", err)
		}
	})

	t.Run("MeshplaneCRDs", func(t *testing.T) {
		ctx := t.Context()
		// The generated schemas are accepted by a real API server, they
		// admit a Gloo-style manifest, and the oneof rule rejects a
		// matcher that sets two path specifiers.
		valid := `apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: reviews-retries, namespace: default}
spec:
  destinationSelector:
  - kubeServiceRefs:
      services: [{name: reviews, namespace: bookinfo, cluster: east}]
  httpRequestMatchers:
  - prefix: /api
    headers: [{name: x-canary, value: "true"}]
  policy:
    requestTimeout: 2s
    retries: {attempts: 3, perTryTimeout: 0.5s}
    mtls: {istio: {tlsMode: ISTIO_MUTUAL}}
`
		if err := east.ApplyYAML(ctx, []byte(valid)); err != nil {
			t.Fatalf("a valid TrafficPolicy was refused: %v", err)
		}
		for name, doc := range map[string]string{
			"two path specifiers": `apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: bad-oneof, namespace: default}
spec:
  httpRequestMatchers: [{prefix: /a, exact: /b}]
`,
			"unknown enum value": `apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: bad-enum, namespace: default}
spec:
  policy: {mtls: {istio: {tlsMode: STRICTEST}}}
`,
			"bad duration": `apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: bad-duration, namespace: default}
spec:
  policy: {requestTimeout: soon}
`,
		} {
			if err := east.ApplyYAML(ctx, []byte(doc)); err == nil {
				t.Errorf("%s: the API server accepted an invalid TrafficPolicy", name)
			}
		}
	})

	t.Run("ExtraCRDsAndApplyYAML", func(t *testing.T) {
		ctx := t.Context()
		yaml := []byte(`
# a comment-only document first
---
apiVersion: v1
kind: Namespace
metadata:
  name: apply-test
---
apiVersion: test.meshplane.io/v1
kind: Widget
metadata:
  name: w1
  namespace: apply-test
spec:
  size: 3
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: no-namespace-given
data:
  k: v
`)
		if err := east.ApplyYAML(ctx, yaml); err != nil {
			t.Fatal(err)
		}
		w, err := east.Dynamic().Resource(widgets).Namespace("apply-test").Get(ctx, "w1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size"); size != 3 {
			t.Errorf("widget size %d, want 3", size)
		}
		if mf := w.GetManagedFields(); len(mf) == 0 || mf[0].Manager != kubetest.FieldManager || mf[0].Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("managed fields %+v, want an Apply by %s", mf, kubetest.FieldManager)
		}
		if _, err := east.Clientset().CoreV1().ConfigMaps("default").Get(ctx, "no-namespace-given", metav1.GetOptions{}); err != nil {
			t.Errorf("ConfigMap without namespace: %v", err)
		}
		// Applying again is a no-op, not a conflict.
		if err := east.ApplyYAML(ctx, yaml); err != nil {
			t.Fatalf("second apply: %v", err)
		}
		// West was started without the extra CRD.
		if _, err := west.Dynamic().Resource(kubetest.CRDResource).Get(ctx, "widgets.test.meshplane.io", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("west: widget CRD: got %v, want NotFound", err)
		}
	})

	t.Run("PodsWithoutNodes", func(t *testing.T) {
		ctx := t.Context()
		cs := west.Clientset()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.invalid/web:1"}}},
		}
		pod, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod (ServiceAccount admission must be off): %v", err)
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = "10.1.0.7"
		pod.Status.PodIPs = []corev1.PodIP{{IP: "10.1.0.7"}}
		if _, err := cs.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		kubetest.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return p.Status.Phase == corev1.PodRunning && p.Status.PodIP == "10.1.0.7", nil
		}, "pod status")
	})

	t.Run("ConfigFor", func(t *testing.T) {
		ctx := t.Context()
		cfg, err := east.ConfigFor("alice", "dev")
		if err != nil {
			t.Fatal(err)
		}
		alice := kubernetes.NewForConfigOrDie(cfg)
		if _, err := alice.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("alice before RBAC: got %v, want Forbidden", err)
		}
		admin := east.Clientset()
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "cm-reader", Namespace: "default"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
		}
		if _, err := admin.RbacV1().Roles("default").Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "dev-cm-reader", Namespace: "default"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "cm-reader"},
			Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "dev"}},
		}
		if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The RBAC authorizer reads through an informer: wait for it.
		kubetest.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, error) {
			_, err := alice.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			if apierrors.IsForbidden(err) {
				return false, nil
			}
			return err == nil, err
		}, "alice lists configmaps after the RoleBinding")
		if _, err := alice.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("alice secrets: got %v, want Forbidden", err)
		}
		// The user is the certificate's CN.
		if _, err := west.ConfigFor("bob"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Kubeconfig", func(t *testing.T) {
		cfg, err := kube.RESTConfigFromKubeconfig(east.Kubeconfig(), "")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Host != east.Host() {
			t.Errorf("kubeconfig host %s, want %s", cfg.Host, east.Host())
		}
		nss, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nss.Items) == 0 {
			t.Errorf("no namespaces through the kubeconfig")
		}
		if _, err := kube.RESTConfigFromKubeconfig(east.Kubeconfig(), "no-such-context"); err == nil {
			t.Errorf("unknown context: no error")
		}
	})

	t.Run("Kubectl", func(t *testing.T) {
		kubectl, err := kubetest.KubectlPath()
		if err != nil {
			t.Fatalf("%v", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", east.Kubeconfig(), "get", "ns", "-o", "name").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl get ns: %v\n%s", err, out)
		}
		for _, want := range []string{"namespace/default", "namespace/shop", "namespace/kube-system"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("kubectl get ns: no %s in:\n%s", want, out)
			}
		}
		out, err = exec.CommandContext(ctx, kubectl, "--kubeconfig", west.Kubeconfig(), "get", "destinationrules.networking.istio.io", "-A", "-o", "name").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl get destinationrules: %v\n%s", err, out)
		}
		if strings.TrimSpace(string(out)) != "" {
			t.Errorf("west has DestinationRules: %s", out)
		}
		out, err = exec.CommandContext(ctx, kubectl, "--kubeconfig", east.Kubeconfig(), "version", "-o", "json").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl version: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), kubetest.KubernetesVersion) {
			t.Errorf("kubectl version: want %s in:\n%s", kubetest.KubernetesVersion, out)
		}
	})

	t.Run("StopIsIdempotent", func(t *testing.T) {
		// Stop west early and check that it is gone; t.Cleanup stops it
		// again.
		host := west.Host()
		west.Stop()
		west.Stop()
		kubetest.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, error) {
			_, err := west.Clientset().Discovery().ServerVersion()
			return err != nil, nil
		}, "west still answers at %s after Stop", host)
		if _, err := east.Clientset().Discovery().ServerVersion(); err != nil {
			t.Errorf("east after stopping west: %v", err)
		}
	})
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
