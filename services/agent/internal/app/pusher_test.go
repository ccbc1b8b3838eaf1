package app

import (
	"context"
	"errors"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
)

var eastID = domain.Identity{Cluster: "east", AgentVersion: "test", Replica: "agent-0", Namespace: "meshplane"}

func svc(name string, port uint32) domain.Service {
	return domain.Service{Name: name, Namespace: "bookinfo", Type: "ClusterIP", Discover: "true",
		Ports: []domain.ServicePort{{Name: "http", Port: port, Protocol: "TCP", TargetPort: port}}}
}

func runPusher(t *testing.T, p *Pusher) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var stopped bool
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := receive(t, done, 5*time.Second, "Pusher.Run to return"); err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func (s *fakePushStream) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func destinations(s *snapshotv1.InputSnapshot) []string {
	var out []string
	for _, d := range s.GetDestinations() {
		out = append(out, d.GetMetadata().GetName())
	}
	return out
}

func TestPusher(t *testing.T) {
	defer goleak.VerifyNone(t)
	reader := newFakeReader(svc("reviews", 9080))
	relay := newFakeRelay()
	first := newFakePushStream()
	relay.pushStreams <- first
	p := NewPusher(eastID, reader, relay, nil, testLogger(t), 0)
	stop := runPusher(t, p)

	// On connect: the whole snapshot, once.
	s1 := receive(t, first.sent, 5*time.Second, "the first push")
	if got := destinations(s1); len(got) != 1 || got[0] != "reviews-bookinfo-east" {
		t.Fatalf("first push holds %v, want [reviews-bookinfo-east]", got)
	}
	if s1.GetCluster() != "east" || s1.GetVersion() == "" {
		t.Errorf("first push: cluster %q version %q", s1.GetCluster(), s1.GetVersion())
	}

	// Ingest acknowledges; the pusher records the stored version.
	first.stored <- s1.GetVersion()
	waitFor(t, 5*time.Second, func() bool { return p.AckedVersion() == s1.GetVersion() }, "the acked version")

	// A change event with the same content is not pushed. Waiting for the
	// rebuild shows that the event was handled.
	reader.changed <- struct{}{}
	waitFor(t, 5*time.Second, func() bool { return reader.discoverCalls() >= 2 }, "a rebuild after the change event")

	// A change of content is pushed.
	reader.set(svc("reviews", 9080), svc("ratings", 9080))
	reader.changed <- struct{}{}
	s2 := receive(t, first.sent, 5*time.Second, "the push after a change")
	if got := destinations(s2); len(got) != 2 {
		t.Errorf("second push holds %v, want 2 destinations", got)
	}
	if s2.GetVersion() == s1.GetVersion() {
		t.Errorf("content changed but the version did not: %s", s2.GetVersion())
	}
	if n := len(first.sends()); n != 2 {
		t.Errorf("%d pushes on the first stream, want 2 (the unchanged rebuild was pushed)", n)
	}

	// A failed discovery keeps the last snapshot and pushes nothing.
	reader.mu.Lock()
	reader.err = errors.New("cache not ready")
	reader.mu.Unlock()
	before := reader.discoverCalls()
	reader.changed <- struct{}{}
	waitFor(t, 5*time.Second, func() bool { return reader.discoverCalls() > before }, "a rebuild after the change event")
	reader.mu.Lock()
	reader.err = nil
	reader.mu.Unlock()

	// The stream breaks: the new stream gets the whole, unchanged snapshot
	// again, since the replica behind it may not have it.
	second := newFakePushStream()
	relay.pushStreams <- second
	first.fail <- errors.New("connection reset")
	s3 := receive(t, second.sent, 5*time.Second, "the push on the new stream")
	if !proto.Equal(s3, s2) {
		t.Errorf("resent snapshot differs from the last one:\n%v\nwant\n%v", s3, s2)
	}
	if relay.pushCalls() != 2 {
		t.Errorf("%d streams opened, want 2", relay.pushCalls())
	}
	if n := len(first.sends()); n != 2 {
		t.Errorf("%d pushes on the first stream, want still 2", n)
	}
	stop()
}

func TestPusherReconnectsAfterSendError(t *testing.T) {
	defer goleak.VerifyNone(t)
	reader := newFakeReader(svc("reviews", 9080))
	relay := newFakeRelay()
	first := newFakePushStream()
	relay.pushStreams <- first
	p := NewPusher(eastID, reader, relay, nil, testLogger(t), 0)
	stop := runPusher(t, p)

	s1 := receive(t, first.sent, 5*time.Second, "the first push")
	// The next send fails while an acknowledgement is still on its way:
	// the session ends, and nothing of it may run on once Run backs off
	// (under -race, a late receiver touching the backoff is reported).
	first.mu.Lock()
	first.sendErr = errors.New("stream broken")
	first.inFlight = s1.GetVersion()
	first.mu.Unlock()
	second := newFakePushStream()
	relay.pushStreams <- second
	reader.set(svc("reviews", 9080), svc("ratings", 9080))
	reader.changed <- struct{}{}

	s2 := receive(t, second.sent, 5*time.Second, "the push on the new stream")
	if got := destinations(s2); len(got) != 2 {
		t.Errorf("new stream got %v, want the current 2 destinations", got)
	}
	if !first.isClosed() {
		t.Errorf("the broken stream was not closed")
	}
	stop()
}

func TestPusherWaitsForSync(t *testing.T) {
	defer goleak.VerifyNone(t)
	reader := newFakeReader()
	reader.synced = make(chan struct{}) // never syncs
	relay := newFakeRelay()
	p := NewPusher(eastID, reader, relay, nil, testLogger(t), 0)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	cancel()
	if err := receive(t, done, 5*time.Second, "Run to return"); err == nil {
		t.Errorf("Run = nil, want the sync error")
	}
	if relay.pushCalls() != 0 || reader.discoverCalls() != 0 {
		t.Errorf("pushed (%d streams, %d discoveries) before the caches synced", relay.pushCalls(), reader.discoverCalls())
	}
}
