package kube

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

const waitTimeout = 10 * time.Second

func createNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func createService(t *testing.T, cs kubernetes.Interface, svc *corev1.Service) {
	t.Helper()
	if _, err := cs.CoreV1().Services(svc.Namespace).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service %s/%s: %v", svc.Namespace, svc.Name, err)
	}
}

func simpleService(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// names returns "<namespace>/<name>" of each discovered service.
func names(d domain.Discovered) []string {
	var out []string
	for _, s := range d.Services {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

func startReader(t *testing.T, cs kubernetes.Interface, f NamespaceFilter) *Reader {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	r, err := NewReader(ctx, cs, f, 0)
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, waitTimeout)
	defer wcancel()
	if err := r.WaitForSync(wctx); err != nil {
		t.Fatalf("WaitForSync: %v", err)
	}
	return r
}

// waitChanged waits for change events until, after one, Discover reports
// want: a change that Changed does not signal fails.
func waitChanged(t *testing.T, r *Reader, want []string, what string) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	var got []string
	for {
		select {
		case <-r.Changed():
		case <-deadline.C:
			t.Fatalf("no change event brought %s: discovered %v, want %v", what, got, want)
		}
		d, err := r.Discover()
		if err != nil {
			t.Fatalf("Discover: %v", err)
		}
		if got = names(d); slices.Equal(got, want) {
			return
		}
	}
}

func TestReader(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east"})
	cs := c.Clientset()
	for _, ns := range []string{"bookinfo", "shop", "other"} {
		createNamespace(t, cs, ns)
	}
	appProtocol := "http"
	createService(t, cs, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: "bookinfo", Labels: map[string]string{"app": "reviews", "team": "books"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "reviews"},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 9080, AppProtocol: &appProtocol, TargetPort: intstr.FromInt32(9080)},
				{Name: "grpc", Port: 9090, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("grpc-port")},
			},
		},
	})
	createService(t, cs, simpleService("shop", "details"))
	createService(t, cs, simpleService("other", "ratings"))
	if _, err := cs.CoreV1().Services("default").Get(t.Context(), "kubernetes", metav1.GetOptions{}); err != nil {
		t.Fatalf("the API server's own Service must exist for this test to mean anything: %v", err)
	}

	t.Run("discovers services and leaves out default/kubernetes", func(t *testing.T) {
		r := startReader(t, cs, NamespaceFilter{})
		d, err := r.Discover()
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"bookinfo/reviews", "other/ratings", "shop/details"}
		if got := names(d); !slices.Equal(got, want) {
			t.Fatalf("discovered %v, want %v", got, want)
		}
		reviews := d.Services[0]
		wantSvc := domain.Service{
			Name: "reviews", Namespace: "bookinfo", Type: "ClusterIP",
			Labels:   map[string]string{"app": "reviews", "team": "books"},
			Selector: map[string]string{"app": "reviews"},
			Ports: []domain.ServicePort{
				{Name: "http", Port: 9080, Protocol: "TCP", AppProtocol: "http", TargetPort: 9080},
				{Name: "grpc", Port: 9090, Protocol: "TCP", TargetName: "grpc-port"},
			},
		}
		if !serviceEqual(reviews, wantSvc) {
			t.Errorf("reviews =\n%+v\nwant\n%+v", reviews, wantSvc)
		}
	})

	filters := []struct {
		name   string
		filter NamespaceFilter
		want   []string
	}{
		{"include", NamespaceFilter{Include: []string{"bookinfo", "shop"}}, []string{"bookinfo/reviews", "shop/details"}},
		{"exclude", NamespaceFilter{Exclude: []string{"shop"}}, []string{"bookinfo/reviews", "other/ratings"}},
		{"exclude wins over include", NamespaceFilter{Include: []string{"bookinfo", "shop"}, Exclude: []string{"shop"}}, []string{"bookinfo/reviews"}},
		{"include default does not bring back the API server's Service", NamespaceFilter{Include: []string{"default"}}, nil},
	}
	for _, tt := range filters {
		t.Run(tt.name, func(t *testing.T) {
			d, err := startReader(t, cs, tt.filter).Discover()
			if err != nil {
				t.Fatal(err)
			}
			if got := names(d); !slices.Equal(got, tt.want) {
				t.Errorf("discovered %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("Changed fires on create and delete", func(t *testing.T) {
		r := startReader(t, cs, NamespaceFilter{Include: []string{"shop"}})
		// Drop what the initial listing signalled.
		select {
		case <-r.Changed():
		default:
		}
		createService(t, cs, simpleService("shop", "cart"))
		waitChanged(t, r, []string{"shop/cart", "shop/details"}, "the created service")

		if err := cs.CoreV1().Services("shop").Delete(t.Context(), "cart", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitChanged(t, r, []string{"shop/details"}, "the deletion")
	})
}

func serviceEqual(a, b domain.Service) bool {
	mapEq := func(x, y map[string]string) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if y[k] != v {
				return false
			}
		}
		return true
	}
	return a.Name == b.Name && a.Namespace == b.Namespace && a.Type == b.Type &&
		mapEq(a.Labels, b.Labels) && mapEq(a.Selector, b.Selector) && slices.Equal(a.Ports, b.Ports)
}
