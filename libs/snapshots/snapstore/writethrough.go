package snapstore

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/proto"
)

// WriteThrough is a Store that keeps working while the shared store is down.
// Every Put lands in memory first and is then written to the shared store;
// a write that fails is kept as pending and retried by Run until it lands.
// Reads prefer the shared store (it holds what other replicas wrote) and
// fall back to memory when it is unreachable.
type WriteThrough[T proto.Message] struct {
	remote snapshots.Store[T]
	local  *Memory[T]
	log    *slog.Logger

	mu      sync.Mutex
	pending map[string]string // cluster -> version not yet in remote
	// writing serializes remote writes per cluster, so that a flush of an
	// older snapshot never lands after a newer Put.
	writing sync.Map // cluster -> *sync.Mutex
}

func (w *WriteThrough[T]) lockCluster(cluster string) func() {
	m, _ := w.writing.LoadOrStore(cluster, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// NewWriteThrough composes a shared store with a memory store.
func NewWriteThrough[T proto.Message](remote snapshots.Store[T], local *Memory[T], log *slog.Logger) *WriteThrough[T] {
	return &WriteThrough[T]{remote: remote, local: local, log: log, pending: map[string]string{}}
}

var (
	_ snapshots.Store[proto.Message]         = (*WriteThrough[proto.Message])(nil)
	_ snapshots.EncodedPutter[proto.Message] = (*WriteThrough[proto.Message])(nil)
	_ snapshots.EncodedGetter[proto.Message] = (*WriteThrough[proto.Message])(nil)
)

// Put never fails because the shared store is down.
func (w *WriteThrough[T]) Put(ctx context.Context, cluster, version string, v T) error {
	// Encode once for both layers: snapshots are large and encoding is most
	// of the cost of a push.
	data, err := proto.Marshal(v)
	if err != nil {
		return err
	}
	return w.PutEncoded(ctx, cluster, snapshots.Encoded[T]{Version: version, Value: v, Data: data})
}

// PutEncoded is Put for a snapshot already encoded; both layers keep e.Data.
func (w *WriteThrough[T]) PutEncoded(ctx context.Context, cluster string, e snapshots.Encoded[T]) error {
	unlock := w.lockCluster(cluster)
	defer unlock()
	if err := w.local.PutEncoded(ctx, cluster, e); err != nil {
		return err
	}
	if err := snapshots.PutEncoded(ctx, w.remote, cluster, e); err != nil {
		w.mu.Lock()
		w.pending[cluster] = e.Version
		w.mu.Unlock()
		w.log.Warn("shared store unavailable; kept in memory, will write through", "cluster", cluster, "version", e.Version, "error", err)
		return nil
	}
	w.mu.Lock()
	if w.pending[cluster] != "" {
		delete(w.pending, cluster)
	}
	w.mu.Unlock()
	return nil
}

func (w *WriteThrough[T]) isPending(cluster string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.pending[cluster]
	return ok
}

func (w *WriteThrough[T]) Get(ctx context.Context, cluster string) (snapshots.Entry[T], error) {
	if w.isPending(cluster) {
		return w.local.Get(ctx, cluster)
	}
	e, err := w.remote.Get(ctx, cluster)
	if err == nil || errors.Is(err, snapshots.ErrNotFound) && !w.hasLocal(cluster) {
		return e, err
	}
	return w.local.Get(ctx, cluster)
}

// GetEncoded is Get without decoding, where the layer read keeps the
// encoding.
func (w *WriteThrough[T]) GetEncoded(ctx context.Context, cluster string) (snapshots.Encoded[T], error) {
	if w.isPending(cluster) {
		return snapshots.GetEncoded[T](ctx, w.local, cluster)
	}
	e, err := snapshots.GetEncoded(ctx, w.remote, cluster)
	if err == nil || errors.Is(err, snapshots.ErrNotFound) && !w.hasLocal(cluster) {
		return e, err
	}
	return snapshots.GetEncoded[T](ctx, w.local, cluster)
}

func (w *WriteThrough[T]) hasLocal(cluster string) bool {
	_, err := w.local.Version(context.Background(), cluster)
	return err == nil
}

func (w *WriteThrough[T]) Version(ctx context.Context, cluster string) (string, error) {
	if w.isPending(cluster) {
		return w.local.Version(ctx, cluster)
	}
	v, err := w.remote.Version(ctx, cluster)
	if err == nil || errors.Is(err, snapshots.ErrNotFound) && !w.hasLocal(cluster) {
		return v, err
	}
	return w.local.Version(ctx, cluster)
}

// List merges the shared store's entries with the ones only in memory.
func (w *WriteThrough[T]) List(ctx context.Context) ([]snapshots.Entry[T], error) {
	local, err := w.local.List(ctx)
	if err != nil {
		return nil, err
	}
	remote, err := w.remote.List(ctx)
	if err != nil {
		return local, nil
	}
	byCluster := map[string]snapshots.Entry[T]{}
	for _, e := range remote {
		byCluster[e.Cluster] = e
	}
	for _, e := range local {
		if _, ok := byCluster[e.Cluster]; !ok || w.isPending(e.Cluster) {
			byCluster[e.Cluster] = e
		}
	}
	out := make([]snapshots.Entry[T], 0, len(byCluster))
	for _, e := range byCluster {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b snapshots.Entry[T]) int { return strings.Compare(a.Cluster, b.Cluster) })
	return out, nil
}

func (w *WriteThrough[T]) Subscribe(ctx context.Context) (<-chan snapshots.Change, error) {
	return w.remote.Subscribe(ctx)
}

// Pending returns the clusters whose snapshots are not yet in the shared
// store.
func (w *WriteThrough[T]) Pending() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.pending))
	for c := range w.pending {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Run writes pending snapshots through every interval until ctx ends.
func (w *WriteThrough[T]) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Flush(ctx)
		}
	}
}

// Flush tries once to write every pending snapshot through.
func (w *WriteThrough[T]) Flush(ctx context.Context) {
	for _, cluster := range w.Pending() {
		if !w.flushOne(ctx, cluster) {
			return // still down; try again later
		}
	}
}

// flushOne writes one cluster's pending snapshot through, under the
// cluster's write lock; it reports false when the remote store failed.
func (w *WriteThrough[T]) flushOne(ctx context.Context, cluster string) bool {
	unlock := w.lockCluster(cluster)
	defer unlock()
	e, err := w.local.Get(ctx, cluster)
	if err != nil {
		return true
	}
	if err := w.remote.Put(ctx, cluster, e.Version, e.Value); err != nil {
		return false
	}
	w.mu.Lock()
	if w.pending[cluster] == e.Version {
		delete(w.pending, cluster)
	}
	w.mu.Unlock()
	w.log.Info("wrote a pending snapshot through to the shared store", "cluster", cluster, "version", e.Version)
	return true
}
