package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Leadership says whether this replica leads the cluster's agents. With
// several replicas a Raft group decides; with one, AlwaysLeader.
type Leadership interface {
	// LeaderCh delivers true on gaining leadership and false on losing
	// it. It has one reader.
	LeaderCh() <-chan bool
	// IsLeader reports whether this replica leads now.
	IsLeader() bool
	// VerifyLeader confirms with a quorum that this replica still leads.
	VerifyLeader(ctx context.Context) error
}

// AlwaysLeader is the Leadership of a single replica.
type AlwaysLeader struct{}

// LeaderCh implements Leadership: true, once.
func (AlwaysLeader) LeaderCh() <-chan bool {
	ch := make(chan bool, 1)
	ch <- true
	return ch
}

// IsLeader implements Leadership.
func (AlwaysLeader) IsLeader() bool { return true }

// VerifyLeader implements Leadership.
func (AlwaysLeader) VerifyLeader(context.Context) error { return nil }

// ErrLostLeadership is the cause of a duty context cancelled because this
// replica stopped leading.
var ErrLostLeadership = errors.New("this replica no longer leads")

// Duty is work that only the leader does, such as the relay client,
// discovery and certificate management. Run must return soon after ctx
// ends.
type Duty struct {
	Name string
	Run  func(ctx context.Context) error
}

// DutiesOptions configures a duty runner.
type DutiesOptions struct {
	// StartDelay is how long a new leader waits before it starts the
	// duties: at least the old leader's lease, so that a leader that lost
	// its quorum has stepped down and stopped its duties first.
	StartDelay time.Duration
	// Observe is told when the duties start and stop (metrics, tests).
	Observe func(running bool)
	Log     *slog.Logger
}

// Duties starts the leader duties when this replica gains leadership and
// stops them, cancelling their context and waiting for them to return,
// when it loses it.
type Duties struct {
	leadership Leadership
	duties     []Duty
	o          DutiesOptions
	log        *slog.Logger
}

// NewDuties returns a duty runner.
func NewDuties(l Leadership, o DutiesOptions, duties ...Duty) *Duties {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Duties{leadership: l, duties: duties, o: o, log: log}
}

// Run follows leadership until ctx ends. It returns the first error of a
// duty: a duty that fails for good fails the agent, as with one replica,
// and the pod's restart hands leadership on.
func (d *Duties) Run(ctx context.Context) error {
	ch := d.leadership.LeaderCh()
	var (
		stop   context.CancelCauseFunc
		ended  chan error
		leader bool
	)
	halt := func(cause error) error {
		if stop == nil {
			return nil
		}
		stop(cause)
		err := <-ended
		stop, ended = nil, nil
		return err
	}
	for {
		select {
		case <-ctx.Done():
			halt(context.Cause(ctx))
			return nil
		case v := <-ch:
			if v == leader {
				continue
			}
			leader = v
			if v {
				d.log.Info("leading: starting the leader duties", "start_delay", d.o.StartDelay)
				stop, ended = d.start(ctx)
			} else {
				d.log.Info("no longer leading: stopping the leader duties")
				if err := halt(ErrLostLeadership); err != nil {
					return err
				}
			}
		case err := <-ended:
			stop(nil)
			stop, ended = nil, nil
			if err != nil && ctx.Err() == nil {
				return err
			}
		}
	}
}

// start runs one term in the background; stop ends it.
func (d *Duties) start(ctx context.Context) (stop context.CancelCauseFunc, ended chan error) {
	tctx, stop := context.WithCancelCause(ctx)
	ended = make(chan error, 1)
	go func() { ended <- d.term(tctx) }()
	return stop, ended
}

