package kube

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discov1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// The scaled bookinfo-like estate of issue 4: 1,000 Services in 10
// namespaces, each backed by two Deployments (version v1 and v2) of five
// sidecar-injected pods, so 10,000 pods, with one EndpointSlice per Service.
const (
	benchNamespaces  = 10
	benchServices    = 1000
	benchPodsPerDep  = 5
	benchCreateConns = 64
)

// parallel runs fn for 0..n-1 on a few goroutines and returns the first
// error.
func parallel(n int, fn func(i int) error) error {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range benchCreateConns {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

func seedScaledEstate(ctx context.Context, cs kubernetes.Interface) error {
	for n := range benchNamespaces {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("apps-%d", n), Labels: map[string]string{"istio-injection": "enabled"},
		}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := cs.AppsV1().Deployments("istio-system").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "istiod", Namespace: "istio-system", Labels: map[string]string{"app": "istiod"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "istiod"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "istiod"}},
				Spec: corev1.PodSpec{ServiceAccountName: "istiod", Containers: []corev1.Container{container("discovery", "docker.io/istio/pilot:1.24.0")}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for z, zone := range []string{"zone-a", "zone-b", "zone-c"} {
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("node-%d", z), Labels: map[string]string{domain.LabelRegion: "region-1", domain.LabelZone: zone},
		}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return parallel(benchServices, func(s int) error {
		ns, app := fmt.Sprintf("apps-%d", s%benchNamespaces), fmt.Sprintf("svc-%d", s)
		if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns, Labels: map[string]string{"app": app}},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app},
				Ports: []corev1.ServicePort{{Name: "http", Port: 9080, TargetPort: intstr.FromInt32(9080)}}},
		}, metav1.CreateOptions{}); err != nil {
			return err
		}
		portName, port, protocol := "http", int32(9080), corev1.ProtocolTCP
		es := &discov1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: app + "-x", Namespace: ns, Labels: map[string]string{discov1.LabelServiceName: app}},
			AddressType: discov1.AddressTypeIPv4,
			Ports:       []discov1.EndpointPort{{Name: &portName, Port: &port, Protocol: &protocol}},
		}
		for _, version := range []string{"v1", "v2"} {
			labels := map[string]string{"app": app, "version": version}
			dep, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: app + "-" + version, Namespace: ns, Labels: labels},
				Spec: appsv1.DeploymentSpec{
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{container("app", "app:1")}}},
				},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			rsLabels := map[string]string{"app": app, "version": version, "pod-template-hash": "abc"}
			rs, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: dep.Name + "-abc", Namespace: ns, Labels: rsLabels,
					OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", dep.Name, dep.UID)}},
				Spec: appsv1.ReplicaSetSpec{
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: rsLabels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{container("app", "app:1")}}},
				},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			for p := range benchPodsPerDep {
				name := fmt.Sprintf("%s-%d", rs.Name, p)
				ip := fmt.Sprintf("10.%d.%d.%d", s/250, s%250, len(es.Endpoints)+1)
				node := fmt.Sprintf("node-%d", p%3)
				// What an injected pod looks like, so that the transform has
				// real work to do.
				pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: rsLabels,
						Annotations:     map[string]string{domain.AnnotationSidecar: `{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["istio-envoy","istio-data","istio-podinfo","istio-token","istiod-ca-cert"],"imagePullSecrets":null,"revision":"default"}`},
						OwnerReferences: []metav1.OwnerReference{controllerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)}},
					Spec: corev1.PodSpec{
						NodeName:       node,
						InitContainers: []corev1.Container{{Name: "istio-init", Image: "docker.io/istio/proxyv2:1.24.0", Args: []string{"istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337"}}},
						Containers: []corev1.Container{
							{Name: "app", Image: "app:1", Ports: []corev1.ContainerPort{{ContainerPort: 9080}}},
							{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.24.0", Args: []string{"proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local"},
								Env: []corev1.EnvVar{{Name: "ISTIO_META_WORKLOAD_NAME", Value: dep.Name}, {Name: "ISTIO_META_CLUSTER_ID", Value: "east"}, {Name: "PILOT_CERT_PROVIDER", Value: "istiod"}}},
						},
					},
				}, metav1.CreateOptions{})
				if err != nil {
					return err
				}
				pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
					Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
				if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
					return err
				}
				ready := true
				es.Endpoints = append(es.Endpoints, discov1.Endpoint{Addresses: []string{ip}, NodeName: &node,
					Conditions: discov1.EndpointConditions{Ready: &ready}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name}})
			}
		}
		_, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{})
		return err
	})
}

