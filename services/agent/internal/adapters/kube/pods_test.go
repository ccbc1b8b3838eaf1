package kube

import (
	"context"
	"fmt"
	"github.com/meshplane/meshplane/libs/platform/platformtest"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// podController plays the controllers of a cluster without any: it
// records each pod deletion, in the order the API server reports them,
// and creates a replacement that is not Ready until the test says so.
type podController struct {
	kc       kubernetes.Interface
	mu       sync.Mutex
	deleted  []string
	replaced int
	err      error
}

func startPodController(t *testing.T, kc kubernetes.Interface) *podController {
	t.Helper()
	c := &podController{kc: kc}
	w, err := kc.CoreV1().Pods("").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Deleted {
				continue
			}
			c.mu.Lock()
			c.deleted = append(c.deleted, p.Namespace+"/"+p.Name)
			n := len(c.deleted)
			c.mu.Unlock()
			repl := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: p.Namespace, Name: fmt.Sprintf("%s-r%d", strings.SplitN(p.Name, "-r", 2)[0], n),
					Labels: p.Labels, Annotations: p.Annotations, OwnerReferences: p.OwnerReferences,
				},
				Spec: p.Spec,
			}
			_, err := kc.CoreV1().Pods(p.Namespace).Create(context.Background(), repl, metav1.CreateOptions{})
			c.mu.Lock()
			c.replaced++
			if err != nil && c.err == nil {
				c.err = err
			}
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *podController) state() (deleted []string, replaced int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.deleted), c.replaced, c.err
}

