package app

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshplane/meshplane/services/agent/internal/domain"
)

// fakeLeadership is driven by the test.
type fakeLeadership struct {
	ch        chan bool
	mu        sync.Mutex
	leader    bool
	verifyErr error
	verified  chan error
}

func newFakeLeadership() *fakeLeadership { return &fakeLeadership{ch: make(chan bool, 1)} }

func (f *fakeLeadership) set(v bool) {
	f.mu.Lock()
	f.leader = v
	f.mu.Unlock()
	f.ch <- v
}

func (f *fakeLeadership) LeaderCh() <-chan bool { return f.ch }

func (f *fakeLeadership) IsLeader() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}

func (f *fakeLeadership) VerifyLeader(context.Context) error {
	f.mu.Lock()
	err := f.verifyErr
	f.mu.Unlock()
	if f.verified != nil {
		f.verified <- err
	}
	return err
}

// dutyEvents records a duty's starts and its stops with their causes.
type dutyEvents struct {
	started chan struct{}
	stopped chan error
}

func (e dutyEvents) duty() Duty {
	return Duty{Name: "test", Run: func(ctx context.Context) error {
		e.started <- struct{}{}
		<-ctx.Done()
		e.stopped <- context.Cause(ctx)
		return nil
	}}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func TestDutiesFollowLeadership(t *testing.T) {
	l := newFakeLeadership()
	ev := dutyEvents{started: make(chan struct{}, 4), stopped: make(chan error, 4)}
	var observed []bool
	var mu sync.Mutex
	d := NewDuties(l, DutiesOptions{Observe: func(v bool) { mu.Lock(); observed = append(observed, v); mu.Unlock() }}, ev.duty())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	l.set(true)
	recv(t, ev.started, "duties to start on gaining leadership")
	l.set(false)
	if cause := recv(t, ev.stopped, "duties to stop on losing leadership"); !errors.Is(cause, ErrLostLeadership) {
		t.Fatalf("duty context ended with %v, want ErrLostLeadership", cause)
	}
	l.set(true)
	recv(t, ev.started, "duties to start again")
	cancel()
	recv(t, ev.stopped, "duties to stop when the agent stops")
	if err := recv(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []bool{true, false, true, false}; len(observed) != len(want) {
		t.Fatalf("observed %v, want %v", observed, want)
	}
}

func TestDutiesNotStartedWhenLeadershipUnconfirmed(t *testing.T) {
	l := newFakeLeadership()
	l.verifyErr = errors.New("no quorum")
	l.verified = make(chan error, 2)
	ev := dutyEvents{started: make(chan struct{}, 2), stopped: make(chan error, 2)}
	d := NewDuties(l, DutiesOptions{}, ev.duty())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	l.set(true)
	if err := recv(t, l.verified, "the leadership check"); err == nil {
		t.Fatal("the first check passed")
	}
	l.set(false)
	// Leadership returns, now confirmed: this start is the first one.
	l.mu.Lock()
	l.verifyErr = nil
	l.mu.Unlock()
	select {
	case <-ev.started:
		t.Fatal("duties started although leadership was not confirmed")
	default:
	}
	l.set(true)
	recv(t, ev.started, "duties to start once leadership is confirmed")
	cancel()
	recv(t, done, "Run to return")
}

func TestDutyFailureFailsRun(t *testing.T) {
	l := newFakeLeadership()
	boom := errors.New("boom")
	d := NewDuties(l, DutiesOptions{}, Duty{Name: "failing", Run: func(context.Context) error { return boom }})
	done := make(chan error, 1)
	go func() { done <- d.Run(t.Context()) }()
	l.set(true)
	if err := recv(t, done, "Run to return the duty's error"); !errors.Is(err, boom) {
		t.Fatalf("Run returned %v, want boom", err)
	}
}

func TestAlwaysLeader(t *testing.T) {
	ev := dutyEvents{started: make(chan struct{}, 1), stopped: make(chan error, 1)}
	d := NewDuties(AlwaysLeader{}, DutiesOptions{}, ev.duty())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	recv(t, ev.started, "duties of a single replica to start")
	cancel()
	recv(t, done, "Run to return")
}

// losingApplier loses leadership after its first object.
type losingApplier struct {
	*fakeApplier
	l *fakeLeadership
}

func (a losingApplier) Apply(ctx context.Context, d domain.DesiredObject, live *domain.LiveObject) (domain.LiveObject, error) {
	got, err := a.fakeApplier.Apply(ctx, d, live)
	a.l.mu.Lock()
	a.l.leader = false
	a.l.mu.Unlock()
	return got, err
}

func TestSyncerApplyStopsBetweenObjectsOnLosingLeadership(t *testing.T) {
	l := newFakeLeadership()
	l.leader = true
	applier := newFakeApplier(keyOf("DestinationRule", "stale"))
	relay := newFakeRelay()
	s := NewSyncer(relay, losingApplier{applier, l}, nil, testLogger(t),
		// One worker: with more, each stops after the object it is writing.
		WithApplyOptions(ApplyOptions{Workers: 1}), WithLeadership(l))
	if s.Apply(t.Context(), output(object("VirtualService", "a"), object("VirtualService", "b"))) {
		t.Fatal("Apply reported success after losing leadership")
	}
	applier.mu.Lock()
	calls := slices.Clone(applier.calls)
	applier.mu.Unlock()
	// One object, then nothing: no second object, no garbage collection.
	if want := []string{call("apply", "VirtualService", "a")}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	select {
	case a := <-relay.acks:
		t.Fatalf("acknowledged %v after losing leadership", a)
	default:
	}
	if s.AppliedVersion() != "" {
		t.Fatalf("applied version %q", s.AppliedVersion())
	}
}

func TestSyncerApplyNeedsConfirmedLeadership(t *testing.T) {
	l := newFakeLeadership()
	l.leader = true
	l.verifyErr = errors.New("no quorum")
	applier := newFakeApplier()
	s := NewSyncer(newFakeRelay(), applier, nil, testLogger(t), WithLeadership(l))
	if s.Apply(t.Context(), output(object("VirtualService", "a"))) {
		t.Fatal("Apply reported success without confirmed leadership")
	}
	if len(applier.calls) != 0 {
		t.Fatalf("calls %v, want none", applier.calls)
	}
}
