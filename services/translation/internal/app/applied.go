package app

import (
	"context"
	"errors"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
)

// ApplyReports is where translation learns what the agents could not
// apply: the acknowledgements that distribution records in the shared
// store, with a notice for each.
type ApplyReports interface {
	GetAck(ctx context.Context, cluster string) (snapshots.Ack, error)
	ListAcks(ctx context.Context) ([]snapshots.Ack, error)
	SubscribeAcks(ctx context.Context) (<-chan snapshots.Change, error)
}

// WithApplyReports makes the translator report the objects that agents
// could not apply in the statuses of the policies behind them (FAILED).
func WithApplyReports(r ApplyReports) TranslatorOption {
	return func(t *Translator) { t.reports = r }
}

// applyFailures copies the apply failures last reported.
func (t *Translator) applyFailures() map[string][]domain.ApplyFailure {
	t.mu.RLock()
	defer t.mu.RUnlock()
	failures := make(map[string][]domain.ApplyFailure, len(t.failures))
	for c, f := range t.failures {
		failures[c] = f
	}
	return failures
}

// finishOutputs runs after each translation, before the outputs are kept
// and published: the test hook, then the apply failures (as read by
// applyFailures before translating). Both change the outputs in place.
func (t *Translator) finishOutputs(outputs map[string]*snapshotv1.OutputSnapshot, failures map[string][]domain.ApplyFailure) {
	if hook := t.cfg.TestOutputHook; hook != nil {
		for c, o := range outputs {
			hook(c, o)
			snapshots.SealOutput(o)
		}
	}
	if len(failures) == 0 {
		return
	}
	if _, err := domain.MarkApplyFailures(outputs, failures); err != nil {
		t.log.Error("reporting apply failures in statuses failed", "error", err)
	}
}

// followAcks follows the agents' acks until ctx ends. An ack of a
// cluster's current output whose failures differ from those last seen
// schedules a translation, which reports them; so does one that clears
// them.
func (t *Translator) followAcks(ctx context.Context) {
	for ctx.Err() == nil {
		changes, err := t.reports.SubscribeAcks(ctx)
		if err != nil {
			t.log.Debug("ack store subscription failed; retrying", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(t.cfg.RetryInterval):
				continue
			}
		}
		t.readAllAcks(ctx)
		for c := range changes {
			if c.Resync {
				t.readAllAcks(ctx)
				continue
			}
			a, err := t.reports.GetAck(ctx, c.Cluster)
			if err != nil {
				if !errors.Is(err, snapshots.ErrNotFound) {
					t.log.Warn("reading an ack failed", "cluster", c.Cluster, "error", err)
				}
				continue
			}
			t.onAck(a)
		}
	}
}

func (t *Translator) readAllAcks(ctx context.Context) {
	acks, err := t.reports.ListAcks(ctx)
	if err != nil {
		t.log.Warn("reading acks failed", "error", err)
		return
	}
	for _, a := range acks {
		t.onAck(a)
	}
}

// onAck records the failures of an ack of a cluster's current output. An
// ack of any other version is ignored: the agent will ack the current one.
func (t *Translator) onAck(a snapshots.Ack) {
	t.mu.Lock()
	out := t.outputs[a.Cluster]
	if out == nil || out.GetVersion() != a.Version {
		t.mu.Unlock()
		return
	}
	f := domain.ApplyFailures(out, a.Results)
	if domain.SameApplyFailures(t.failures[a.Cluster], f) {
		t.mu.Unlock()
		return
	}
	if len(f) == 0 {
		delete(t.failures, a.Cluster)
	} else {
		t.failures[a.Cluster] = f
	}
	t.mu.Unlock()
	t.log.Info("apply failures changed; translating again", "cluster", a.Cluster, "version", a.Version, "failed_objects", len(f))
	t.schedule()
}
