package app

import (
	"maps"
	"testing"
	"testing/synctest"
	"time"

	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
)

func corpDetector() *settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector {
	return &settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector{
		EastWestGatewayLabels: map[string]string{"gateway": "corp-eastwest"}, EastWestGatewayTlsPortName: "mtls",
	}
}

func TestSyncerHandsTheGatewayDetectorOn(t *testing.T) {
	g := NewGatewayDetection()
	s := NewSyncer(newFakeRelay(), newFakeApplier(), nil, testLogger(t), WithGatewayDetectorSink(g))

	snap := output(object("VirtualService", "reviews"))
	snap.GatewayDetector = corpDetector()
	if !s.Apply(t.Context(), snap) {
		t.Fatal("Apply failed")
	}
	if !proto.Equal(g.Get(), corpDetector()) {
		t.Fatalf("detector %v, want %v", g.Get(), corpDetector())
	}
	select {
	case <-g.Changed():
	default:
		t.Fatal("a new detector did not signal a change")
	}

	// The same detector again (another version of the output): no change.
	again := output(object("VirtualService", "ratings"))
	again.GatewayDetector = corpDetector()
	if !s.Apply(t.Context(), again) {
		t.Fatal("Apply failed")
	}
	select {
	case <-g.Changed():
		t.Fatal("the same detector signalled a change")
	default:
	}

	// An output without one (Settings no longer set any): the flags again.
	if !s.Apply(t.Context(), output(object("VirtualService", "ratings"))) {
		t.Fatal("Apply failed")
	}
	if g.Get() != nil {
		t.Fatalf("detector %v after an output without one, want none", g.Get())
	}
	select {
	case <-g.Changed():
	default:
		t.Fatal("dropping the detector did not signal a change")
	}
}

// gatewayReader discovers istiod and a gateway that Istio's default
// labels do not select.
type gatewayReader struct{ *fakeReader }

func (r gatewayReader) Discover() (domain.Discovered, error) {
	if _, err := r.fakeReader.Discover(); err != nil {
		return domain.Discovered{}, err
	}
	return domain.Discovered{
		Deployments: []domain.Deployment{{Name: "istiod", Namespace: "istio-system", PodLabels: map[string]string{"app": "istiod"},
			DiscoveryImage: "docker.io/istio/pilot:1.24.2"}},
		Services: []domain.Service{{Name: "corp-eastwest", Namespace: "istio-system", Type: "LoadBalancer",
			Selector: map[string]string{"gateway": "corp-eastwest"}, LoadBalancer: []string{"203.0.113.30"},
			Ports: []domain.ServicePort{{Name: "mtls", Port: 15443, TargetPort: 15444}}}},
	}, nil
}

func eastWestGateways(s *snapshotv1.InputSnapshot) []*discoveryv1.MeshSpec_Gateway {
	var out []*discoveryv1.MeshSpec_Gateway
	for _, m := range s.GetMeshes() {
		out = append(out, m.GetSpec().GetIstio().GetEastWestGateways()...)
	}
	return out
}

// The pusher discovers again, and pushes, when an output brings another
// gateway detector, without any change in the cluster.
func TestPusherDiscoversAgainWithTheGatewayDetector(t *testing.T) {
	defer goleak.VerifyNone(t)
	reader := gatewayReader{newFakeReader()}
	relay := newFakeRelay()
	stream := newFakePushStream()
	relay.pushStreams <- stream
	g := NewGatewayDetection()
	p := NewPusher(eastID, reader, relay, nil, testLogger(t), 0, WithGatewayDetection(g))
	stop := runPusher(t, p)

	first := receive(t, stream.sent, 5*time.Second, "the first push")
	if len(first.GetMeshes()) != 1 || len(eastWestGateways(first)) != 0 {
		t.Fatalf("first push: meshes %v, want istiod without an east-west gateway", first.GetMeshes())
	}
	g.Set(corpDetector())
	second := receive(t, stream.sent, 5*time.Second, "the push after the detector changed")
	gws := eastWestGateways(second)
	if len(gws) != 1 || gws[0].GetExternalAddress() != "203.0.113.30" || gws[0].GetExternalTlsPort() != 15443 {
		t.Fatalf("second push: east-west gateways %v, want corp-eastwest at 203.0.113.30:15443", gws)
	}
	stop()
}

