package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"google.golang.org/protobuf/proto"
)

// PushTarget opens push streams to one ingest address. A Relay is one.
type PushTarget interface {
	OpenPush(ctx context.Context) (PushStream, error)
}

// Pusher sends the cluster's input snapshot to ingest: once after every
// (re)connect, and again whenever discovery's content hash changes.
type Pusher struct {
	id     domain.Identity
	reader ClusterReader
	// targets are the ingest replicas to push to, one at a time: a stream
	// that fails or breaks makes the next session use the next one. Any
	// replica serves any cluster (they share the store), and every session
	// resends the whole snapshot, so a move loses nothing.
	targets  []PushTarget
	cur      int
	metrics  Metrics
	log      *slog.Logger
	debounce time.Duration

	// detection, when set, holds the gateway detector the output
	// snapshots carry, which wins over the reader's options.
	detection *GatewayDetection
	// detectionWait bounds how long the first push waits for detection.
	detectionWait time.Duration

	mu    sync.Mutex
	acked string
}

// NewPusher returns a pusher. debounce is how long a burst of changes may
// settle before a snapshot is built.
func NewPusher(id domain.Identity, reader ClusterReader, relay PushTarget, metrics Metrics, log *slog.Logger, debounce time.Duration, opts ...PusherOption) *Pusher {
	if metrics == nil {
		metrics = NopMetrics{}
	}
	p := &Pusher{id: id, reader: reader, targets: []PushTarget{relay}, metrics: metrics, log: log, debounce: debounce}
	for _, o := range opts {
		o(p)
	}
	return p
}

// PusherOption sets an optional setting or collaborator of a Pusher.
type PusherOption func(*Pusher)

// WithGatewayDetection makes the pusher discover with the gateway detector
// g holds, and discover again when it changes.
func WithGatewayDetection(g *GatewayDetection) PusherOption {
	return func(p *Pusher) { p.detection = g }
}

// WithGatewayDetectionWait makes the first push wait up to d until the
// gateway detection is known: after a restart, until the first output is
// applied, so that discovery uses the Settings in force from the first
// push. An agent that restarted would otherwise push its cluster without
// the gateways only Settings find, and the routes of other clusters to
// them would flap until its output came.
func WithGatewayDetectionWait(d time.Duration) PusherOption {
	return func(p *Pusher) { p.detectionWait = d }
}

// WithFailoverTo adds ingest replicas to move to, in turn, when the
// stream to the current one fails.
func WithFailoverTo(more ...PushTarget) PusherOption {
	return func(p *Pusher) { p.targets = append(p.targets, more...) }
}

// AckedVersion returns the version ingest last acknowledged.
func (p *Pusher) AckedVersion() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

// Run pushes until ctx ends.
func (p *Pusher) Run(ctx context.Context) error {
	if err := p.reader.WaitForSync(ctx); err != nil {
		return err
	}
	if !p.waitForDetection(ctx) {
		return nil
	}
	b := Backoff{Min: 200 * time.Millisecond, Max: 30 * time.Second}
	for ctx.Err() == nil {
		err := p.session(ctx, &b)
		p.metrics.Connected("push", false)
		if ctx.Err() != nil {
			return nil
		}
		if len(p.targets) > 1 {
			p.cur = (p.cur + 1) % len(p.targets)
			p.log.Warn("push stream ended; moving to the next ingest address", "error", err, "address", p.cur)
		} else {
			p.log.Warn("push stream ended; reconnecting", "error", err)
		}
		if !b.Wait(ctx) {
			return nil
		}
	}
	return nil
}

// session runs one push stream: it sends the current snapshot, then a new
// one each time the content changes.
func (p *Pusher) session(ctx context.Context, b *Backoff) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := p.targets[p.cur].OpenPush(ctx)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	// Closing the sending side ends the stream's Receive (cancelling the
	// context does not: the response read goes on); the receiver is waited
	// for before Close, which must not run concurrently with Receive, and
	// so that no goroutine outlives the session.
	defer func() {
		cancel()
		_ = stream.CloseSend()
		wg.Wait()
		stream.Close()
	}()
	p.metrics.Connected("push", true)

	// The receiver only reports; b belongs to this goroutine, and Run
	// uses it again as soon as the session returns.
	acked := make(chan string)
	ended := make(chan error, 1)
	wg.Go(func() {
		for {
			v, err := stream.Receive()
			if err != nil {
				ended <- err
				return
			}
			select {
			case acked <- v:
			case <-ctx.Done():
				return
			}
		}
	})

	var detectionChanged <-chan struct{}
	if p.detection != nil {
		detectionChanged = p.detection.Changed()
	}
	sent := ""
	// Every new stream gets the whole snapshot, even if unchanged: the
	// replica behind it may be a new one.
	dirty := true
	for {
		if dirty {
			dirty = false
			s, err := p.build()
			if err != nil {
				p.log.Error("discovery failed; keeping the last snapshot", "error", err)
			} else if s.GetVersion() != sent {
				err := stream.Send(s)
				p.metrics.Pushed(proto.Size(s), err)
				if err != nil {
					return err
				}
				sent = s.GetVersion()
				p.log.Info("pushed input snapshot", "version", sent,
					"meshes", len(s.GetMeshes()), "workloads", len(s.GetWorkloads()), "destinations", len(s.GetDestinations()))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-ended:
			return err
		case v := <-acked:
			b.Reset()
			p.mu.Lock()
			p.acked = v
			p.mu.Unlock()
			p.log.Debug("ingest stored snapshot", "version", v)
		case <-p.reader.Changed():
			if !p.settle(ctx) {
				return nil
			}
			dirty = true
		case <-detectionChanged:
			p.log.Info("gateway detection changed; discovering again", "detector", p.detection.Get().String())
			dirty = true
		}
	}
}

// waitForDetection waits until the gateway detection is known, or the
// wait set is over; false when ctx ended.
func (p *Pusher) waitForDetection(ctx context.Context) bool {
	if p.detection == nil || p.detectionWait <= 0 {
		return true
	}
	t := time.NewTimer(p.detectionWait)
	defer t.Stop()
	select {
	case <-p.detection.Known():
	case <-t.C:
		p.log.Warn("no output snapshot applied yet; pushing with the gateway labels of the flags", "waited", p.detectionWait)
	case <-ctx.Done():
		return false
	}
	return true
}

func (p *Pusher) settle(ctx context.Context) bool {
	if p.debounce <= 0 {
		return true
	}
	t := time.NewTimer(p.debounce)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (p *Pusher) build() (*snapshotv1.InputSnapshot, error) {
	d, err := p.reader.Discover()
	if err != nil {
		return nil, err
	}
	if p.detection != nil {
		d.Options = d.Options.WithDetector(p.detection.Get())
	}
	return domain.BuildInputSnapshot(p.id, d), nil
}
