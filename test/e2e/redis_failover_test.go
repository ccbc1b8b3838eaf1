package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/test/e2e/harness"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The plane (four processes) on Sentinel and on Redis Cluster: the
// primary that holds the install's keys is killed (SIGKILL) while agents
// push and acknowledge and a cluster is deregistered; a replica takes
// over, and the plane carries on: every edit reaches its agent, the
// deregistration is not lost, and the revoked agent is refused by ingest
// and distribution. The killed node then comes back empty, as a replica.
func TestPlaneRidesRedisFailover(t *testing.T) {
	harness.RequireE2E(t)
	for _, topology := range []redistest.Topology{redistest.Sentinel, redistest.Cluster} {
		t.Run(string(topology), func(t *testing.T) { ridesFailover(t, topology) })
	}
}

// ownPolicyInput is a cluster's input with a TrafficPolicy of its own: a
// request timeout on its own destinations.
func ownPolicyInput(cluster string, timeout time.Duration) *snapshotv1.InputSnapshot {
	in := fanOutInput(cluster, 0)
	in.TrafficPolicies = []*networkingv1.TrafficPolicy{{
		Metadata: &commonv1.ObjectMeta{Name: "timeout", Namespace: "default", Cluster: cluster, Generation: int64(timeout.Seconds())},
		Spec:     &networkingv1.TrafficPolicySpec{Policy: &networkingv1.TrafficPolicySpec_Policy{RequestTimeout: durationpb.New(timeout)}},
	}}
	snapshots.SealInput(in)
	return in
}

