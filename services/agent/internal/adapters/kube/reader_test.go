package kube

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/gen/crds"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discov1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

const waitTimeout = 10 * time.Second

var identity = domain.Identity{Cluster: "east", AgentVersion: "test", Namespace: "meshplane"}

// fixture creates objects through the API, as controllers would have: no
// controller runs in the test API server.
type fixture struct {
	t  *testing.T
	cs kubernetes.Interface
}

func (f fixture) ctx() context.Context { return f.t.Context() }

func (f fixture) check(err error, what string, args ...any) {
	f.t.Helper()
	if err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}

func (f fixture) namespace(name string, labels map[string]string) {
	f.t.Helper()
	_, err := f.cs.CoreV1().Namespaces().Create(f.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	f.check(err, "create namespace %s", name)
}

func (f fixture) node(name string, labels map[string]string, addrs ...corev1.NodeAddress) {
	f.t.Helper()
	n, err := f.cs.CoreV1().Nodes().Create(f.ctx(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	f.check(err, "create node %s", name)
	n.Status.Addresses = addrs
	_, err = f.cs.CoreV1().Nodes().UpdateStatus(f.ctx(), n, metav1.UpdateOptions{})
	f.check(err, "node %s status", name)
}

func container(name, image string) corev1.Container {
	return corev1.Container{Name: name, Image: image}
}

// deployment creates a Deployment and its ReplicaSet, owned through
// ownerReferences, and returns the ReplicaSet as the pods' owner.
func (f fixture) deployment(ns, name string, labels, podLabels map[string]string, sa string, containers ...corev1.Container) metav1.OwnerReference {
	f.t.Helper()
	dep, err := f.cs.AppsV1().Deployments(ns).Create(f.ctx(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec:       corev1.PodSpec{ServiceAccountName: sa, Containers: containers},
			},
		},
	}, metav1.CreateOptions{})
	f.check(err, "create deployment %s/%s", ns, name)
	rsLabels := maps.Clone(podLabels)
	rsLabels["pod-template-hash"] = "h" + name[:1]
	rs, err := f.cs.AppsV1().ReplicaSets(ns).Create(f.ctx(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-" + rsLabels["pod-template-hash"], Namespace: ns, Labels: rsLabels,
			OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", dep.Name, dep.UID)},
		},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: rsLabels},
				Spec:       corev1.PodSpec{ServiceAccountName: sa, Containers: containers},
			},
		},
	}, metav1.CreateOptions{})
	f.check(err, "create replicaset for %s/%s", ns, name)
	return controllerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)
}

func controllerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}
}

// pod creates a running, ready pod.
func (f fixture) pod(ns, name string, labels map[string]string, owner *metav1.OwnerReference, sa, node, ip string, containers ...corev1.Container) {
	f.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels,
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}},
		Spec: corev1.PodSpec{ServiceAccountName: sa, NodeName: node, Containers: containers},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	p, err := f.cs.CoreV1().Pods(ns).Create(f.ctx(), p, metav1.CreateOptions{})
	f.check(err, "create pod %s/%s", ns, name)
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}
	_, err = f.cs.CoreV1().Pods(ns).UpdateStatus(f.ctx(), p, metav1.UpdateOptions{})
	f.check(err, "pod %s/%s status", ns, name)
}

func (f fixture) service(svc *corev1.Service) *corev1.Service {
	f.t.Helper()
	out, err := f.cs.CoreV1().Services(svc.Namespace).Create(f.ctx(), svc, metav1.CreateOptions{})
	f.check(err, "create service %s/%s", svc.Namespace, svc.Name)
	return out
}

func httpService(ns, app string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns, Labels: map[string]string{"app": app, "service": app}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": app},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 9080, TargetPort: intstr.FromInt32(9080)}},
		},
	}
}

type sliceEndpoint struct{ ip, node, pod string }

