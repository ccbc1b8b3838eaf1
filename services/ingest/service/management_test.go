package service_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/ingest/service"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var tpGVR = schema.GroupVersionResource{Group: "networking.meshplane.dev", Version: "v1", Resource: "trafficpolicies"}

// TestManagementClusterResources runs ingest against a real kube-apiserver
// as the management cluster and a real Redis: a TrafficPolicy applied there
// becomes part of the management cluster's stored input and translation is
// told; its deletion removes it; a status that translation puts in the
// management cluster's output lands on the resource.
func TestManagementClusterResources(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Name: "mgmt"})
	r := redistest.Start(t)
	ctx := t.Context()
	if _, err := c.Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bookinfo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cfg := memoryConfig()
	cfg.Redis.Addrs = r.Addr()
	cfg.Install = "prod"
	cfg.Kubeconfig = c.Kubeconfig()
	cfg.WatchManagement = "true"
	cfg.ManagementDebounce = 20 * time.Millisecond
	e := newEnv(t, cfg)
	newInput := func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} }
	inputs := snapstore.NewRedis(r.Client(t), "prod", snapshots.Inputs, newInput)
	stored := func() (*snapshotv1.InputSnapshot, error) {
		entry, err := inputs.Get(ctx, "prod")
		if err != nil {
			return nil, err
		}
		return entry.Value, nil
	}
	policies := func(s *snapshotv1.InputSnapshot) []string {
		var names []string
		for _, tp := range s.GetTrafficPolicies() {
			names = append(names, tp.GetMetadata().GetNamespace()+"/"+tp.GetMetadata().GetName())
		}
		return names
	}

	// The management cluster is an input (named by the install) even
	// before it holds a resource, and counts as connected here.
	kubetest.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		_, err := stored()
		if errors.Is(err, snapshots.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}, "the management cluster's input was never stored")
	list, err := e.client(t, translation, nil).ListClusters(ctx, connect.NewRequest(&ingestv1.ListClustersRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if cs := list.Msg.GetClusters(); len(cs) != 1 || cs[0].GetCluster() != "prod" || !cs[0].GetConnected() || cs[0].GetReplica() != "ingest-0" {
		t.Fatalf("connectivity = %v, want the management cluster prod connected to ingest-0", cs)
	}

	// An agent registered under the management cluster's name may not
	// push for it: two sources would undo each other's input.
	impostor := e.client(t, "spiffe://"+td+"/cluster/prod", nil).Push(ctx)
	if err := impostor.Send(&ingestv1.PushRequest{Snapshot: sealed("prod", "reviews")}); err != nil {
		t.Fatal(err)
	}
	if _, err := impostor.Receive(); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("push for the management cluster's name: %v, want PermissionDenied", err)
	}
	_ = impostor.CloseRequest()
	_ = impostor.CloseResponse()

	if err := c.ApplyYAML(ctx, []byte(`
apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: retries, namespace: bookinfo}
spec:
  policy:
    retries: {attempts: 3}
`)); err != nil {
		t.Fatal(err)
	}
	var withPolicy *snapshotv1.InputSnapshot
	kubetest.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		s, err := stored()
		if err != nil {
			return false, err
		}
		withPolicy = s
		return slices.Equal(policies(s), []string{"bookinfo/retries"}), nil
	}, "the TrafficPolicy never reached the management cluster's stored input")
	tp := withPolicy.GetTrafficPolicies()[0]
	if tp.GetMetadata().GetCluster() != "prod" || tp.GetSpec().GetPolicy().GetRetries().GetAttempts() != 3 {
		t.Fatalf("stored TrafficPolicy = %v, want cluster prod and 3 attempts", tp)
	}
	if withPolicy.GetVersion() != snapshots.InputVersion(withPolicy) {
		t.Fatalf("stored version %s is not the content hash", withPolicy.GetVersion())
	}
	if !slices.Contains(e.notifier.notices("prod"), withPolicy.GetVersion()) {
		t.Fatalf("translation was not told of version %s: %v", withPolicy.GetVersion(), e.notifier.notices("prod"))
	}

	// Translation's status for the policy, in the management cluster's
	// output, lands on the resource.
	dyn := c.Dynamic().Resource(tpGVR).Namespace("bookinfo")
	cur, err := dyn.Get(ctx, "retries", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gen := cur.GetGeneration()
	outputs := snapstore.NewRedis(r.Client(t), "prod", snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	out := &snapshotv1.OutputSnapshot{Cluster: "prod", Statuses: []*snapshotv1.ResourceStatus{{
		ApiVersion: "networking.meshplane.dev/v1", Kind: "TrafficPolicy", Namespace: "bookinfo", Name: "retries",
		ObservedGeneration: gen, Status: []byte(`{"state":"ACCEPTED","observedGeneration":` + strconv.FormatInt(gen, 10) + `}`),
	}}}
	if err := outputs.Put(ctx, "prod", snapshots.SealOutput(out), out); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		u, err := dyn.Get(ctx, "retries", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		state, _, _ := unstructured.NestedString(u.Object, "status", "state")
		return state == "ACCEPTED", nil
	}, "translation's status never reached the TrafficPolicy")
	// Writing the status changes no spec, so no new input is pushed.
	if s, err := stored(); err != nil || s.GetVersion() != withPolicy.GetVersion() {
		t.Fatalf("the status write changed the stored input: %v, %v", s.GetVersion(), err)
	}

	if err := dyn.Delete(ctx, "retries", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		s, err := stored()
		if err != nil {
			return false, err
		}
		return len(s.GetTrafficPolicies()) == 0, nil
	}, "the deleted TrafficPolicy stayed in the management cluster's input")
}