func ridesFailover(t *testing.T, topology redistest.Topology) {
	ctx := t.Context()
	d := redistest.StartDeployment(t, topology)
	clusters := []string{"c000", "c001", "c002"}
	// On Sentinel every service waits for a replica. On a Cluster with
	// one replica per shard, the promoted replica has none until the
	// killed node returns: only registration waits, so that the other
	// services carry on meanwhile (operations.md: the price of waiting).
	var waiting []string
	if topology == redistest.Cluster {
		waiting = []string{"registration"}
	}
	plane, tokens, err := harness.StartPlane(ctx, harness.PlaneOptions{
		BinDir: binDir, Dir: testDir(t), RedisAddr: strings.Join(d.Addrs(), ","), RedisMasterName: d.MasterName(),
		RegistrationRedis: true, RedisWaitReplicas: 1, RedisWaitServices: waiting, Clusters: append(slices.Clone(clusters), "gone"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	f := &fanOut{plane: plane, procs: plane.Procs}
	timeout := time.Second
	f.follow(t, clusters, func(c string) *snapshotv1.InputSnapshot { return ownPolicyInput(c, timeout) })
	f.awaitAll(t, func(s *snapshotv1.OutputSnapshot) bool { return hasTimeout(s, timeout) })

	// A cluster that registers through registration, and is admitted.
	var gone *harness.SimAgent
	if err := harness.Wait(ctx, 30*time.Second, "cluster gone registering", func(ctx context.Context) (bool, error) {
		gone, err = plane.RegisterSimAgent(ctx, "gone", tokens["gone"])
		return err == nil, err
	}, f.procs...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gone.Close)
	if err := gone.Push(ownPolicyInput("gone", timeout)); err != nil {
		t.Fatalf("the registered cluster's push before its deregistration: %v", err)
	}

	victim, err := installPrimary(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	victim.Kill()

	// While the replica takes over: an edit from every cluster, and the
	// deregistration, retried until registration reports it done, which
	// it does once a replica holds it.
	cc := clusterClient(t, plane)
	timeout = 2 * time.Second
	f.pushAll(t, func(c string) *snapshotv1.InputSnapshot { return ownPolicyInput(c, timeout) })
	if topology == redistest.Sentinel {
		// The new primary has the other replica.
		deregister(t, cc, plane)
	}
	f.awaitAll(t, func(s *snapshotv1.OutputSnapshot) bool { return hasTimeout(s, timeout) })
	if topology == redistest.Cluster {
		// The promoted replica has no replica of its own until the killed
		// node returns: the deregistration is refused as not durable, and
		// the operator told to retry.
		_, err := cc.DeregisterCluster(ctx, connect.NewRequest(&registrationv1.DeregisterClusterRequest{Name: "gone"}))
		if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "replicate") {
			t.Fatalf("deregistering with no replica to hold it: %v, want Unavailable saying the write was not replicated", err)
		}
	}

	// The killed node returns empty, as a replica of the new primary.
	if err := victim.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if topology == redistest.Cluster {
		deregister(t, cc, plane)
	}
	timeout = 3 * time.Second
	f.pushAll(t, func(c string) *snapshotv1.InputSnapshot { return ownPolicyInput(c, timeout) })
	f.awaitAll(t, func(s *snapshotv1.OutputSnapshot) bool { return hasTimeout(s, timeout) })

	// The revocation survived the failover: both services refuse gone,
	// within their reload of the revocation set (--revocation-refresh,
	// 2 s). Its open push stream is cut when it is refused: a push may
	// fail on it, the next opens a stream.
	var perr, werr error
	_ = harness.Wait(ctx, 15*time.Second, "the revoked cluster refused", func(ctx context.Context) (bool, error) {
		perr = gone.Push(ownPolicyInput("gone", timeout))
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		werr = gone.Watch(wctx)
		return revokedErr(perr) && revokedErr(werr), nil
	}, f.procs...)
	if !revokedErr(perr) {
		t.Errorf("ingest after the failover still answers the revoked cluster: %v", perr)
	}
	if !revokedErr(werr) {
		t.Errorf("distribution after the failover still answers the revoked cluster: %v", werr)
	}
	for _, p := range f.procs {
		if tail := p.LogTail(100000); strings.Contains(tail, "panic:") {
			t.Errorf("%s panicked:\n%s", p.Name, p.LogTail(40))
		}
	}
}

// revokedErr says whether err is the plane refusing a revoked certificate.
func revokedErr(err error) bool {
	var ce *connect.Error
	return err != nil && errors.As(err, &ce) && ce.Code() == connect.CodeUnauthenticated && strings.Contains(err.Error(), "revoked")
}

// installPrimary returns the node that is primary for the install's keys
// (all in one hash slot).
func installPrimary(ctx context.Context, d *redistest.Deployment) (*redistest.Server, error) {
	if d.Topology != redistest.Cluster {
		return d.Primary(ctx)
	}
	c := d.NewClient().(*redis.ClusterClient)
	defer c.Close()
	node, err := c.MasterForKey(ctx, "meshplane:{"+snapshots.DefaultInstall+"}:input")
	if err != nil {
		return nil, err
	}
	addr := node.Options().Addr
	for _, n := range d.Nodes {
		if n.Addr() == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("the install's primary %s is none of the nodes", addr)
}

// clusterClient is registration's ClusterService with an operator's
// certificate.
func clusterClient(t *testing.T, plane *harness.Plane) registrationv1connect.ClusterServiceClient {
	t.Helper()
	cert, key, err := plane.PKI.ServiceCert("meshctl")
	if err != nil {
		t.Fatal(err)
	}
	o := platform.NewClientOptions()
	o.Addr, o.CAFile, o.CertFile, o.KeyFile, o.ServerName = plane.Registration, plane.PKI.RootFile(), cert, key, "localhost"
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return registrationv1connect.NewClusterServiceClient(hc, platform.BaseURL(o), platform.DefaultClientOptions(o)...)
}

// deregister deregisters cluster gone, retrying while registration says
// to.
func deregister(t *testing.T, cc registrationv1connect.ClusterServiceClient, plane *harness.Plane) {
	t.Helper()
	var last error
	if err := harness.Wait(t.Context(), 60*time.Second, "gone deregistered", func(ctx context.Context) (bool, error) {
		res, err := cc.DeregisterCluster(ctx, connect.NewRequest(&registrationv1.DeregisterClusterRequest{Name: "gone"}))
		last = err
		return err == nil && res.Msg.GetRevokedCertificates() == 1, err
	}, plane.Procs...); err != nil {
		var tail string
		if p := plane.Process("registration"); p != nil {
			tail = p.LogTail(30)
		}
		t.Fatalf("%v (last: %v)\nregistration:\n%s", err, last, tail)
	}
}
