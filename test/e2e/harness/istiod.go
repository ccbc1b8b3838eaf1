package harness

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/meshplane/meshplane/libs/kube/istiotest"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Network is the network of a workload cluster's mesh, as EastWestGateway
// labels its gateway and IstiodOptions tells istiod.
func Network(cluster string) string { return "network-" + cluster }

// GatewayIP is the load balancer address FederationReady gives the
// east-west gateway of the i-th workload cluster: 203.0.113.10+i, in a
// documentation range no route leads to.
func GatewayIP(i int) string { return fmt.Sprintf("203.0.113.%d", 10+i) }

// FederationReady gives workload cluster c what a mesh needs before
// translation federates it: istiod's objects (IstioControlPlane, for
// discovery) with trust domain c.Name+".local", and an east-west gateway
// on c's Network whose Service's load balancer has GatewayIP(i), as a
// cloud's controller would write it.
func FederationReady(ctx context.Context, c *kubetest.Cluster, i int) error {
	for _, y := range [][]byte{IstioControlPlane("", "1.24.0", c.Name+".local"), EastWestGateway(Network(c.Name))} {
		if err := c.ApplyYAML(ctx, y); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	svcs := c.Clientset().CoreV1().Services(IstioNamespace)
	svc, err := svcs.Get(ctx, "istio-eastwestgateway", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("%s: the east-west gateway: %w", c.Name, err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: GatewayIP(i)}}
	if _, err := svcs.UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("%s: the east-west gateway's address: %w", c.Name, err)
	}
	return nil
}

// IstiodOptions are the options of a real istiod for workload cluster c
// whose mesh has trustDomain (what IstioControlPlane's mesh config says):
// cluster ID c's name, c's Network, and any log line that rejects or
// ignores config failing the test.
func IstiodOptions(c *kubetest.Cluster, trustDomain string) istiotest.Options {
	return istiotest.Options{TrustDomain: trustDomain, ClusterID: c.Name, Network: Network(c.Name), FailOnRejections: true}
}

// StartIstiod runs a real istiod (pilot-discovery) against c's API
// server, with IstiodOptions, until the test ends; at cleanup the test
// fails when istiod's log rejects or ignores config (istiotest.Rejections).
// Call RunPods first, so that istiod finds the pods proxies claim to be.
func StartIstiod(t testing.TB, c *kubetest.Cluster, trustDomain string) *istiotest.Istiod {
	t.Helper()
	return istiotest.Start(t, c, IstiodOptions(c, trustDomain))
}

// RunPods does for the pods of namespace in c what a scheduler and
// kubelets would: each pod without an IP gets one, 10.<subnet>.0.<n> in
// the order of their names, and is Running and Ready. istiod needs it: it
// finds a proxy's pod by its IP, and the pod's Services by it, to build
// the inbound listener. Agents' discovery reads the IPs too.
func RunPods(ctx context.Context, c *kubetest.Cluster, namespace string, subnet int) error {
	pods := c.Clientset().CoreV1().Pods(namespace)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list the pods of %s: %w", c.Name, err)
	}
	items := list.Items
	slices.SortFunc(items, func(a, b corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
	used := map[string]bool{}
	for _, p := range items {
		used[p.Status.PodIP] = true
	}
	next := 10
	for _, p := range items {
		if p.Status.PodIP != "" {
			continue
		}
		ip := ""
		for ; ip == "" || used[ip]; next++ {
			if next > 250 {
				return fmt.Errorf("%s: more pods than RunPods has addresses for in 10.%d.0.0/24", c.Name, subnet)
			}
			ip = fmt.Sprintf("10.%d.0.%d", subnet, next)
		}
		used[ip] = true
		p.Status = corev1.PodStatus{
			Phase:  corev1.PodRunning,
			PodIP:  ip,
			PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
			},
		}
		if _, err := pods.UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("set the status of pod %s/%s in %s: %w", p.Namespace, p.Name, c.Name, err)
		}
	}
	return nil
}

// Sidecar is the proxy of pod namespace/name, read with cs, as its Envoy
// would present itself to istiod: its IP, labels and service account.
func Sidecar(ctx context.Context, cs kubernetes.Interface, namespace, name string) (istiotest.Proxy, error) {
	p, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return istiotest.Proxy{}, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	if p.Status.PodIP == "" {
		return istiotest.Proxy{}, fmt.Errorf("pod %s/%s has no IP (in the harness, RunPods gives it one)", namespace, name)
	}
	return istiotest.Proxy{IP: p.Status.PodIP, Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, ServiceAccount: p.Spec.ServiceAccountName}, nil
}