// writeHeapProfile records what the caches hold, for
// `go tool pprof -sample_index=inuse_space`.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkDiscovery10kPods measures, against a real API server holding
// 10,000 pods and 1,000 Services, the time from informer sync to a complete
// input snapshot (target: 5 s), and the heap that the caches and the
// snapshot hold. Run it with
//
//	go test -run '^$' -bench Discovery10kPods -benchtime 1x ./internal/adapters/kube/
func BenchmarkDiscovery10kPods(b *testing.B) {
	c := kubetest.Start(b, kubetest.Options{Name: "bench"})
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = 10000, 10000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	seedStart := time.Now()
	if err := seedScaledEstate(b.Context(), cs); err != nil {
		b.Fatalf("seed: %v", err)
	}
	b.Logf("seeded the estate in %s", time.Since(seedStart).Round(time.Millisecond))

	clients, err := NewClients(cfg)
	if err != nil {
		b.Fatal(err)
	}
	id := domain.Identity{Cluster: "bench", AgentVersion: "bench", Namespace: "meshplane"}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		before := heapInUse()
		ctx, cancel := context.WithCancel(b.Context())
		b.StartTimer()

		start := time.Now()
		r, err := NewReader(ctx, clients, Options{Cluster: id.Cluster})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.WaitForSync(ctx); err != nil {
			b.Fatal(err)
		}
		synced := time.Now()
		d, err := r.Discover()
		if err != nil {
			b.Fatal(err)
		}
		s := domain.BuildInputSnapshot(id, d)
		done := time.Now()

		b.StopTimer()
		d2, err := r.Discover()
		if err != nil {
			b.Fatal(err)
		}
		rebuildStart := time.Now()
		domain.BuildInputSnapshot(id, d2)
		rebuild := time.Since(rebuildStart)
		d2 = domain.Discovered{}
		after := heapInUse()

		if got := len(s.GetWorkloads()); got != 2*benchServices {
			b.Fatalf("%d workloads, want %d", got, 2*benchServices)
		}
		if got := len(s.GetDestinations()); got != benchServices {
			b.Fatalf("%d destinations, want %d", got, benchServices)
		}
		if ks := s.GetDestinations()[0].GetSpec().GetKubeService(); len(ks.GetSubsets()["version"].GetValues()) != 2 || len(ks.GetEndpointSubsets()[0].GetEndpoints()) != 2*benchPodsPerDep {
			b.Fatalf("first destination is incomplete: %v", ks)
		}
		b.ReportMetric(float64(synced.Sub(start).Milliseconds()), "list+sync-ms")
		b.ReportMetric(float64(done.Sub(synced).Milliseconds()), "sync-to-snapshot-ms")
		b.ReportMetric(float64(rebuild.Milliseconds()), "rebuild-ms")
		b.ReportMetric(float64(proto.Size(s))/(1<<20), "snapshot-MiB")
		s = nil
		caches := heapInUse()
		if path := os.Getenv("MESHPLANE_BENCH_HEAP_PROFILE"); path != "" {
			writeHeapProfile(b, path)
		}
		b.ReportMetric(float64(after-before)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(caches-before)/(1<<20), "cache-heap-MiB")
		runtime.KeepAlive(r)
		cancel()
		b.StartTimer()
	}
}
