package snapstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/proto"
)

// subscriberBuffer bounds how far a subscriber may fall behind before it is
// told to resync instead of being sent every change.
const subscriberBuffer = 256

// Memory is a Store in process memory. Values are stored encoded, so that a
// caller mutating a message after Put cannot change what others read.
type Memory[T proto.Message] struct {
	newT func() T

	mu   sync.RWMutex
	data map[string]memEntry
	subs map[*memSub]struct{}
}

type memEntry struct {
	version string
	data    []byte
	table   []byte
}

type memSub struct {
	ch     chan snapshots.Change
	missed bool
}

// NewMemory returns an empty memory store. newT makes an empty T for
// decoding.
func NewMemory[T proto.Message](newT func() T) *Memory[T] {
	return &Memory[T]{newT: newT, data: map[string]memEntry{}, subs: map[*memSub]struct{}{}}
}

var (
	_ snapshots.Store[proto.Message]         = (*Memory[proto.Message])(nil)
	_ snapshots.EncodedPutter[proto.Message] = (*Memory[proto.Message])(nil)
	_ snapshots.EncodedGetter[proto.Message] = (*Memory[proto.Message])(nil)
)

func (m *Memory[T]) Put(ctx context.Context, cluster, version string, v T) error {
	b, err := proto.Marshal(v) // the version is the content hash; stored bytes need not be canonical
	if err != nil {
		return err
	}
	return m.PutEncoded(ctx, cluster, snapshots.Encoded[T]{Version: version, Value: v, Data: b})
}

// PutEncoded stores e by its encoding, which it keeps without copying:
// the encoding must not change afterwards.
func (m *Memory[T]) PutEncoded(_ context.Context, cluster string, e snapshots.Encoded[T]) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data[cluster] = memEntry{version: e.Version, data: e.Data, table: e.Table}
	m.notifyLocked(snapshots.Change{Cluster: cluster, Version: e.Version})
	return nil
}

func (m *Memory[T]) Get(_ context.Context, cluster string) (snapshots.Entry[T], error) {
	m.mu.RLock()
	e, ok := m.data[cluster]
	m.mu.RUnlock()
	if !ok {
		return snapshots.Entry[T]{}, snapshots.ErrNotFound
	}
	v, err := decode(m.newT, cluster, e.data)
	if err != nil {
		return snapshots.Entry[T]{}, err
	}
	return snapshots.Entry[T]{Cluster: cluster, Version: e.version, Value: v}, nil
}

// GetEncoded returns the kept encoding of the cluster's snapshot, shared:
// nobody may modify it.
func (m *Memory[T]) GetEncoded(_ context.Context, cluster string) (snapshots.Encoded[T], error) {
	m.mu.RLock()
	e, ok := m.data[cluster]
	m.mu.RUnlock()
	if !ok {
		return snapshots.Encoded[T]{}, snapshots.ErrNotFound
	}
	return snapshots.Encoded[T]{Version: e.version, Data: e.data, Table: e.table}, nil
}

func (m *Memory[T]) Version(_ context.Context, cluster string) (string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.data[cluster]
	if !ok {
		return "", snapshots.ErrNotFound
	}
	return e.version, nil
}

func (m *Memory[T]) List(ctx context.Context) ([]snapshots.Entry[T], error) {
	m.mu.RLock()
	clusters := make([]string, 0, len(m.data))
	for c := range m.data {
		clusters = append(clusters, c)
	}
	m.mu.RUnlock()
	slices.SortFunc(clusters, strings.Compare)
	out := make([]snapshots.Entry[T], 0, len(clusters))
	for _, c := range clusters {
		e, err := m.Get(ctx, c)
		if errors.Is(err, snapshots.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func (m *Memory[T]) Subscribe(ctx context.Context) (<-chan snapshots.Change, error) {
	s := &memSub{ch: make(chan snapshots.Change, subscriberBuffer)}
	m.mu.Lock()
	m.subs[s] = struct{}{}
	m.mu.Unlock()
	go func() {
		<-ctx.Done()
		m.mu.Lock()
		delete(m.subs, s)
		close(s.ch)
		m.mu.Unlock()
	}()
	return s.ch, nil
}

// notifyLocked never blocks: a subscriber whose buffer is full gets one
// Resync once it has room, instead of stalling every writer.
func (m *Memory[T]) notifyLocked(c snapshots.Change) {
	for s := range m.subs {
		if s.missed {
			select {
			case s.ch <- snapshots.Change{Resync: true}:
				s.missed = false
			default:
				continue
			}
		}
		select {
		case s.ch <- c:
		default:
			s.missed = true
		}
	}
}