func (f fixture) endpointSlice(ns, svc string, eps ...sliceEndpoint) {
	f.t.Helper()
	name, port, proto := "http", int32(9080), corev1.ProtocolTCP
	es := &discov1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-manual", Namespace: ns, Labels: map[string]string{discov1.LabelServiceName: svc}},
		AddressType: discov1.AddressTypeIPv4,
		Ports:       []discov1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	for _, e := range eps {
		ready := true
		ep := discov1.Endpoint{Addresses: []string{e.ip}, Conditions: discov1.EndpointConditions{Ready: &ready}, NodeName: &e.node}
		if e.pod != "" {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: e.pod}
		}
		es.Endpoints = append(es.Endpoints, ep)
	}
	_, err := f.cs.DiscoveryV1().EndpointSlices(ns).Create(f.ctx(), es, metav1.CreateOptions{})
	f.check(err, "create endpointslice for %s/%s", ns, svc)
}

const (
	proxyImage   = "docker.io/istio/proxyv2:1.24.0"
	trafficYAML  = "apiVersion: networking.meshplane.dev/v1\nkind: TrafficPolicy\nmetadata: {name: reviews-retries, namespace: bookinfo, labels: {team: books}}\nspec:\n  destinationSelector:\n  - kubeServiceRefs: {services: [{name: reviews, namespace: bookinfo}]}\n  policy:\n    retries: {attempts: 3, perTryTimeout: 2s}\n"
	brokenYAML   = "apiVersion: networking.meshplane.dev/v1\nkind: TrafficPolicy\nmetadata: {name: too-long, namespace: bookinfo}\nspec:\n  policy:\n    requestTimeout: 999999999999999s\n"
	otherTPYAML  = "apiVersion: networking.meshplane.dev/v1\nkind: TrafficPolicy\nmetadata: {name: other-timeout, namespace: other}\nspec:\n  policy:\n    requestTimeout: 5s\n"
	settingsYAML = "apiVersion: settings.meshplane.dev/v1\nkind: Settings\nmetadata: {name: settings, namespace: bookinfo}\nspec: {}\n"
)

