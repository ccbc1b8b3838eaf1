package app

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// quorum is the Leadership a WriteFence asks: it confirms, refuses (this
// replica was deposed), or hangs (a frozen process, a quorum out of
// reach) until released.
type quorum struct {
	mu     sync.Mutex
	err    error
	hang   chan struct{}
	checks int
}

func (q *quorum) LeaderCh() <-chan bool { return nil }
func (q *quorum) IsLeader() bool        { return true }

func (q *quorum) VerifyLeader(ctx context.Context) error {
	q.mu.Lock()
	q.checks++
	hang := q.hang
	q.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

func (q *quorum) set(err error, hang chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.err, q.hang = err, hang
}

// A write goes out only within Valid of a quorum's confirmation: a
// deposed or stalled leader's writes wait, and fail after MaxWait; once
// the duties stop, nothing passes. The bubble's clock makes "no write
// passes for 2 s" a fact, not a wait that a slow machine could pass.
func TestWriteFenceHoldsTheWritesOfALeaderNotConfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &quorum{}
		o := WriteFenceOptions{Valid: 250 * time.Millisecond, Every: 50 * time.Millisecond, MaxWait: 2 * time.Second}
		f := NewWriteFence(q, o)
		ctx := t.Context()
		if err := f.Wait(ctx); !errors.Is(err, ErrLeaseNotConfirmed) {
			t.Fatalf("before the duty ran: Wait = %v, want ErrLeaseNotConfirmed", err)
		}
		dutyCtx, stop := context.WithCancel(ctx)
		ended := make(chan error, 1)
		go func() { ended <- f.Duty().Run(dutyCtx) }()
		synctest.Wait()
		if err := f.Wait(ctx); err != nil {
			t.Fatalf("confirmed leader: Wait = %v", err)
		}

		// Deposed: the quorum refuses. Within Valid of the last
		// confirmation writes still pass; after it they wait MaxWait
		// and fail.
		q.set(errors.New("not the leader"), nil)
		time.Sleep(o.Every) // the refusal is now the latest answer
		time.Sleep(o.Valid)
		start := time.Now()
		if err := f.Wait(ctx); !errors.Is(err, ErrLeaseNotConfirmed) {
			t.Fatalf("deposed leader: Wait = %v, want ErrLeaseNotConfirmed", err)
		}
		if waited := time.Since(start); waited != o.MaxWait {
			t.Errorf("deposed leader's write waited %v, want MaxWait %v", waited, o.MaxWait)
		}

		// Stalled: the check hangs (a frozen process, a quorum out of
		// reach) for over a second. A write waits; the check that was
		// hanging started too long ago to count, and the write goes out
		// with the next one, started after the stall.
		hang := make(chan struct{})
		q.set(nil, hang)
		time.Sleep(o.Valid + o.Every)
		passed := make(chan time.Time, 1)
		go func() {
			if err := f.Wait(ctx); err != nil {
				t.Errorf("stalled then confirmed: Wait = %v", err)
			}
			passed <- time.Now()
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case at := <-passed:
			t.Fatalf("a write passed at %v while no confirmation was fresh", at)
		default:
		}
		released := time.Now()
		close(hang)
		q.set(nil, nil)
		if at := <-passed; at != released {
			t.Errorf("the held write went out at %v, want at the confirmation (%v)", at, released)
		}

		// The duties stop (leadership lost): no write passes, however
		// fresh the last confirmation was.
		stop()
		if err := <-ended; err != nil {
			t.Fatalf("fence duty: %v", err)
		}
		if err := f.Wait(ctx); !errors.Is(err, ErrLeaseNotConfirmed) {
			t.Fatalf("after the duties stopped: Wait = %v, want ErrLeaseNotConfirmed", err)
		}
	})
}
