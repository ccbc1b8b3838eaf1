package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// ManagementResources are the Meshplane resources applied in the
// management cluster.
type ManagementResources interface {
	// Watch calls changed once the resources are first read and after
	// every change, until ctx ends.
	Watch(ctx context.Context, changed func()) error
	// Snapshot returns the resources as an unsealed input snapshot of
	// cluster: its user-resource lists only.
	Snapshot(cluster string) (*snapshotv1.InputSnapshot, error)
}

// OutputSource is where translation's output snapshots are read.
type OutputSource interface {
	Get(ctx context.Context, cluster string) (snapshots.Entry[*snapshotv1.OutputSnapshot], error)
	Subscribe(ctx context.Context) (<-chan snapshots.Change, error)
}

// StatusWriter writes a status that translation computed onto the
// resource in the management cluster.
type StatusWriter interface {
	WriteStatus(ctx context.Context, st *snapshotv1.ResourceStatus) error
}

// Management feeds the management cluster's own Meshplane resources into
// the ingest path as one more cluster's input, and writes translation's
// statuses for them back onto the resources, as an agent does for its
// cluster.
type Management struct {
	in       *Ingestor
	res      ManagementResources
	cluster  string
	debounce time.Duration
	retry    time.Duration
	log      *slog.Logger
}

// NewManagement returns the use case for the cluster named cluster. Changes
// are pushed debounce after the last of a burst; failures are retried
// every retry.
func NewManagement(in *Ingestor, res ManagementResources, cluster string, debounce, retry time.Duration, log *slog.Logger) *Management {
	in.Reserve(cluster)
	return &Management{in: in, res: res, cluster: cluster, debounce: debounce, retry: retry, log: log.With("cluster", cluster)}
}

// Cluster names the management cluster's input.
func (m *Management) Cluster() string { return m.cluster }

// Run watches the resources and pushes a snapshot after every burst of
// changes, until ctx ends. Several replicas may run it: they push the same
// content, which has the same version, and an unchanged version is not
// stored again. While it runs, the cluster counts as connected here.
func (m *Management) Run(ctx context.Context) error {
	disconnect := m.in.Connect(m.cluster)
	defer disconnect()
	changed := make(chan struct{}, 1)
	watchErr := make(chan error, 1)
	go func() {
		watchErr <- m.res.Watch(ctx, func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		})
	}()
	var (
		timer   *time.Timer
		fire    <-chan time.Time
		pending bool
	)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-watchErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch the management cluster's resources: %w", err)
		case <-changed:
			// Debounce: push once the burst has been quiet for a while.
			pending = true
			if timer == nil {
				timer = time.NewTimer(m.debounce)
				defer timer.Stop()
			} else {
				timer.Reset(m.debounce)
			}
			fire = timer.C
		case <-fire:
			fire = nil
			if !pending {
				continue
			}
			if err := m.push(ctx); err != nil {
				m.log.Warn("pushing the management cluster's resources failed; retrying", "error", err)
				timer.Reset(m.retry)
				fire = timer.C
				continue
			}
			pending = false
		}
	}
}

func (m *Management) push(ctx context.Context) error {
	s, err := m.res.Snapshot(m.cluster)
	if err != nil {
		return err
	}
	s.Cluster = m.cluster
	snapshots.SealInput(s)
	_, err = m.in.Push(ctx, m.cluster, s)
	return err
}

// RunStatuses writes the statuses of the management cluster's output onto
// its resources, after every new output and again every retry interval
// while a write fails, until ctx ends.
func (m *Management) RunStatuses(ctx context.Context, outputs OutputSource, w StatusWriter) error {
	var (
		written string // the output version whose statuses are all written
		retry   = time.NewTimer(0)
	)
	defer retry.Stop()
	var changes <-chan snapshots.Change
	for {
		if changes == nil {
			c, err := outputs.Subscribe(ctx)
			if err != nil && ctx.Err() == nil {
				m.log.Warn("following translation's outputs failed; retrying", "error", err)
			}
			changes = c
		}
		select {
		case <-ctx.Done():
			return nil
		case c, ok := <-changes:
			if !ok {
				changes = nil
				if ctx.Err() != nil {
					return nil
				}
				continue
			}
			if !c.Resync && c.Cluster != m.cluster {
				continue
			}
		case <-retry.C:
		}
		v, err := m.writeStatuses(ctx, outputs, w, written)
		if err != nil {
			m.log.Warn("writing statuses to the management cluster failed; retrying", "error", err)
			retry.Reset(m.retry)
			continue
		}
		written = v
		if changes == nil {
			retry.Reset(m.retry)
		}
	}
}

// writeStatuses writes every status of the current output unless its
// version is done; it returns the version written.
func (m *Management) writeStatuses(ctx context.Context, outputs OutputSource, w StatusWriter, done string) (string, error) {
	e, err := outputs.Get(ctx, m.cluster)
	if errors.Is(err, snapshots.ErrNotFound) {
		return done, nil
	}
	if err != nil {
		return done, err
	}
	if e.Version == done {
		return done, nil
	}
	var errs []error
	for _, st := range e.Value.GetStatuses() {
		if err := w.WriteStatus(ctx, st); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return done, errors.Join(errs...)
	}
	m.log.Info("wrote statuses to the management cluster", "version", e.Version, "statuses", len(e.Value.GetStatuses()))
	return e.Version, nil
}