// The gateway pods that a CA rotation restarts after istiod are those
// that discovery finds: with the output's detector once there is one.
func TestCACertsGatewayLabelsFollowTheDetector(t *testing.T) {
	flags := domain.Options{IngressGatewayLabels: map[string]string{"istio": "ingressgateway"}, EastWestGatewayLabels: map[string]string{"istio": "eastwestgateway"}}
	g := NewGatewayDetection()
	c := NewCACerts(nil, nil, CACertsOptions{
		Log: testLogger(t), GatewayLabels: []map[string]string{flags.IngressGatewayLabels, flags.EastWestGatewayLabels},
		GatewayDetection: g, Discovery: flags,
	})
	got := c.currentGatewayLabels()
	if len(got) != 2 || !maps.Equal(got[0], flags.IngressGatewayLabels) || !maps.Equal(got[1], flags.EastWestGatewayLabels) {
		t.Fatalf("labels %v without a detector, want the flags'", got)
	}
	g.Set(corpDetector())
	got = c.currentGatewayLabels()
	if len(got) != 2 || !maps.Equal(got[0], flags.IngressGatewayLabels) || !maps.Equal(got[1], corpDetector().GetEastWestGatewayLabels()) {
		t.Fatalf("labels %v with the detector, want the flags' ingress labels and the detector's east-west labels", got)
	}
}

// The first push waits for the gateway detector of the first output when
// the agent restarts on a cluster it wrote to, so that it already finds
// the gateways only Settings select; on a cluster holding nothing
// Meshplane wrote it pushes at once; and without an output it pushes once
// the wait is over.
//
// It runs in a synctest bubble: "nothing is pushed before the output is
// applied" is checked once every goroutine of the bubble is blocked
// (synctest.Wait), not by waiting some real time that a slow machine
// could need more of, and the waits elapse on the bubble's clock.
func TestPusherFirstPushWaitsForTheGatewayDetector(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, testPusherFirstPushWaitsForTheGatewayDetector)
}

func testPusherFirstPushWaitsForTheGatewayDetector(t *testing.T) {
	start := func(g *GatewayDetection, wait time.Duration) (*fakePushStream, func()) {
		relay := newFakeRelay()
		stream := newFakePushStream()
		relay.pushStreams <- stream
		p := NewPusher(eastID, gatewayReader{newFakeReader()}, relay, nil, testLogger(t), 0, WithGatewayDetection(g), WithGatewayDetectionWait(wait))
		return stream, runPusher(t, p)
	}

	// A restart: the syncer finds objects it owns and learns nothing
	// until an output is applied.
	g := NewGatewayDetection()
	s := NewSyncer(newFakeRelay(), newFakeApplier(keyOf("DestinationRule", "reviews")), nil, testLogger(t), WithGatewayDetectorSink(g))
	if err := s.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	stream, stop := start(g, time.Hour)
	synctest.Wait()
	select {
	case sent := <-stream.sent:
		t.Fatalf("pushed %s before the output was applied", sent.GetVersion())
	default:
	}
	snap := output(object("DestinationRule", "reviews"))
	snap.GatewayDetector = corpDetector()
	if !s.Apply(t.Context(), snap) {
		t.Fatal("Apply failed")
	}
	if gws := eastWestGateways(receive(t, stream.sent, 5*time.Second, "the first push")); len(gws) != 1 {
		t.Fatalf("first push after a restart: east-west gateways %v, want corp-eastwest", gws)
	}
	stop()

	// A cluster Meshplane never wrote to: nothing to wait for.
	g = NewGatewayDetection()
	s = NewSyncer(newFakeRelay(), newFakeApplier(), nil, testLogger(t), WithGatewayDetectorSink(g))
	if err := s.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	stream, stop = start(g, time.Hour)
	if gws := eastWestGateways(receive(t, stream.sent, 5*time.Second, "the first push on a fresh cluster")); len(gws) != 0 {
		t.Fatalf("first push on a fresh cluster: east-west gateways %v, want none (the flags' labels)", gws)
	}
	stop()

	// No output comes after a restart: the push goes out once the wait
	// is over.
	stream, stop = start(NewGatewayDetection(), 50*time.Millisecond)
	if gws := eastWestGateways(receive(t, stream.sent, 5*time.Second, "the push after the wait")); len(gws) != 0 {
		t.Fatalf("push after the wait: east-west gateways %v, want none", gws)
	}
	stop()
}
