package service_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
	"github.com/meshplane/meshplane/services/ingest/service"
	"google.golang.org/protobuf/proto"
)

const (
	benchClusters = 100
	benchServices = 100
)

// benchSnapshot is a sealed input snapshot of cluster as discovery would
// push it: one revisioned Istio mesh, and services Services, each with a
// v1 and a v2 workload, one http port and four endpoints. generation
// changes the content (a ready-pod count), so that successive pushes are
// real store writes.
func benchSnapshot(cluster string, services, generation int) *snapshotv1.InputSnapshot {
	meshRef := &commonv1.ObjectRef{Name: "istiod-1-24-istio-system-" + cluster, Namespace: "meshplane"}
	s := &snapshotv1.InputSnapshot{
		Cluster: cluster,
		Agent:   &snapshotv1.AgentInfo{Version: "v1.2.3", Replica: "agent-0", Namespace: "meshplane"},
		Meshes: []*discoveryv1.Mesh{{
			Metadata: &commonv1.ObjectMeta{Name: meshRef.GetName(), Namespace: meshRef.GetNamespace(), Cluster: cluster},
			Spec: &discoveryv1.MeshSpec{Type: &discoveryv1.MeshSpec_Istio_{Istio: &discoveryv1.MeshSpec_Istio{
				Installation:         &discoveryv1.MeshSpec_Installation{Namespace: "istio-system", Cluster: cluster, Version: "1.24.2", PodLabels: map[string]string{"app": "istiod", "istio.io/rev": "1-24"}},
				TrustDomain:          cluster + ".local",
				IstiodServiceAccount: "istiod-1-24",
			}}},
		}},
	}
	for i := range services {
		name := fmt.Sprintf("svc-%03d", i)
		ns := fmt.Sprintf("team-%d", i%10)
		subsets := map[string]*discoveryv1.DestinationSpec_KubeService_Subset{"version": {Values: []string{"v1", "v2"}}}
		var endpoints []*discoveryv1.DestinationSpec_KubeService_EndpointsSubset_Endpoint
		for _, v := range []string{"v1", "v2"} {
			ready := uint32(2)
			if v == "v1" {
				ready += uint32(generation)
			}
			s.Workloads = append(s.Workloads, &discoveryv1.Workload{
				Metadata: &commonv1.ObjectMeta{Name: name + "-" + v + "-" + ns + "-" + cluster, Namespace: "meshplane", Cluster: cluster},
				Spec: &discoveryv1.WorkloadSpec{
					Mesh: meshRef,
					Type: &discoveryv1.WorkloadSpec_Kubernetes_{Kubernetes: &discoveryv1.WorkloadSpec_Kubernetes{
						Controller:         &commonv1.ClusterObjectRef{Name: name + "-" + v, Namespace: ns, Cluster: cluster},
						ControllerKind:     "Deployment",
						PodLabels:          map[string]string{"app": name, "version": v},
						ServiceAccountName: name,
						ReadyPods:          ready,
					}},
				},
			})
			for e := range 2 {
				endpoints = append(endpoints, &discoveryv1.DestinationSpec_KubeService_EndpointsSubset_Endpoint{
					IpAddress:   fmt.Sprintf("10.%d.%d.%d", i/250, i%250, len(endpoints)+e),
					Labels:      map[string]string{"app": name, "version": v},
					SubLocality: &discoveryv1.DestinationSpec_KubeService_SubLocality{Zone: "zone-a"},
				})
			}
		}
		s.Destinations = append(s.Destinations, &discoveryv1.Destination{
			Metadata: &commonv1.ObjectMeta{Name: name + "-" + ns + "-" + cluster, Namespace: "meshplane", Cluster: cluster},
			Spec: &discoveryv1.DestinationSpec{
				Mesh: meshRef,
				Type: &discoveryv1.DestinationSpec_KubeService_{KubeService: &discoveryv1.DestinationSpec_KubeService{
					Ref:                    &commonv1.ClusterObjectRef{Name: name, Namespace: ns, Cluster: cluster},
					WorkloadSelectorLabels: map[string]string{"app": name},
					Labels:                 map[string]string{"app": name},
					Ports:                  []*discoveryv1.DestinationSpec_KubeService_KubeServicePort{{Port: 9080, Name: "http", Protocol: "TCP", AppProtocol: "http", TargetPortNumber: 9080}},
					Subsets:                subsets,
					Region:                 "eu-west-1",
					EndpointSubsets: []*discoveryv1.DestinationSpec_KubeService_EndpointsSubset{{
						Endpoints: endpoints,
						Ports:     []*discoveryv1.DestinationSpec_KubeService_EndpointsSubset_EndpointPort{{Port: 9080, Name: "http", Protocol: "TCP", AppProtocol: "http"}},
					}},
					ServiceType: discoveryv1.DestinationSpec_KubeService_CLUSTER_IP,
					Hostname:    name + "." + ns + ".svc.cluster.local",
				}},
			},
		})
	}
	snapshots.SealInput(s)
	return s
}

// benchInputs returns, per cluster, two snapshots of different content:
// pushing them in turn makes every push a new version and a Redis write.
func benchInputs(b *testing.B) (clusters []string, inputs map[string][2]*snapshotv1.InputSnapshot) {
	inputs = map[string][2]*snapshotv1.InputSnapshot{}
	for c := range benchClusters {
		cluster := fmt.Sprintf("c%03d", c)
		clusters = append(clusters, cluster)
		inputs[cluster] = [2]*snapshotv1.InputSnapshot{benchSnapshot(cluster, benchServices, 0), benchSnapshot(cluster, benchServices, 1)}
	}
	return clusters, inputs
}

type discardNotifier struct{}

func (discardNotifier) Notify(context.Context, string, string, []byte) error {
	return nil
}

