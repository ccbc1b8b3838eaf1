package app

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
)

// TestPusherFailsOverAcrossIngestAddresses: when the stream to one ingest
// replica breaks, the next session goes to the next address, resends the
// whole snapshot there, and comes back round to the first after the last.
func TestPusherFailsOverAcrossIngestAddresses(t *testing.T) {
	defer goleak.VerifyNone(t)
	reader := newFakeReader(svc("reviews", 9080))
	a, b := newFakeRelay(), newFakeRelay()
	onA, onB, againA := newFakePushStream(), newFakePushStream(), newFakePushStream()
	a.pushStreams <- onA
	a.pushStreams <- againA
	b.pushStreams <- onB
	p := NewPusher(eastID, reader, a, nil, testLogger(t), 0, WithFailoverTo(b))
	stop := runPusher(t, p)

	s1 := receive(t, onA.sent, 5*time.Second, "the push to the first address")
	onA.stored <- s1.GetVersion()
	waitFor(t, 5*time.Second, func() bool { return p.AckedVersion() == s1.GetVersion() }, "the first ack")

	onA.fail <- errors.New("replica a killed")
	s2 := receive(t, onB.sent, 5*time.Second, "the push to the second address")
	if !proto.Equal(s2, s1) {
		t.Errorf("the second address got a different snapshot:\n%v\nwant\n%v", s2, s1)
	}
	if a.pushCalls() != 1 || b.pushCalls() != 1 {
		t.Errorf("streams opened: %d to a, %d to b; want 1 and 1", a.pushCalls(), b.pushCalls())
	}

	onB.fail <- errors.New("replica b killed")
	s3 := receive(t, againA.sent, 5*time.Second, "the push back on the first address")
	if !proto.Equal(s3, s1) {
		t.Errorf("the first address got a different snapshot on return")
	}
	stop()
}