// settle waits until every deleted pod has its replacement.
func (c *podController) settle(t *testing.T) {
	t.Helper()
	waitFor(t, "replacements of the deleted pods", func() bool {
		d, r, err := c.state()
		if err != nil {
			t.Fatalf("replacing a pod: %v", err)
		}
		return r == len(d)
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	platformtest.Eventually(t, 30*time.Second, what, cond)
}

// markReady sets the Ready condition on every pod that lacks it, through
// the status subresource, as the kubelet would.
func markReady(t *testing.T, kc kubernetes.Interface) {
	t.Helper()
	pods, err := kc.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if len(p.Status.Conditions) > 0 {
			continue
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := kc.CoreV1().Pods(p.Namespace).UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("pod %s/%s status: %v", p.Namespace, p.Name, err)
		}
	}
}

func createMeshPod(t *testing.T, kc kubernetes.Interface, ns, name string, labels, annotations map[string]string, owner string, containers ...string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations}}
	if owner != "" {
		ref := controllerRef("apps/v1", "ReplicaSet", owner, types.UID("uid-"+owner))
		p.OwnerReferences = []metav1.OwnerReference{ref}
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "example/" + c})
	}
	if _, err := kc.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func rotationOf(t *testing.T, kc kubernetes.Interface) (domain.Rotation, *corev1.Secret) {
	t.Helper()
	sec, err := kc.CoreV1().Secrets("istio-system").Get(t.Context(), "cacerts", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := domain.ParseRotation(sec.GetAnnotations())
	if err != nil {
		t.Fatal(err)
	}
	return r, sec
}

func TestCACertsRotationBouncesPodsInOrder(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east"})
	kc := c.Clientset()
	for _, n := range []string{"istio-system", "istio-ingress", "bookinfo"} {
		createNamespace(t, kc, n)
	}
	injected := map[string]string{domain.AnnotationSidecar: `{"revision":"default"}`}
	createMeshPod(t, kc, "istio-system", "istiod-a", map[string]string{"app": "istiod", "istio.io/rev": "default"}, nil, "istiod-rs", "discovery")
	createMeshPod(t, kc, "istio-ingress", "ingress-a", map[string]string{"istio": "ingressgateway"}, injected, "ingress-rs", "istio-proxy")
	createMeshPod(t, kc, "istio-ingress", "eastwest-a", map[string]string{"istio": "eastwestgateway"}, injected, "eastwest-rs", "istio-proxy")
	for _, n := range []string{"reviews-a", "reviews-b"} {
		createMeshPod(t, kc, "bookinfo", n, map[string]string{"app": "reviews"}, injected, "reviews-rs", "reviews", "istio-proxy")
	}
	createMeshPod(t, kc, "bookinfo", "canary-a", nil, map[string]string{domain.AnnotationSidecar: `{"revision":"canary"}`}, "canary-rs", "app", "istio-proxy")
	createMeshPod(t, kc, "bookinfo", "plain-a", nil, nil, "plain-rs", "app")
	// A Job's pod that has finished is neither restarted nor waited for.
	createMeshPod(t, kc, "bookinfo", "job-a", nil, injected, "", "migrate", "istio-proxy")
	job, err := kc.CoreV1().Pods("bookinfo").Get(t.Context(), "job-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}
	if _, err := kc.CoreV1().Pods("bookinfo").UpdateStatus(t.Context(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	markReady(t, kc)
	// Creation timestamps have a one-second resolution: the rotation
	// starts in a later second than the pods it restarts.
	created := time.Now().Truncate(time.Second)
	waitFor(t, "the next second", func() bool { return time.Now().Truncate(time.Second).After(created) })
	ctl := startPodController(t, kc)

	signer := newRootSigner(t)
	m := app.NewCACerts(signer, NewCASecrets(kc, install, "east"), app.CACertsOptions{
		Log:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		Pods:          NewMeshPods(kc, nil),
		GatewayLabels: []map[string]string{{"istio": "ingressgateway"}, {"istio": "eastwestgateway"}},
	})
	ic := issuedFor("istio-system")
	ic.AutoRestartPods = true
	m.SetDesired([]*snapshotv1.IssuedCertificate{ic})
	m.Reconcile(t.Context()) // issuance
	if r, sec := rotationOf(t, kc); r.Phase != domain.RotationIstiod || len(sec.Data[app.CAKeyKey]) == 0 {
		t.Fatalf("after issuance: phase %q, key %d bytes", r.Phase, len(sec.Data[app.CAKeyKey]))
	}

	m.Reconcile(t.Context())
	// The watch delivers the deletion after Reconcile returns: settle
	// alone would count no deletion yet.
	waitFor(t, "istiod's deletion seen", func() bool {
		d, _, _ := ctl.state()
		return slices.Contains(d, "istio-system/istiod-a")
	})
	ctl.settle(t)
	// istiod's replacement is not Ready: the gateways wait.
	for range 3 {
		m.Reconcile(t.Context())
	}
	if d, _, _ := ctl.state(); !slices.Equal(d, []string{"istio-system/istiod-a"}) {
		t.Fatalf("deleted %v before istiod was Ready again, want istiod only", d)
	}
	if r, _ := rotationOf(t, kc); r.Phase != domain.RotationIstiod || r.Bounced[domain.RotationIstiod] != 1 {
		t.Fatalf("rotation %+v while istiod is not Ready", r)
	}

	drive := func(until domain.RotationPhase) {
		t.Helper()
		waitFor(t, "phase "+string(until), func() bool {
			markReady(t, kc)
			m.Reconcile(t.Context())
			ctl.settle(t)
			r, _ := rotationOf(t, kc)
			return r.Phase == until
		})
	}
	drive(domain.RotationDone)
	d, _, _ := ctl.state()
	want := []string{"istio-system/istiod-a", "istio-ingress/eastwest-a", "istio-ingress/ingress-a", "bookinfo/reviews-a", "bookinfo/reviews-b"}
	if !slices.Equal(d, want) {
		t.Fatalf("deletion order %v, want %v", d, want)
	}

	// The VirtualMesh's root changes: both roots while the pods move, then
	// the new one alone.
	newSigner := newRootSigner(t)
	m2 := app.NewCACerts(newSigner, NewCASecrets(kc, install, "east"), app.CACertsOptions{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Pods: NewMeshPods(kc, []string{"istio-system", "istio-ingress", "bookinfo"}),
		GatewayLabels: []map[string]string{{"istio": "ingressgateway"}, {"istio": "eastwestgateway"}},
	})
	ic2 := issuedFor("istio-system")
	ic2.AutoRestartPods, ic2.RootGeneration = true, "root-sha256:2"
	markReady(t, kc)
	before := time.Now().Truncate(time.Second)
	waitFor(t, "the next second", func() bool { return time.Now().Truncate(time.Second).After(before) })
	m2.SetDesired([]*snapshotv1.IssuedCertificate{ic2})
	m2.Reconcile(t.Context())
	_, sec := rotationOf(t, kc)
	roots, err := pki.ParseCertificates(sec.Data[app.RootCertKey])
	if err != nil {
		t.Fatal(err)
	}
	if len(roots) != 2 || !roots[0].Equal(newSigner.root) || !roots[1].Equal(signer.root) {
		t.Fatalf("root-cert.pem holds %d roots during the transition, want the new then the old", len(roots))
	}
	m = m2
	drive(domain.RotationDone)
	_, sec = rotationOf(t, kc)
	if roots, _ := pki.ParseCertificates(sec.Data[app.RootCertKey]); len(roots) != 1 || !roots[0].Equal(newSigner.root) {
		t.Fatalf("root-cert.pem holds %d roots after the rotation, want the new one", len(roots))
	}
	if d, _, _ := ctl.state(); len(d) != 2*len(want) {
		t.Fatalf("%d deletions over two rotations, want %d: %v", len(d), 2*len(want), d)
	}
}
