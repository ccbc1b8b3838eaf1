package istioloop

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/meshplane/meshplane/libs/kube/istiotest"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// goldenDir holds the cases; -golden points the tests at another copy (for
// example the outputs of an older commit, to see what Envoy got then).
var goldenDir = flag.String("golden", "../../testdata/golden", "directory of the translation golden cases")

type goldenObject struct {
	APIVersion  string            `json:"apiVersion"`
	Kind        string            `json:"kind"`
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Spec        map[string]any    `json:"spec"`
}

// mesh is one cluster of a golden case, with istiod running on its output.
type mesh struct {
	kube   *kubetest.Cluster
	istiod *istiotest.Istiod
}

// startMesh starts an API server, applies the output of cluster in golden
// case name and the pods of the test, then istiod with trust domain td.
func startMesh(t *testing.T, name, cluster, td string, pods ...pod) *mesh {
	t.Helper()
	return startMeshWith(t, name, cluster, td, pods, nil)
}

// startMeshWith is startMesh with a setup of the API server (services,
// endpoints) that runs before istiod starts, so that istiod's first
// answers already know it.
func startMeshWith(t *testing.T, name, cluster, td string, pods []pod, setup func(*kubetest.Cluster)) *mesh {
	t.Helper()
	istiotest.SkipIfAsked(t)
	if _, err := istiotest.PilotDiscoveryPath(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(*goldenDir, name, "output.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]struct {
		Objects []goldenObject `json:"objects"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	objs := doc[cluster].Objects
	if len(objs) == 0 {
		t.Fatalf("golden case %s has no objects for cluster %s", name, cluster)
	}
	kube := leaseKube(t)
	ctx := t.Context()
	namespaces := map[string]bool{}
	var docs []string
	for _, o := range objs {
		namespaces[o.Namespace] = true
		b, err := yaml.Marshal(map[string]any{
			"apiVersion": o.APIVersion, "kind": o.Kind, "spec": o.Spec,
			"metadata": map[string]any{"name": o.Name, "namespace": o.Namespace, "labels": o.Labels, "annotations": o.Annotations},
		})
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	for _, p := range pods {
		namespaces[p.namespace] = true
	}
	for ns := range namespaces {
		createNamespace(t, kube, ns)
	}
	if err := kube.ApplyYAML(ctx, []byte(strings.Join(docs, "---\n"))); err != nil {
		t.Fatalf("apply the output of %s/%s: %v", name, cluster, err)
	}
	for _, p := range pods {
		p.create(t, kube)
	}
	if setup != nil {
		setup(kube)
	}
	return &mesh{kube: kube, istiod: istiotest.Start(t, kube, istiotest.Options{TrustDomain: td})}
}

func createNamespace(t *testing.T, kube *kubetest.Cluster, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := kube.Clientset().CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// pod is a running, ready pod of a mesh workload (with a sidecar, so
// labelled security.istio.io/tlsMode=istio, as injection does).
type pod struct {
	namespace, name, ip, serviceAccount string
	labels                              map[string]string
	containerPort                       int32
}

func (p pod) create(t *testing.T, kube *kubetest.Cluster) {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{"security.istio.io/tlsMode": "istio"}
	for k, v := range p.labels {
		labels[k] = v
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: p.serviceAccount}}
	if _, err := kube.Clientset().CoreV1().ServiceAccounts(p.namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: p.name, Labels: labels},
		Spec: corev1.PodSpec{
			ServiceAccountName: p.serviceAccount,
			NodeName:           "node-1",
			Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1",
				Ports: []corev1.ContainerPort{{ContainerPort: p.containerPort}}}},
		},
	}
	created, err := kube.Clientset().CoreV1().Pods(p.namespace).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = corev1.PodStatus{
		Phase:  corev1.PodRunning,
		PodIP:  p.ip,
		PodIPs: []corev1.PodIP{{IP: p.ip}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
		},
	}
	if _, err := kube.Clientset().CoreV1().Pods(p.namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// clusters connects as proxy p and returns its clusters, checking that
// istiod is still up afterwards. The stream ends with the test, or after a
// minute: a test that waits longer for an answer fails.
func (m *mesh) clusters(t *testing.T, p istiotest.Proxy) (*istiotest.ADS, map[string]*clusterv3.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	ads, err := m.istiod.Connect(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ads.Close)
	cs, err := ads.Clusters()
	if err != nil {
		if exit := m.istiod.WaitExit(10 * time.Second); exit != nil {
			t.Fatalf("CDS for %s: %v; %v", p.Name, err, exit)
		}
		t.Fatalf("CDS for %s: %v", p.Name, err)
	}
	if err := m.istiod.Exited(); err != nil {
		t.Fatal(err)
	}
	return ads, cs
}

// endpoints connects as proxy p, asks for CDS and then the EDS of cluster
// name (as Envoy does), and returns its endpoints.
func (m *mesh) endpoints(t *testing.T, p istiotest.Proxy, name string) *endpointv3.ClusterLoadAssignment {
	t.Helper()
	ads, cs := m.clusters(t, p)
	defer ads.Close()
	cluster(t, cs, name)
	las, err := ads.Endpoints(name)
	if err != nil {
		t.Fatalf("EDS of %s: %v", name, err)
	}
	return las[name]
}

// eventually polls what until it returns "", or fails with its last
// answer: istiod pushes what it learns from the API server a little after
// the first answer.
func eventually(t *testing.T, what string, f func() string) {
	t.Helper()
	var last string
	err := kubetest.WaitFor(t.Context(), time.Minute, func(context.Context) (bool, error) {
		last = f()
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("%s: %s", what, last)
	}
}

func cluster(t *testing.T, cs map[string]*clusterv3.Cluster, name string) *clusterv3.Cluster {
	t.Helper()
	c, ok := cs[name]
	if !ok {
		var names []string
		for n := range cs {
			names = append(names, n)
		}
		slices.Sort(names)
		t.Fatalf("no cluster %s among %v", name, names)
	}
	return c
}

// logProto logs an xDS message as JSON, for the record (the issue's
// closing note quotes these).
func logProto(t *testing.T, label string, m proto.Message) {
	t.Helper()
	t.Logf("%s:\n%s", label, protoText(m))
}

func endpointsString(eps []istiotest.Endpoint) string {
	var out []string
	for _, e := range eps {
		out = append(out, e.String())
	}
	return strings.Join(out, "; ")
}