// seedEstate creates bookinfo and an Istio control plane with two
// revisions, an east-west gateway and nodes in two zones.
func seedEstate(t *testing.T, c *kubetest.Cluster) {
	t.Helper()
	f := fixture{t: t, cs: c.Clientset()}
	f.namespace("istio-system", nil)
	f.namespace("bookinfo", map[string]string{"istio-injection": "enabled", "team": "books"})
	f.namespace("canary-apps", map[string]string{domain.LabelRevision: "canary"})
	f.namespace("other", nil)

	f.node("node-a", map[string]string{domain.LabelRegion: "eu-west-1", domain.LabelZone: "eu-west-1a", "kubernetes.io/hostname": "node-a"},
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.168.0.1"})
	f.node("node-b", map[string]string{domain.LabelRegion: "eu-west-1", domain.LabelZone: "eu-west-1b", domain.LabelSubzone: "rack-7"},
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.168.0.2"}, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.2"})

	// istiod, default and canary revisions, each with its mesh config.
	rs := f.deployment("istio-system", "istiod", map[string]string{"app": "istiod", domain.LabelRevision: "default"},
		map[string]string{"app": "istiod", "istio": "pilot"}, "istiod", container("discovery", "docker.io/istio/pilot:1.24.0"))
	f.pod("istio-system", "istiod-hi-1", map[string]string{"app": "istiod", "istio": "pilot", "pod-template-hash": "hi"}, &rs, "istiod", "node-a", "10.1.0.1",
		container("discovery", "docker.io/istio/pilot:1.24.0"))
	rs = f.deployment("istio-system", "istiod-canary", map[string]string{"app": "istiod", domain.LabelRevision: "canary"},
		map[string]string{"app": "istiod", domain.LabelRevision: "canary"}, "istiod-canary", container("discovery", "docker.io/istio/pilot:1.25.1-distroless"))
	f.pod("istio-system", "istiod-canary-hi-1", map[string]string{"app": "istiod", domain.LabelRevision: "canary", "pod-template-hash": "hi"}, &rs, "istiod-canary", "node-b", "10.1.0.2",
		container("discovery", "docker.io/istio/pilot:1.25.1-distroless"))
	for name, td := range map[string]string{"istio": "east.example", "istio-canary": "canary.example"} {
		_, err := f.cs.CoreV1().ConfigMaps("istio-system").Create(t.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "istio-system"},
			Data:       map[string]string{"mesh": "defaultConfig:\n  discoveryAddress: istiod.istio-system.svc:15012\ntrustDomain: " + td + "\n", "meshNetworks": "networks: {}"},
		}, metav1.CreateOptions{})
		f.check(err, "create configmap %s", name)
	}
	_, err := f.cs.CoreV1().ConfigMaps("bookinfo").Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "istio-ca-root-cert", Namespace: "bookinfo"}, Data: map[string]string{"root-cert.pem": "x"},
	}, metav1.CreateOptions{})
	f.check(err, "create configmap istio-ca-root-cert")

	// The east-west gateway: a LoadBalancer Service with an address.
	gwLabels := map[string]string{"istio": "eastwestgateway", "app": "istio-eastwestgateway", "topology.istio.io/network": "net1"}
	rs = f.deployment("istio-system", "istio-eastwestgateway", nil, gwLabels, "istio-eastwestgateway-service-account", container("istio-proxy", proxyImage))
	f.pod("istio-system", "istio-eastwestgateway-hi-1", gwLabels, &rs, "istio-eastwestgateway-service-account", "node-b", "10.1.0.3", container("istio-proxy", proxyImage))
	lb := f.service(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "istio-eastwestgateway", Namespace: "istio-system", Labels: gwLabels},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: gwLabels,
			Ports: []corev1.ServicePort{
				{Name: "status-port", Port: 15021, TargetPort: intstr.FromInt32(15021)},
				{Name: "tls", Port: 15443, TargetPort: intstr.FromInt32(15443)},
			},
		},
	})
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.10"}}
	_, err = f.cs.CoreV1().Services("istio-system").UpdateStatus(t.Context(), lb, metav1.UpdateOptions{})
	f.check(err, "east-west gateway status")
	f.service(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "istiod", Namespace: "istio-system"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "istiod", "istio": "pilot"},
			Ports: []corev1.ServicePort{{Name: "grpc-xds", Port: 15010}}},
	})

	// Bookinfo, sidecar-injected; reviews v1 has two pods.
	type wl struct {
		app, version, node string
		pods               int
	}
	ip := 0
	for _, w := range []wl{{"productpage", "v1", "node-a", 1}, {"details", "v1", "node-a", 1}, {"ratings", "v1", "node-b", 1},
		{"reviews", "v1", "node-a", 2}, {"reviews", "v2", "node-b", 1}, {"reviews", "v3", "node-b", 1}} {
		labels := map[string]string{"app": w.app, "version": w.version}
		name := w.app + "-" + w.version
		rs := f.deployment("bookinfo", name, labels, labels, "bookinfo-"+w.app, container(w.app, "examples-bookinfo-"+name))
		for i := range w.pods {
			ip++
			podLabels := maps.Clone(labels)
			podLabels["pod-template-hash"] = rs.Name[len(name)+1:]
			podLabels["security.istio.io/tlsMode"] = "istio"
			f.pod("bookinfo", fmt.Sprintf("%s-%d", rs.Name, i), podLabels, &rs, "bookinfo-"+w.app, w.node, fmt.Sprintf("10.0.0.%d", ip),
				container(w.app, "examples-bookinfo-"+name), container("istio-proxy", proxyImage))
		}
	}
	for _, app := range []string{"productpage", "details", "ratings", "reviews"} {
		f.service(httpService("bookinfo", app))
	}
	f.endpointSlice("bookinfo", "reviews",
		sliceEndpoint{"10.0.0.4", "node-a", "reviews-v1-hr-0"}, sliceEndpoint{"10.0.0.5", "node-a", "reviews-v1-hr-1"},
		sliceEndpoint{"10.0.0.6", "node-b", "reviews-v2-hr-0"}, sliceEndpoint{"10.0.0.7", "node-b", "reviews-v3-hr-0"})

	// Not in the mesh: no sidecar.
	f.pod("bookinfo", "legacy-0", map[string]string{"app": "legacy"}, nil, "", "node-a", "10.0.0.50", container("legacy", "legacy:1"))
	f.service(httpService("bookinfo", "legacy"))
	// Annotated to be discovered although nothing in the mesh backs it.
	ext := httpService("bookinfo", "payments")
	ext.Annotations = map[string]string{domain.AnnotationDiscover: "true"}
	f.service(ext)

	// A native-sidecar StatefulSet pod in the canary namespace, and a bare
	// mesh pod in another namespace.
	always := corev1.ContainerRestartPolicyAlways
	st, err := f.cs.AppsV1().StatefulSets("canary-apps").Create(t.Context(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "canary-apps"},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{container("db", "db:1")}}},
		},
	}, metav1.CreateOptions{})
	f.check(err, "create statefulset")
	stRef := controllerRef("apps/v1", "StatefulSet", st.Name, st.UID)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "canary-apps", Labels: map[string]string{"app": "db", "statefulset.kubernetes.io/pod-name": "db-0"},
			OwnerReferences: []metav1.OwnerReference{stRef}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "istio-proxy", Image: proxyImage, RestartPolicy: &always}},
			Containers:     []corev1.Container{container("db", "db:1")},
		},
	}
	_, err = f.cs.CoreV1().Pods("canary-apps").Create(t.Context(), p, metav1.CreateOptions{})
	f.check(err, "create pod db-0")
	f.service(httpService("canary-apps", "db"))
	f.pod("other", "tool", map[string]string{"app": "tool"}, nil, "tool", "node-a", "10.0.2.1", container("tool", "tool:1"), container("istio-proxy", proxyImage))
	f.service(httpService("other", "tool"))
	// The injector records the revision it injected, which wins over labels.
	tool, err := f.cs.CoreV1().Pods("other").Get(t.Context(), "tool", metav1.GetOptions{})
	f.check(err, "get pod tool")
	tool.Annotations[domain.AnnotationSidecar] = `{"initContainers":null,"containers":["istio-proxy"],"revision":"canary"}`
	_, err = f.cs.CoreV1().Pods("other").Update(t.Context(), tool, metav1.UpdateOptions{})
	f.check(err, "annotate pod tool")

	for _, y := range []string{trafficYAML, brokenYAML, otherTPYAML, settingsYAML} {
		if err := c.ApplyYAML(t.Context(), []byte(y)); err != nil {
			t.Fatalf("apply %s: %v", y, err)
		}
	}
}