// runPushers runs one pusher per cluster until b.N pushes are done between
// them, and reports pushes/s. push pushes the snapshot for the cluster's
// n-th push; n = -1 is a warm-up push before the timer starts.
func runPushers(b *testing.B, clusters []string, snapshotBytes int, push func(worker int, n int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(clusters))
	// Warm up outside the timer: each cluster's stream (TLS handshake
	// included) and stored snapshot. n = -1 pushes the snapshot that
	// the first timed push (n = 0) then changes.
	for w := range clusters {
		wg.Go(func() {
			if err := push(w, -1); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	b.ResetTimer()
	start := time.Now()
	for w := range clusters {
		wg.Go(func() {
			for n := 0; ; n++ {
				if next.Add(1) > int64(b.N) {
					return
				}
				if err := push(w, n); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pushes/s")
	b.ReportMetric(float64(snapshotBytes), "B/snapshot")
}

// BenchmarkPushToRedis measures input snapshot pushes a second into a real
// Redis on loopback (DESIGN.md section 8: at least 2,000/s), with 100
// clusters pushing 100-service snapshots at once. Every push changes the
// cluster's content, so each one is checked (content hash), written to
// Redis and announced.
//
//   - app: through the ingest use case and the same write-through Redis
//     store the service builds, with the encoding an agent sends;
//   - connect: through the whole service, one mTLS Connect push stream per
//     cluster, as the agent pushes: EncodedPushRequest with the canonical
//     encoding made when the snapshot was sealed;
//   - connect-typed: the same with the generated client's PushRequest, as
//     any other protobuf client sends it (maps in random order, so ingest
//     decodes, checks and encodes the snapshot again): the baseline.
func BenchmarkPushToRedis(b *testing.B) {
	clusters, inputs := benchInputs(b)
	encoded := map[string][2][]byte{}
	for c, in := range inputs {
		var e [2][]byte
		for i, s := range in {
			enc, err := snapshots.EncodeInput(s)
			if err != nil {
				b.Fatal(err)
			}
			e[i] = enc.Data
		}
		encoded[c] = e
	}
	size := proto.Size(inputs[clusters[0]][0])
	discard := slog.New(slog.DiscardHandler)

	b.Run("app", func(b *testing.B) {
		r := redistest.Start(b)
		newInput := func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} }
		store := snapstore.NewWriteThrough(
			snapstore.NewRedis(r.Client(b), snapshots.DefaultInstall, snapshots.Inputs, newInput),
			snapstore.NewMemory(newInput), discard)
		in := app.NewIngestor(store, discardNotifier{}, nil, discard, "bench")
		ctx := b.Context()
		runPushers(b, clusters, size, func(w, n int) error {
			cluster := clusters[w]
			want := inputs[cluster][(n+2)%2].GetVersion()
			version, err := in.PushFromAgent(ctx, cluster, encoded[cluster][(n+2)%2])
			if err == nil && version != want {
				err = fmt.Errorf("push stored %s, want %s", version, want)
			}
			return err
		})
	})

	// run pushes through the whole service over one stream per cluster;
	// open opens a cluster's stream and returns a function that sends its
	// n-th snapshot and returns the version stored.
	run := func(b *testing.B, open func(e *env, ctx context.Context, cluster string) func(n int) (string, error)) {
		r := redistest.Start(b)
		cfg := memoryConfig()
		cfg.Redis.Addrs = r.Addr()
		e := newEnv(b, cfg, service.WithLogger(discard), service.WithNotifier(discardNotifier{}))
		ctx, cancel := context.WithCancel(b.Context())
		defer cancel()
		pushes := make([]func(int) (string, error), len(clusters))
		for w, cluster := range clusters {
			pushes[w] = open(e, ctx, cluster)
		}
		runPushers(b, clusters, size, func(w, n int) error {
			cluster := clusters[w]
			stored, err := pushes[w](n)
			if err != nil {
				return err
			}
			if want := inputs[cluster][(n+2)%2].GetVersion(); stored != want {
				return fmt.Errorf("push stored %s, want %s", stored, want)
			}
			return nil
		})
	}

	b.Run("connect", func(b *testing.B) {
		run(b, func(e *env, ctx context.Context, cluster string) func(int) (string, error) {
			stream := e.encodedClient(b, "spiffe://"+td+"/cluster/"+cluster).CallBidiStream(ctx)
			b.Cleanup(func() { _, _ = stream.CloseRequest(), stream.CloseResponse() })
			return func(n int) (string, error) {
				return sendAndReceive(stream, &ingestv1.EncodedPushRequest{Snapshot: encoded[cluster][(n+2)%2]})
			}
		})
	})

	b.Run("connect-typed", func(b *testing.B) {
		run(b, func(e *env, ctx context.Context, cluster string) func(int) (string, error) {
			stream := e.client(b, "spiffe://"+td+"/cluster/"+cluster, nil).Push(ctx)
			b.Cleanup(func() { _, _ = stream.CloseRequest(), stream.CloseResponse() })
			return func(n int) (string, error) {
				return sendAndReceive(stream, &ingestv1.PushRequest{Snapshot: inputs[cluster][(n+2)%2]})
			}
		})
	})
}

// sendAndReceive sends req on a push stream and returns the version that
// ingest acknowledges.
func sendAndReceive[Req any](stream *connect.BidiStreamForClient[Req, ingestv1.PushResponse], req *Req) (string, error) {
	// A Send that fails with io.EOF means the server has already ended the
	// stream: its status is what Receive returns (connect-go's contract).
	if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("send: %w", err)
	}
	res, err := stream.Receive()
	if err != nil {
		return "", fmt.Errorf("receive: %w", err)
	}
	return res.GetStoredVersion(), nil
}
