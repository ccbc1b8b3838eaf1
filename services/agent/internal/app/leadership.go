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
