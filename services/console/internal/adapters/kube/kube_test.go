package kube_test

import (
	"context"
	"testing"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/services/console/internal/adapters/kube"
	"github.com/meshplane/meshplane/services/console/internal/domain"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// viewerRules are the rules of the meshplane-console-viewer ClusterRole
// the chart grants: every view of the console.
var viewerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{domain.GroupMulticluster}, Resources: []string{"kubernetesclusters", "kubernetesclusters/output", "kubernetesclusters/accesslogs"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{domain.GroupDiscovery}, Resources: []string{"destinations", "workloads", "meshes"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{domain.GroupNetworking}, Resources: []string{"trafficpolicies", "accesspolicies", "virtualmeshes", "virtualdestinations", "wasmdeploymentpolicies"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{domain.GroupObservability}, Resources: []string{"accesslogpolicies"}, Verbs: []string{"get", "list"}},
}

func TestReviewerAgainstAPIServer(t *testing.T) {
	kc := kubetest.Start(t, kubetest.Options{SkipIstioCRDs: true})
	ctx := context.Background()
	cs := kc.Clientset()
	r := kube.NewReviewer(cs)

	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("ops").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "alice"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("ops").CreateToken(ctx, "alice", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	user, ok, err := r.Authenticate(ctx, tr.Status.Token)
	if err != nil || !ok {
		t.Fatalf("service-account token: ok=%v err=%v, want admitted", ok, err)
	}
	if user.Username != "system:serviceaccount:ops:alice" || user.UID == "" {
		t.Errorf("user = %+v", user)
	}
	if _, ok, err := r.Authenticate(ctx, "garbage.token.value"); ok || err != nil {
		t.Errorf("garbage token: ok=%v err=%v, want refused without error", ok, err)
	}

	views := []domain.Attributes{domain.OverviewAttributes(), domain.GraphAttributes(), domain.OutputAttributes("east"), domain.AccessLogAttributes("")}
	for _, a := range views {
		if ok, err := r.Allowed(ctx, user, a); err != nil || ok {
			t.Errorf("%s before any binding: allowed=%v err=%v, want denied", a, ok, err)
		}
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "meshplane-console-viewer"}, Rules: viewerRules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-console"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "meshplane-console-viewer"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "alice", Namespace: "ops"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, a := range views {
		if ok, err := r.Allowed(ctx, user, a); err != nil || !ok {
			t.Errorf("%s with the viewer role: allowed=%v err=%v, want allowed", a, ok, err)
		}
	}
	bob := domain.User{Username: "bob"}
	if ok, err := r.Allowed(ctx, bob, domain.OutputAttributes("east")); err != nil || ok {
		t.Errorf("bob without a binding: allowed=%v err=%v, want denied", ok, err)
	}
	// The role reads; it does not write.
	if ok, _ := r.Allowed(ctx, user, domain.Attributes{Verb: "create", Group: domain.GroupNetworking, Resource: "trafficpolicies", Namespace: "default"}); ok {
		t.Error("the viewer role allows creating TrafficPolicies")
	}
}