// TestManagementClusterTwoReplicas: two replicas reading the same
// management cluster store one version and tell translation once per
// content, not once per replica.
func TestManagementClusterTwoReplicas(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{Name: "mgmt"})
	r := redistest.Start(t)
	ctx := t.Context()
	if err := c.ApplyYAML(ctx, []byte(`
apiVersion: v1
kind: Namespace
metadata: {name: bookinfo}
---
apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: retries, namespace: bookinfo}
spec: {}
`)); err != nil {
		t.Fatal(err)
	}
	notifier := &recordingNotifier{}
	newInput := func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} }
	var svcs []*service.Service
	for _, replica := range []string{"ingest-0", "ingest-1"} {
		cfg := memoryConfig()
		cfg.Replica = replica
		cfg.Redis.Addrs = r.Addr()
		cfg.Kubeconfig = c.Kubeconfig()
		cfg.WatchManagement = "true"
		cfg.ManagementDebounce = 20 * time.Millisecond
		svc, err := service.New(cfg, service.WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil)).With("replica", replica)), service.WithNotifier(notifier))
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, len(svcs))
	for _, svc := range svcs {
		go func() {
			_ = svc.Run(runCtx)
			done <- struct{}{}
		}()
	}
	t.Cleanup(func() {
		cancel()
		for range svcs {
			<-done
		}
	})
	inputs := snapstore.NewRedis(r.Client(t), snapshots.DefaultInstall, snapshots.Inputs, newInput)
	var version string
	kubetest.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		entry, err := inputs.Get(ctx, snapshots.DefaultInstall)
		if errors.Is(err, snapshots.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		version = entry.Version
		return len(entry.Value.GetTrafficPolicies()) == 1, nil
	}, "the management cluster's input was never stored")
	// Both replicas have pushed once they report the cluster with the
	// version. A replica that finds the version stored does not notify;
	// two that push at the same instant may both do, with one version.
	for i, svc := range svcs {
		kubetest.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
			for _, st := range svc.Clusters() {
				if st.Cluster == snapshots.DefaultInstall && st.Version == version {
					return true, nil
				}
			}
			return false, nil
		}, "replica %d never pushed the management cluster's input", i)
	}
	got := notifier.notices(snapshots.DefaultInstall)
	if len(got) == 0 || len(got) > 2 || slices.ContainsFunc(got, func(v string) bool { return v != version }) {
		t.Fatalf("translation was told %v, want %s once per replica at most", got, version)
	}
}

// WatchesManagement is the decision the all-in-one process passes on to
// translation: "auto" reads the management cluster when a kubeconfig is
// given or the process runs in a pod.
func TestWatchesManagement(t *testing.T) {
	for _, tc := range []struct {
		mode, kubeconfig, podHost string
		want                      bool
	}{
		{"auto", "", "", false},
		{"auto", "/etc/kubeconfig", "", true},
		{"auto", "", "10.96.0.1", true},
		{"true", "", "", true},
		{"false", "/etc/kubeconfig", "10.96.0.1", false},
	} {
		t.Setenv("KUBERNETES_SERVICE_HOST", tc.podHost)
		cfg := service.DefaultConfig()
		cfg.WatchManagement, cfg.Kubeconfig = tc.mode, tc.kubeconfig
		if got := cfg.WatchesManagement(); got != tc.want {
			t.Errorf("--watch-management-cluster=%s, kubeconfig %q, KUBERNETES_SERVICE_HOST %q: WatchesManagement() = %v, want %v", tc.mode, tc.kubeconfig, tc.podHost, got, tc.want)
		}
	}
	cfg := service.DefaultConfig()
	if got := cfg.ManagementClusterName(); got != cfg.Install {
		t.Errorf("ManagementClusterName() = %q, want the install name %q", got, cfg.Install)
	}
}