// term runs the duties for one term of leadership.
func (d *Duties) term(ctx context.Context) error {
	if d.o.StartDelay > 0 {
		t := time.NewTimer(d.o.StartDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	if err := d.leadership.VerifyLeader(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		// Leadership was lost meanwhile: the channel brings false next.
		d.log.Warn("leadership not confirmed; duties not started", "error", err)
		<-ctx.Done()
		return nil
	}
	if d.o.Observe != nil {
		d.o.Observe(true)
		defer d.o.Observe(false)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for _, duty := range d.duties {
		wg.Go(func() {
			err := duty.Run(ctx)
			if err != nil && ctx.Err() == nil {
				once.Do(func() { first = fmt.Errorf("leader duty %s: %w", duty.Name, err) })
			}
			if err != nil || ctx.Err() == nil {
				// One duty ending for good ends the term.
				cancel(err)
			}
		})
	}
	wg.Wait()
	return first
}

// ErrLeaseNotConfirmed is the error of a write held by the WriteFence for
// longer than its wait: no quorum has confirmed this replica's leadership
// recently.
var ErrLeaseNotConfirmed = errors.New("leadership not confirmed by a quorum recently: write held back")

// WriteFenceOptions configures a WriteFence.
type WriteFenceOptions struct {
	// Valid is how long after a confirmation started writes may go out.
	// It must be shorter than the time a new leader needs to start its
	// duties after the old one last reached a quorum: the followers'
	// heartbeat timeout plus DutiesOptions.StartDelay.
	Valid time.Duration
	// Every is how often the leader confirms (default Valid/4).
	Every time.Duration
	// MaxWait bounds how long a write waits for a confirmation (default
	// 5 s); then it fails with ErrLeaseNotConfirmed.
	MaxWait time.Duration
}

// WriteFence holds the leader's writes to a lease that a quorum confirmed
// recently. Duties stop when leadership is lost, but a replica frozen
// (SIGSTOP, a stalled VM, CPU starvation) between its last check and a
// write wakes up with the write still to send, perhaps after another
// replica took over. The fence closes that gap: its duty confirms
// leadership with a quorum every Every, and a write goes out only within
// Valid of the start of the last confirmation, which the monotonic clock
// measures across a freeze. A woken replica's writes wait for a
// confirmation that a deposed leader never gets.
type WriteFence struct {
	l Leadership
	o WriteFenceOptions

	mu        sync.Mutex
	confirmed time.Time     // start of the last confirmation; zero: none
	fresh     chan struct{} // closed at the next confirmation
}

// NewWriteFence returns a fence over l; run its Duty with the others.
func NewWriteFence(l Leadership, o WriteFenceOptions) *WriteFence {
	if o.Every <= 0 {
		o.Every = o.Valid / 4
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 5 * time.Second
	}
	return &WriteFence{l: l, o: o, fresh: make(chan struct{})}
}

// Duty confirms leadership every Every while this replica leads; when the
// duties stop, no write passes until the next term confirms again.
func (f *WriteFence) Duty() Duty {
	return Duty{Name: "write-fence", Run: f.run}
}

func (f *WriteFence) run(ctx context.Context) error {
	defer f.revoke()
	t := time.NewTicker(f.o.Every)
	defer t.Stop()
	for {
		start := time.Now()
		if err := f.l.VerifyLeader(ctx); err == nil {
			f.confirm(start)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (f *WriteFence) confirm(start time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if start.After(f.confirmed) {
		f.confirmed = start
	}
	close(f.fresh)
	f.fresh = make(chan struct{})
}

func (f *WriteFence) revoke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.confirmed = time.Time{}
}

// Wait returns nil when a write may go out now: leadership was confirmed
// within Valid. Otherwise it waits for the next confirmation, up to
// MaxWait (ErrLeaseNotConfirmed) or the end of ctx.
func (f *WriteFence) Wait(ctx context.Context) error {
	var timeout <-chan time.Time
	for {
		f.mu.Lock()
		ok := !f.confirmed.IsZero() && time.Since(f.confirmed) < f.o.Valid
		fresh := f.fresh
		f.mu.Unlock()
		if ok {
			return nil
		}
		if timeout == nil {
			t := time.NewTimer(f.o.MaxWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-timeout:
			return ErrLeaseNotConfirmed
		case <-fresh:
		}
	}
}