// syncWriter lets the reader's logger be read while informers log.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func startReader(t testing.TB, c *kubetest.Cluster, opts Options) *Reader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	clients, err := NewClients(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if opts.Cluster == "" {
		opts.Cluster = identity.Cluster
	}
	r, err := NewReader(ctx, clients, opts)
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

func snapshot(t testing.TB, r *Reader) *snapshotv1.InputSnapshot {
	t.Helper()
	d, err := r.Discover()
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return domain.BuildInputSnapshot(identity, d)
}

func metaNames[T interface {
	GetMetadata() *commonv1.ObjectMeta
}](items []T) []string {
	var out []string
	for _, i := range items {
		out = append(out, i.GetMetadata().GetNamespace()+"/"+i.GetMetadata().GetName())
	}
	return out
}

func destinationNames(s *snapshotv1.InputSnapshot) []string {
	var out []string
	for _, d := range s.GetDestinations() {
		out = append(out, d.GetMetadata().GetName())
	}
	return out
}

func workloadNames(s *snapshotv1.InputSnapshot) []string {
	var out []string
	for _, w := range s.GetWorkloads() {
		out = append(out, w.GetMetadata().GetName())
	}
	return out
}

func TestReader(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east"})
	seedEstate(t, c)
	logs := &syncWriter{}
	r := startReader(t, c, Options{Log: slog.New(slog.NewTextHandler(logs, nil))})
	s := snapshot(t, r)

	t.Run("meshes", func(t *testing.T) {
		type want struct {
			version, revision, trustDomain, sa string
			eastWest                           int
		}
		wants := map[string]want{
			"istiod-istio-system-east":        {"1.24.0", "", "east.example", "istiod", 1},
			"istiod-canary-istio-system-east": {"1.25.1", "canary", "canary.example", "istiod-canary", 0},
		}
		if len(s.GetMeshes()) != len(wants) {
			t.Fatalf("meshes = %v", s.GetMeshes())
		}
		for _, m := range s.GetMeshes() {
			w, ok := wants[m.GetMetadata().GetName()]
			if !ok {
				t.Errorf("unexpected mesh %s", m.GetMetadata().GetName())
				continue
			}
			is := m.GetSpec().GetIstio()
			inst := is.GetInstallation()
			if inst.GetVersion() != w.version || inst.GetRevision() != w.revision || is.GetTrustDomain() != w.trustDomain ||
				is.GetIstiodServiceAccount() != w.sa || inst.GetRegion() != "eu-west-1" || inst.GetNamespace() != "istio-system" || inst.GetCluster() != "east" {
				t.Errorf("mesh %s = %v, want %+v", m.GetMetadata().GetName(), is, w)
			}
			if len(is.GetEastWestGateways()) != w.eastWest {
				t.Errorf("mesh %s east-west gateways = %v", m.GetMetadata().GetName(), is.GetEastWestGateways())
			}
		}
		gw := meshNamed(s, "istiod-istio-system-east").GetSpec().GetIstio().GetEastWestGateways()[0]
		if gw.GetExternalAddress() != "198.51.100.10" || gw.GetExternalTlsPort() != 15443 || gw.GetTlsContainerPort() != 15443 ||
			gw.GetService().GetName() != "istio-eastwestgateway" || gw.GetWorkloadLabels()["istio"] != "eastwestgateway" {
			t.Errorf("east-west gateway = %v", gw)
		}
	})

	t.Run("workloads", func(t *testing.T) {
		want := []string{
			"db-canary-apps-east",
			"details-v1-bookinfo-east", "productpage-v1-bookinfo-east", "ratings-v1-bookinfo-east",
			"reviews-v1-bookinfo-east", "reviews-v2-bookinfo-east", "reviews-v3-bookinfo-east",
			"istio-eastwestgateway-istio-system-east",
			"tool-other-east",
		}
		slices.Sort(want)
		got := workloadNames(s)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("workloads = %v, want %v", got, want)
		}
		for _, w := range s.GetWorkloads() {
			k := w.GetSpec().GetKubernetes()
			switch w.GetMetadata().GetName() {
			case "reviews-v1-bookinfo-east":
				if k.GetControllerKind() != "Deployment" || k.GetController().GetName() != "reviews-v1" || k.GetReadyPods() != 2 ||
					k.GetServiceAccountName() != "bookinfo-reviews" ||
					!maps.Equal(k.GetPodLabels(), map[string]string{"app": "reviews", "version": "v1", "security.istio.io/tlsMode": "istio"}) ||
					w.GetSpec().GetMesh().GetName() != "istiod-istio-system-east" {
					t.Errorf("reviews-v1 = %v", w)
				}
			case "db-canary-apps-east":
				if k.GetControllerKind() != "StatefulSet" || w.GetSpec().GetMesh().GetName() != "istiod-canary-istio-system-east" || k.GetReadyPods() != 0 {
					t.Errorf("db = %v", w)
				}
			case "tool-other-east":
				if k.GetControllerKind() != "Pod" || k.GetServiceAccountName() != "tool" || w.GetSpec().GetMesh().GetName() != "istiod-canary-istio-system-east" {
					t.Errorf("tool = %v", w)
				}
			}
		}
	})

	t.Run("destinations", func(t *testing.T) {
		want := []string{
			"db-canary-apps-east",
			"details-bookinfo-east", "payments-bookinfo-east", "productpage-bookinfo-east", "ratings-bookinfo-east", "reviews-bookinfo-east",
			"istio-eastwestgateway-istio-system-east",
			"tool-other-east",
		}
		slices.Sort(want)
		got := destinationNames(s)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("destinations = %v, want %v (legacy has no sidecar, istiod's Service selects no sidecar pod)", got, want)
		}
		var reviews *discoveryv1.Destination
		for _, d := range s.GetDestinations() {
			if d.GetMetadata().GetName() == "reviews-bookinfo-east" {
				reviews = d
			}
		}
		ks := reviews.GetSpec().GetKubeService()
		if got := ks.GetSubsets()["version"].GetValues(); !slices.Equal(got, []string{"v1", "v2", "v3"}) || len(ks.GetSubsets()) != 1 {
			t.Errorf("subsets = %v, want version: v1 v2 v3", ks.GetSubsets())
		}
		if reviews.GetSpec().GetMesh().GetName() != "istiod-istio-system-east" || ks.GetRegion() != "eu-west-1" {
			t.Errorf("mesh %v region %q", reviews.GetSpec().GetMesh(), ks.GetRegion())
		}
		if len(ks.GetPorts()) != 1 || ks.GetPorts()[0].GetName() != "http" || ks.GetPorts()[0].GetProtocol() != "TCP" {
			t.Errorf("ports = %v", ks.GetPorts())
		}
		if len(ks.GetEndpointSubsets()) != 1 {
			t.Fatalf("endpoint subsets = %v", ks.GetEndpointSubsets())
		}
		zones := map[string]string{}
		for _, e := range ks.GetEndpointSubsets()[0].GetEndpoints() {
			zones[e.GetIpAddress()] = e.GetSubLocality().GetZone() + "/" + e.GetSubLocality().GetSubZone() + "/" + e.GetLabels()["version"]
		}
		wantZones := map[string]string{"10.0.0.4": "eu-west-1a//v1", "10.0.0.5": "eu-west-1a//v1", "10.0.0.6": "eu-west-1b/rack-7/v2", "10.0.0.7": "eu-west-1b/rack-7/v3"}
		if !maps.Equal(zones, wantZones) {
			t.Errorf("endpoints = %v, want %v", zones, wantZones)
		}
	})

	t.Run("user resources", func(t *testing.T) {
		got := metaNames(s.GetTrafficPolicies())
		if !slices.Equal(got, []string{"bookinfo/reviews-retries", "bookinfo/too-long", "other/other-timeout"}) {
			t.Fatalf("traffic policies = %v; the one that does not decode must be sent with its decode error", got)
		}
		broken := s.GetTrafficPolicies()[1]
		if de := broken.GetMetadata().GetDecodeError(); !strings.HasPrefix(de, "spec.policy.requestTimeout: does not decode") {
			t.Errorf("decode error of too-long = %q, want it to name spec.policy.requestTimeout", de)
		}
		if broken.GetMetadata().GetGeneration() != 1 || broken.GetSpec().GetPolicy() != nil {
			t.Errorf("too-long = %v, want its generation and an empty spec", broken)
		}
		tp := s.GetTrafficPolicies()[0]
		if tp.GetMetadata().GetCluster() != "east" || tp.GetMetadata().GetGeneration() != 1 || tp.GetMetadata().GetLabels()["team"] != "books" ||
			tp.GetSpec().GetPolicy().GetRetries().GetAttempts() != 3 || tp.GetSpec().GetPolicy().GetRetries().GetPerTryTimeout().AsDuration() != 2*time.Second ||
			tp.GetSpec().GetDestinationSelector()[0].GetKubeServiceRefs().GetServices()[0].GetName() != "reviews" {
			t.Errorf("traffic policy = %v", tp)
		}
		if tp.GetStatus() != nil {
			t.Errorf("status was read: %v", tp.GetStatus())
		}
		if len(s.GetSettings()) != 1 {
			t.Errorf("settings = %v", s.GetSettings())
		}
		kubetest.Eventually(t, waitTimeout, func(context.Context) (bool, error) {
			return strings.Contains(logs.String(), "too-long") && strings.Contains(logs.String(), "requestTimeout"), nil
		}, "a warning naming the resource and the field; logs:\n%s", logs)
	})

	filters := []struct {
		name         string
		filter       NamespaceFilter
		wantNS       []string
		wantPolicies []string
	}{
		{"include", NamespaceFilter{Include: []string{"bookinfo", "other"}}, []string{"bookinfo", "other"}, []string{"bookinfo/reviews-retries", "bookinfo/too-long", "other/other-timeout"}},
		{"exclude", NamespaceFilter{Exclude: []string{"bookinfo"}}, []string{"canary-apps", "istio-system", "other"}, []string{"other/other-timeout"}},
		{"selector", NamespaceFilter{Selector: "team=books"}, []string{"bookinfo"}, []string{"bookinfo/reviews-retries", "bookinfo/too-long"}},
		{"exclude wins", NamespaceFilter{Include: []string{"bookinfo"}, Exclude: []string{"bookinfo"}}, nil, nil},
	}
	for _, tt := range filters {
		t.Run("namespace filter "+tt.name, func(t *testing.T) {
			s := snapshot(t, startReader(t, c, Options{Namespaces: tt.filter}))
			var ns []string
			for _, d := range s.GetDestinations() {
				ns = append(ns, d.GetMetadata().GetNamespace())
			}
			for _, w := range s.GetWorkloads() {
				ns = append(ns, w.GetMetadata().GetNamespace())
			}
			slices.Sort(ns)
			ns = slices.Compact(ns)
			if !slices.Equal(ns, tt.wantNS) {
				t.Errorf("namespaces = %v, want %v", ns, tt.wantNS)
			}
			if got := metaNames(s.GetTrafficPolicies()); !slices.Equal(got, tt.wantPolicies) {
				t.Errorf("traffic policies = %v, want %v", got, tt.wantPolicies)
			}
			if len(s.GetMeshes()) != 2 {
				t.Errorf("%d meshes; the filter must not hide istio-system", len(s.GetMeshes()))
			}
		})
	}

	t.Run("the cache holds slim objects", func(t *testing.T) {
		pods := r.pods.List()
		if len(pods) == 0 {
			t.Fatal("no pods cached")
		}
		for _, o := range pods {
			p, ok := o.(*cachedPod)
			if !ok {
				t.Fatalf("the pod cache holds %T", o)
			}
			if len(p.ManagedFields) > 0 || len(p.Annotations) > 0 {
				t.Errorf("pod %s keeps metadata discovery does not read: %v %v", p.Name, p.ManagedFields, p.Annotations)
			}
		}
		cm, err := r.configMaps.ConfigMaps("istio-system").Get("istio")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := cm.Data["meshNetworks"]; ok {
			t.Errorf("mesh config keeps keys discovery does not read: %v", cm.Data)
		}
	})
}

