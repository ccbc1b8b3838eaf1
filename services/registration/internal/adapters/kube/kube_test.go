package kube_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/contract"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/kube"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/memory"
	"github.com/meshplane/meshplane/services/registration/internal/adapters/smallstep"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
)

// TestKubeAdapters runs every adapter of this package against one real
// kube-apiserver, each subtest in its own namespace.
func TestKubeAdapters(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{SkipIstioCRDs: true})
	var n atomic.Int32
	namespace := func(t *testing.T) string {
		t.Helper()
		ns := fmt.Sprintf("reg-%d", n.Add(1))
		if _, err := c.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return ns
	}

	t.Run("RootStore contract on Secrets", func(t *testing.T) {
		ns := namespace(t)
		contract.RootStoreSuite(t, func() app.RootStore { return kube.NewRoots(c.Clientset(), ns, "test") })
		// The race ended with one Secret, labelled as registration's.
		sec, err := c.Clientset().CoreV1().Secrets(ns).Get(t.Context(), kube.SecretName("vm-race"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sec.Labels[kube.LabelManagedBy] != kube.FieldManager || len(sec.Data[kube.RootKeyKey]) == 0 {
			t.Fatalf("root Secret labels %v, keys %d", sec.Labels, len(sec.Data))
		}
	})

	t.Run("user roots", func(t *testing.T) {
		ns := namespace(t)
		u := kube.NewUserRoots(c.Clientset())
		if _, err := u.UserRoot(t.Context(), domain.ObjectRef{Name: "mine", Namespace: ns}); !errors.Is(err, app.ErrNotFound) {
			t.Fatalf("missing Secret: %v, want ErrNotFound", err)
		}
		root, err := smallstep.VirtualMeshCA{}.NewRoot(domain.VirtualMesh{Ref: domain.ObjectRef{Name: "x", Namespace: ns}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keyPEM, err := pki.EncodeKey(root.Key)
		if err != nil {
			t.Fatal(err)
		}
		mk := func(name string, data map[string][]byte) {
			if _, err := c.Clientset().CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		mk("mine", map[string][]byte{kube.RootCertKey: pki.EncodeCertificates(root.Cert), kube.RootKeyKey: keyPEM})
		mk("no-key", map[string][]byte{kube.RootCertKey: pki.EncodeCertificates(root.Cert)})
		mk("garbage", map[string][]byte{kube.RootCertKey: []byte("nope"), kube.RootKeyKey: []byte("nope")})
		got, err := u.UserRoot(t.Context(), domain.ObjectRef{Name: "mine", Namespace: ns})
		if err != nil || !got.Cert.Equal(root.Cert) || got.Check(time.Now()) != nil {
			t.Fatalf("UserRoot: %v (check %v)", err, got.Check(time.Now()))
		}
		for name, word := range map[string]string{"no-key": "must hold", "garbage": "root-cert.pem"} {
			_, err := u.UserRoot(t.Context(), domain.ObjectRef{Name: name, Namespace: ns})
			if err == nil || !strings.Contains(err.Error(), word) || strings.Contains(err.Error(), "nope") {
				t.Errorf("UserRoot(%s): %v, want an error saying %q that quotes nothing", name, err, word)
			}
		}
	})

	t.Run("CA Secret", func(t *testing.T) {
		ns := namespace(t)
		// Racing replicas on first start end with one CA.
		const replicas = 6
		cas := make([]*pki.CA, replicas)
		errs := make([]error, replicas)
		var made, stored atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range replicas {
			wg.Go(func() {
				<-start
				var created bool
				cas[i], created, errs[i] = kube.NewCASecret(c.Clientset(), ns, "meshplane-ca", "test").LoadOrCreate(t.Context(), func() (*pki.CA, error) {
					made.Add(1)
					return pki.NewCA("test")
				})
				if created {
					stored.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		for i := range replicas {
			if errs[i] != nil {
				t.Fatalf("replica %d: %v", i, errs[i])
			}
			if !cas[i].Root.Equal(cas[0].Root) || !cas[i].Intermediate.Equal(cas[0].Intermediate) {
				t.Fatalf("replica %d has another CA", i)
			}
		}
		if stored.Load() != 1 {
			t.Fatalf("%d replicas stored a CA, want 1", stored.Load())
		}
		// A restart loads the same CA and makes none.
		again, created, err := kube.NewCASecret(c.Clientset(), ns, "meshplane-ca", "test").LoadOrCreate(t.Context(), func() (*pki.CA, error) {
			return nil, errors.New("must not be called")
		})
		if err != nil || created || !again.Root.Equal(cas[0].Root) {
			t.Fatalf("after a restart: created %v, %v", created, err)
		}

		// The user's own root: a new intermediate under it.
		corp, err := smallstep.VirtualMeshCA{}.NewRoot(domain.VirtualMesh{Ref: domain.ObjectRef{Name: "corp", Namespace: ns}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		keyPEM, _ := pki.EncodeKey(corp.Key)
		put := func(name string, data map[string][]byte) {
			if _, err := c.Clientset().CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		put("byo-root", map[string][]byte{kube.CARootCertKey: pki.EncodeCertificates(corp.Cert), kube.CARootKeyKey: keyPEM})
		byo, _, err := kube.NewCASecret(c.Clientset(), ns, "byo-root", "test").LoadOrCreate(t.Context(), func() (*pki.CA, error) { return pki.NewCA("test") })
		if err != nil {
			t.Fatal(err)
		}
		if !byo.Root.Equal(corp.Cert) || byo.Intermediate.CheckSignatureFrom(corp.Cert) != nil {
			t.Fatal("the CA from a root Secret is not under the user's root")
		}
		put("incomplete", map[string][]byte{kube.CARootCertKey: pki.EncodeCertificates(corp.Cert)})
		if _, _, err := kube.NewCASecret(c.Clientset(), ns, "incomplete", "test").LoadOrCreate(t.Context(), func() (*pki.CA, error) { return pki.NewCA("test") }); !errors.Is(err, kube.ErrCASecretIncomplete) {
			t.Fatalf("incomplete Secret: %v", err)
		}
	})

	t.Run("mirror", func(t *testing.T) {
		ns := namespace(t)
		reg := prometheus.NewRegistry()
		m := kube.NewMirror(c.Dynamic(), ns, "test", reg)
		now := time.Now().UTC().Truncate(time.Second)
		east := domain.NewCluster("east", false, now)
		east.RecordIssued(domain.IssuedCert{Serial: "1234", NotAfter: now.Add(time.Hour)}, "v1.2.3", now)
		if err := m.MirrorCluster(t.Context(), east); err != nil {
			t.Fatal(err)
		}
		get := func(name string) *unstructured.Unstructured {
			u, err := c.Dynamic().Resource(kube.KubernetesClusters).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		u := get("east")
		status := func(u *unstructured.Unstructured, f string) string {
			s, _, _ := unstructured.NestedString(u.Object, "status", f)
			return s
		}
		spec, _, _ := unstructured.NestedString(u.Object, "spec", "clusterName")
		if spec != "east" || status(u, "state") != "STATE_REGISTERED" || status(u, "agentVersion") != "v1.2.3" ||
			status(u, "certificateSerial") != "1234" || status(u, "lastSeen") != now.Format(time.RFC3339) {
			t.Fatalf("mirror: spec %q status %v", spec, u.Object["status"])
		}
		managers := map[string]bool{}
		for _, f := range u.GetManagedFields() {
			managers[f.Manager+"/"+f.Subresource] = f.Operation == metav1.ManagedFieldsOperationApply
		}
		if !managers[kube.FieldManager+"/"] || !managers[kube.FieldManager+"/status"] {
			t.Fatalf("managed fields %v: want server-side apply by %s of the object and its status", managers, kube.FieldManager)
		}

		// A change rewrites the status; an edit by hand is overwritten.
		u.Object["status"].(map[string]any)["state"] = "STATE_APPROVED"
		if _, err := c.Dynamic().Resource(kube.KubernetesClusters).Namespace(ns).UpdateStatus(t.Context(), u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A renewal: both certificates are live, and both are kept, so
		// that both can be revoked again from here.
		east.RecordIssued(domain.IssuedCert{Serial: "5678", NotAfter: now.Add(2 * time.Hour)}, "", now)
		east.Deregister(now)
		if err := m.MirrorCluster(t.Context(), east); err != nil {
			t.Fatal(err)
		}
		if got := status(get("east"), "state"); got != "STATE_DEREGISTERED" {
			t.Fatalf("state %s after deregistration", got)
		}

		// The mirror reads back as the record, with its certificates:
		// only registration's own mirrors count.
		other := &unstructured.Unstructured{}
		other.SetAPIVersion("multicluster.meshplane.dev/v1")
		other.SetKind("KubernetesCluster")
		other.SetName("hand-made")
		if _, err := c.Dynamic().Resource(kube.KubernetesClusters).Namespace(ns).Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		archived, err := m.ArchivedClusters(t.Context())
		if err != nil || len(archived) != 1 || archived[0].Name != "east" {
			t.Fatalf("ArchivedClusters = %v, %v; want [east]", archived, err)
		}
		got, err := m.ArchivedCluster(t.Context(), "east")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != domain.StatusDeregistered || got.AgentVersion != "v1.2.3" || !got.LastSeen.Equal(now) ||
			len(got.Certs) != 2 || got.Certs[0].Serial != "1234" || !got.Certs[0].NotAfter.Equal(now.Add(time.Hour)) ||
			got.Certs[1].Serial != "5678" || !got.Certs[1].NotAfter.Equal(now.Add(2*time.Hour)) {
			t.Fatalf("ArchivedCluster(east) = %+v; want both live certificates", got)
		}
		if l, _ := got.Latest(); l.Serial != "5678" || status(get("east"), "certificateSerial") != "5678" {
			t.Fatalf("the newest certificate is %v, status %s; want 5678", l, status(get("east"), "certificateSerial"))
		}
		for _, name := range []string{"hand-made", "nobody"} {
			if _, err := m.ArchivedCluster(t.Context(), name); !errors.Is(err, app.ErrNotFound) {
				t.Fatalf("ArchivedCluster(%s): %v, want ErrNotFound", name, err)
			}
		}

		// A failure is counted, not hidden.
		bad := kube.NewMirror(c.Dynamic(), "no-such-namespace", "test", reg)
		if err := bad.MirrorCluster(t.Context(), east); err == nil {
			t.Fatal("mirroring into a missing namespace succeeded")
		}
		if got := counterValue(t, reg, "meshplane_registration_mirror_errors_total"); got != 1 {
			t.Fatalf("mirror_errors_total = %v, want 1", got)
		}
	})

	t.Run("mirroring keeps records and mirrors in step", func(t *testing.T) {
		ns := namespace(t)
		testMirroring(t, c.Clientset(), c, ns)
	})
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// fakeClusters is a ClusterStore over a map, enough for Mirroring.
type fakeClusters struct {
	mu sync.Mutex
	m  map[string]domain.Cluster
}

func (f *fakeClusters) Cluster(_ context.Context, name string) (domain.Cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.m[name]
	if !ok {
		return domain.Cluster{}, app.ErrNotFound
	}
	return c, nil
}

func (f *fakeClusters) Clusters(context.Context) ([]domain.Cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []domain.Cluster
	for _, c := range f.m {
		out = append(out, c)
	}
	return out, nil
}

func (f *fakeClusters) UpdateCluster(_ context.Context, name string, fn func(c *domain.Cluster, exists bool) error) (domain.Cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.m[name]
	if err := fn(&c, ok); err != nil {
		return domain.Cluster{}, err
	}
	f.m[name] = c
	return c, nil
}

func testMirroring(t *testing.T, _ kubernetes.Interface, c *kubetest.Cluster, ns string) {
	store := &fakeClusters{m: map[string]domain.Cluster{}}
	now := time.Now()
	store.m["east"] = domain.NewCluster("east", false, now)
	store.m["west"] = domain.NewCluster("west", true, now)
	mirror := kube.NewMirror(c.Dynamic(), ns, "test", nil)
	revocations := memory.NewRevocations()
	m := app.NewMirroring(store, mirror, app.NewReseeder(store, mirror, app.NewRevoker(revocations, nil), nil, nil), time.Hour, nil)
	// The mirror of a cluster whose record the store lost.
	lost := domain.NewCluster("lost", false, now)
	lost.RecordIssued(domain.IssuedCert{Serial: "77", NotAfter: now.Add(time.Hour)}, "v1", now)
	if err := mirror.MirrorCluster(t.Context(), lost); err != nil {
		t.Fatal(err)
	}
	if err := m.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	names := func() string {
		list, err := c.Dynamic().Resource(kube.KubernetesClusters).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range list.Items {
			st, _, _ := unstructured.NestedString(it.Object, "status", "state")
			out = append(out, it.GetName()+"="+st)
		}
		return strings.Join(out, ",")
	}
	if got := names(); got != "east=STATE_APPROVED,lost=STATE_REGISTERED,west=STATE_PENDING_APPROVAL" {
		t.Fatalf("after reconcile: %s", got)
	}
	if rec, err := store.Cluster(t.Context(), "lost"); err != nil || rec.Status != domain.StatusRegistered || len(rec.Certs) != 1 || rec.Certs[0].Serial != "77" {
		t.Fatalf("the lost record was not re-seeded from its mirror: %+v, %v", rec, err)
	}
	// A change is mirrored by Run without waiting for the resync.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if _, err := store.UpdateCluster(t.Context(), "west", func(c *domain.Cluster, _ bool) error { return c.Approve() }); err != nil {
		t.Fatal(err)
	}
	m.ClusterChanged("west")
	if err := kubetest.WaitFor(t.Context(), 10*time.Second, func(context.Context) (bool, error) {
		return names() == "east=STATE_APPROVED,lost=STATE_REGISTERED,west=STATE_APPROVED", nil
	}); err != nil {
		t.Fatalf("west's approval not mirrored: %v (mirrors %s)", err, names())
	}
}
