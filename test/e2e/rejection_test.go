package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	translation "github.com/meshplane/meshplane/services/translation/service"
	"github.com/meshplane/meshplane/test/e2e/harness"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rejectedPolicy is the TrafficPolicy whose VirtualService the test
// translator breaks.
const rejectedPolicy = "reviews-timeout"

// breakVirtualService is the test translator's hook: in east, the
// VirtualService translated from rejectedPolicy gets spec.hosts as a
// string, which the CRD's schema refuses (it is a list).
func breakVirtualService(cluster string, out *snapshotv1.OutputSnapshot) {
	if cluster != "east" {
		return
	}
	for _, o := range out.GetObjects() {
		if o.GetKind() != "VirtualService" || !strings.Contains(o.GetAnnotations()[snapshots.AnnotationParents], rejectedPolicy) {
			continue
		}
		var spec map[string]any
		if err := json.Unmarshal(o.GetSpec(), &spec); err != nil {
			panic(err) // translation wrote it; it is JSON
		}
		spec["hosts"] = "not-a-list"
		o.Spec, _ = json.Marshal(spec)
	}
}

// An object the API server rejects: the agent acks it REJECTED with the
// API server's message and applies everything else; the policy it came
// from is FAILED in its status, with that message, in the workload
// cluster; the agent retries the apply, and the loop settles: the output
// version stays put and the objects that applied are not written again.
//
// Translation runs in the test process, on the plane's address and Redis,
// with a test-only hook that breaks one VirtualService; registration,
// ingest, distribution and the agent are processes.
func TestRejectedObjectFailsPolicy(t *testing.T) {
	harness.RequireE2E(t)
	ctx := t.Context()
	east := kubetest.Start(t, kubetest.Options{Name: "east"})
	redis := redistest.Start(t)
	dir := testDir(t)
	p, tokens := startFaultPlane(t, dir, redis.Addr(), "east")
	// The translation process gives way to the test translator on the
	// same address; no agent has pushed yet, so it published nothing.
	p.down("translation", false)
	delete(p.procs, "translation")
	p.relisten("translation")
	serveTestTranslator(t, p, redis.Addr())

	if err := east.ApplyYAML(ctx, harness.Bookinfo(east.Name)); err != nil {
		t.Fatal(err)
	}
	ns := harness.BookinfoNamespace
	if err := east.ApplyYAML(ctx, []byte(fmt.Sprintf(`
apiVersion: networking.meshplane.dev/v1
kind: TrafficPolicy
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  destinationSelector:
  - kubeServiceRefs:
      services: [{name: reviews, namespace: %[1]s}]
  policy: {requestTimeout: 2s}
`, ns, rejectedPolicy))); err != nil {
		t.Fatal(err)
	}
	_, agentAdmin := p.startAgent(east, tokens["east"])

	// The other objects of the snapshot are applied.
	for _, svc := range harness.BookinfoServices {
		waitDR(t, ctx, east, svc, p.running())
	}

	// The ack names the VirtualService as REJECTED with the API server's
	// message.
	acks := snapstore.NewRedisAcks(redis.Client(t), snapshots.DefaultInstall)
	var rejected *snapshotv1.ApplyResult
	err := harness.Wait(ctx, 60*time.Second, "an ack with the VirtualService rejected", func(ctx context.Context) (bool, error) {
		a, err := acks.GetAck(ctx, "east")
		if err != nil {
			return false, err
		}
		for _, r := range a.Results {
			if r.GetRef().GetKind() == "VirtualService" && r.GetRef().GetName() == "reviews" && r.GetOutcome() == snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED {
				rejected = r
				return true, nil
			}
		}
		return false, fmt.Errorf("ack of %s: %v", a.Version, a.Results)
	}, p.running()...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rejected.GetError(), "hosts") {
		t.Errorf("rejection message %q does not name spec.hosts", rejected.GetError())
	}
	for _, svc := range harness.BookinfoServices {
		if _, err := east.Dynamic().Resource(destinationRules).Namespace(ns).Get(ctx, svc, metav1.GetOptions{}); err != nil {
			t.Errorf("DestinationRule %s of the same snapshot: %v", svc, err)
		}
	}

	// The policy's status in east says FAILED, with the message.
	var status map[string]any
	err = harness.Wait(ctx, 60*time.Second, "TrafficPolicy "+rejectedPolicy+" FAILED", func(ctx context.Context) (bool, error) {
		u, err := east.Dynamic().Resource(trafficPolicies).Namespace(ns).Get(ctx, rejectedPolicy, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		state, _, _ := unstructured.NestedString(u.Object, "status", "state")
		errs, _, _ := unstructured.NestedStringSlice(u.Object, "status", "errors")
		status, _, _ = unstructured.NestedMap(u.Object, "status")
		joined := strings.Join(errs, "\n")
		return state == "FAILED" && strings.Contains(joined, "could not be applied") && strings.Contains(joined, rejected.GetError()),
			fmt.Errorf("status = %v", u.Object["status"])
	}, p.running()...)
	if err != nil {
		t.Fatal(err)
	}
	dest, _, _ := unstructured.NestedMap(status, "destinations", "reviews."+ns+".east")
	if dest["state"] != "FAILED" {
		t.Errorf("status.destinations[reviews.%s.east] = %v, want FAILED", ns, dest)
	}

	// The agent retries the partial apply. Each retry acks the same
	// version with the same rejection, which changes nothing: the output
	// version stays, and the objects that applied keep their
	// resourceVersion (nothing was written again).
	outputs := snapstore.NewRedis(redis.Client(t), snapshots.DefaultInstall, snapshots.Outputs, func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	version, err := outputs.Version(ctx, "east")
	if err != nil {
		t.Fatal(err)
	}
	err = harness.Wait(ctx, 30*time.Second, "the agent to ack the output with the FAILED status", func(ctx context.Context) (bool, error) {
		a, err := acks.GetAck(ctx, "east")
		return err == nil && a.Version == version, fmt.Errorf("acked %s, output %s (%v)", a.Version, version, err)
	}, p.running()...)
	if err != nil {
		t.Fatal(err)
	}
	before := resourceVersions(t, ctx, east)
	failedSample := `meshplane_agent_objects_total{outcome="failed"}`
	failed0 := metricInt(t, ctx, agentAdmin, failedSample)
	err = harness.Wait(ctx, 60*time.Second, "two more apply attempts", func(ctx context.Context) (bool, error) {
		n := metricInt(t, ctx, agentAdmin, failedSample)
		return n >= failed0+2, fmt.Errorf("%s = %d, was %d", failedSample, n, failed0)
	}, p.running()...)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := outputs.Version(ctx, "east"); err != nil || v != version {
		t.Errorf("output version moved from %s to %s (%v) while the agent retried: the status loop did not settle", version, v, err)
	}
	if a, err := acks.GetAck(ctx, "east"); err != nil || a.Version != version {
		t.Errorf("latest ack is of %s (%v), want %s", a.Version, err, version)
	}
	sameVersions(t, "across the retries", before, resourceVersions(t, ctx, east))
}

// serveTestTranslator runs the translation service in this process, with
// breakVirtualService as its test hook, on p's translation sockets.
func serveTestTranslator(t *testing.T, p *faultPlane, redisAddr string) {
	t.Helper()
	log := slog.New(slog.NewJSONHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := translation.DefaultConfig()
	cfg.Redis.Addrs = redisAddr
	cfg.Debounce = 50 * time.Millisecond
	svc, err := translation.New(cfg, translation.WithLogger(log), translation.WithTestOutputHook(breakVirtualService))
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := p.pki.ServiceCert("translation")
	if err != nil {
		t.Fatal(err)
	}
	so := platform.NewServerOptions()
	so.TrustDomain = p.pki.TrustDomain
	so.TLS = platform.TLSOptions{CertFile: cert, KeyFile: key, ClientCAFile: p.pki.RootFile(), ClientAuth: platform.ClientAuthRequire}
	srv, err := platform.NewServer(so, log, platform.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	svc.Mount(srv)
	srv.SetReady(true)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 3)
	ln := p.lns["translation"]
	go func() { errs <- svc.Run(ctx) }()
	go func() { errs <- srv.Serve(ctx, ln[0]) }()
	go func() { errs <- srv.ServeAdmin(ctx, ln[1]) }()
	t.Cleanup(func() {
		cancel()
		for range 3 {
			if err := <-errs; err != nil {
				t.Errorf("test translator: %v", err)
			}
		}
	})
}

func metricInt(t *testing.T, ctx context.Context, admin, sample string) int {
	t.Helper()
	v, err := metric(ctx, admin, sample)
	if err != nil {
		t.Fatal(err)
	}
	if v == "" {
		return 0
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("%s = %q: %v", sample, v, err)
	}
	return int(n)
}