func meshNamed(s *snapshotv1.InputSnapshot, name string) *discoveryv1.Mesh {
	for _, m := range s.GetMeshes() {
		if m.GetMetadata().GetName() == name {
			return m
		}
	}
	return nil
}

// waitChanged waits for change events until, after one, the snapshot's
// destinations are want: a change that Changed does not signal fails.
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
		if got = destinationNames(snapshot(t, r)); slices.Equal(got, want) {
			return
		}
	}
}

func TestReaderChanged(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east"})
	f := fixture{t: t, cs: c.Clientset()}
	f.namespace("shop", nil)
	f.pod("shop", "cart-0", map[string]string{"app": "cart"}, nil, "", "", "10.0.0.1", container("istio-proxy", proxyImage))
	r := startReader(t, c, Options{Namespaces: NamespaceFilter{Include: []string{"shop"}}})
	// Drop what the initial listing signalled.
	select {
	case <-r.Changed():
	default:
	}
	f.service(httpService("shop", "cart"))
	waitChanged(t, r, []string{"cart-shop-east"}, "the created service")
	if err := c.Clientset().CoreV1().Services("shop").Delete(t.Context(), "cart", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitChanged(t, r, nil, "the deletion")
}

func createNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	fixture{t: t, cs: cs}.namespace(name, nil)
}

// An agent that starts before the Meshplane CRDs are installed must still
// push, and must pick up the resources once the CRDs appear.
func TestReaderLateCRDs(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east", SkipMeshplaneCRDs: true})
	f := fixture{t: t, cs: c.Clientset()}
	f.namespace("bookinfo", nil)
	r := startReader(t, c, Options{CRDPollInterval: 100 * time.Millisecond})
	if got := len(snapshot(t, r).GetTrafficPolicies()); got != 0 {
		t.Fatalf("%d traffic policies before the CRDs exist", got)
	}
	docs, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyYAML(t.Context(), bytes.Join(docs, []byte("\n---\n"))); err != nil {
		t.Fatalf("install CRDs: %v", err)
	}
	if err := c.ApplyYAML(t.Context(), []byte(trafficYAML)); err != nil {
		t.Fatalf("apply traffic policy: %v", err)
	}
	kubetest.Eventually(t, 3*waitTimeout, func(context.Context) (bool, error) {
		return len(snapshot(t, r).GetTrafficPolicies()) == 1, nil
	}, "the traffic policy applied after the CRDs appeared")
}
