package kubetest_test

import (
	"context"
	"fmt"
	"log"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
)

// A demo program starts a cluster without package testing and hands its
// kubeconfig to kubectl or to the services it runs.
func ExampleStartCluster() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kubetest.StartCluster(ctx, kubetest.Options{Name: "mgmt", LogDir: "/tmp/meshplane-demo-logs"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Stop()
	fmt.Println("KUBECONFIG=" + c.Kubeconfig())
}

// In a test, Start stops the cluster in t.Cleanup. StartMany starts several
// in parallel.
func ExampleStartMany() {
	var t testing.TB // the test's *testing.T
	clusters := kubetest.StartMany(t, kubetest.Options{Name: "east"}, kubetest.Options{Name: "west"})
	east := clusters[0]
	if err := east.ApplyYAML(t.Context(), []byte(`
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec: {host: reviews}
`)); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, error) {
		_, err := east.Istio().NetworkingV1().DestinationRules("default").Get(ctx, "reviews", metav1.GetOptions{})
		return err == nil, nil
	}, "DestinationRule reviews")
}
