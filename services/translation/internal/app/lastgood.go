package app

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
)

// LastGoodStore keeps the last valid version of every user resource where
// a restart of the plane and a lost Redis cannot take it: the management
// cluster's API server, which users back up. Translation loads it at start,
// before it publishes anything, and writes each change after a
// translation. Put and Delete are idempotent, so replicas may race.
type LastGoodStore interface {
	Load(ctx context.Context) ([]domain.KeptVersion, error)
	Put(ctx context.Context, v domain.KeptVersion) error
	Delete(ctx context.Context, kind string, key domain.ObjectKey) error
}

// TranslatorOption adds a collaborator to a Translator.
type TranslatorOption func(*Translator)

// WithLastGoodStore keeps the last valid versions in store, so that they
// survive a restart of the plane and a lost Redis (DESIGN.md section 7).
func WithLastGoodStore(store LastGoodStore) TranslatorOption {
	return func(t *Translator) { t.keeper = newLastGoodKeeper(store, t.log) }
}

// versionKey names one resource's last valid version.
type versionKey struct {
	kind string
	key  domain.ObjectKey
}

// lastGoodKeeper mirrors the translator's last valid versions into a
// LastGoodStore: it loads them once, then writes what changed, retrying
// what failed. It is safe for concurrent use.
type lastGoodKeeper struct {
	store LastGoodStore
	log   *slog.Logger
	wake  chan struct{}

	mu     sync.Mutex
	loaded bool
	// stored is what the store holds as far as the keeper knows; pending
	// the writes still to make (nil: delete).
	stored  map[versionKey]domain.KeptVersion
	pending map[versionKey]*domain.KeptVersion
}

func newLastGoodKeeper(store LastGoodStore, log *slog.Logger) *lastGoodKeeper {
	return &lastGoodKeeper{
		store: store, log: log, wake: make(chan struct{}, 1),
		stored: map[versionKey]domain.KeptVersion{}, pending: map[versionKey]*domain.KeptVersion{},
	}
}

// isLoaded says whether the stored versions have been read.
func (k *lastGoodKeeper) isLoaded() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.loaded
}

// load reads the stored records: the last valid versions, and every
// record as it was read, for its first-seen time. ok is false when the
// store could not be read; the caller tries again later.
func (k *lastGoodKeeper) load(ctx context.Context) (domain.LastGood, []domain.KeptVersion, bool) {
	versions, err := k.store.Load(ctx)
	if err != nil {
		k.log.Warn("reading the last valid versions from the management cluster failed; publishing waits for them, at most the safe-start window", "error", err)
		return domain.LastGood{}, nil, false
	}
	lg, err := domain.LastGoodOf(versions)
	if err != nil {
		// A record that does not fit is left out: its resource is treated
		// as never valid until it is valid again.
		k.log.Warn("some stored last valid versions were not read", "error", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, v := range versions {
		k.stored[versionKey{v.Kind, v.Key}] = v
	}
	k.loaded = true
	k.log.Info("read the last valid versions from the management cluster", "records", len(versions), "with_last_valid_version", lg.Len())
	return lg, versions, true
}

// record queues the writes that make the store hold next and the
// first-seen times of seen: one record per resource that has either. A
// record that neither holds is deleted only when its cluster has an input
// (present): a cluster whose input is missing, after a restart or a lost
// Redis, keeps its resources' records until it reports.
func (k *lastGoodKeeper) record(next domain.LastGood, seen *firstSeen, present func(cluster string) bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.loaded {
		return // nothing is written before the stored versions are read
	}
	want := make(map[versionKey]bool, len(k.stored))
	put := func(vk versionKey, v domain.KeptVersion) {
		want[vk] = true
		if old, ok := k.stored[vk]; ok && sameVersion(old, v) {
			// Keep the translator's spec, so the next comparison is by
			// pointer.
			k.stored[vk] = v
			delete(k.pending, vk)
			return
		}
		k.pending[vk] = &v
	}
	next.Each(func(v domain.KeptVersion) {
		vk := versionKey{v.Kind, v.Key}
		if s, ok := seen.lookup(vk); ok && (s.uid == "" || v.UID == "" || s.uid == v.UID) {
			v.FirstSeen = s.at
		}
		put(vk, v)
	})
	seen.each(func(vk versionKey, s seenAt) {
		if !want[vk] {
			put(vk, domain.KeptVersion{Kind: vk.kind, Key: vk.key, UID: s.uid, FirstSeen: s.at})
		}
	})
	for vk := range k.stored {
		if !want[vk] && present(vk.key.Cluster) {
			k.pending[vk] = nil
		}
	}
	if len(k.pending) > 0 {
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
}

func sameVersion(a, b domain.KeptVersion) bool {
	return a.Generation == b.Generation && a.UID == b.UID && a.FirstSeen.Equal(b.FirstSeen) &&
		(a.Spec == b.Spec || (a.Spec != nil && b.Spec != nil && proto.Equal(a.Spec, b.Spec)))
}

// flush makes the pending writes; a failed one stays pending for the next
// flush.
func (k *lastGoodKeeper) flush(ctx context.Context) {
	k.mu.Lock()
	keys := slices.Collect(maps.Keys(k.pending))
	k.mu.Unlock()
	for _, vk := range keys {
		k.mu.Lock()
		v, ok := k.pending[vk]
		k.mu.Unlock()
		if !ok {
			continue
		}
		var err error
		if v == nil {
			err = k.store.Delete(ctx, vk.kind, vk.key)
		} else {
			err = k.store.Put(ctx, *v)
		}
		if err != nil {
			k.log.Warn("writing a last valid version to the management cluster failed; will retry", "kind", vk.kind, "resource", vk.key.String(), "error", err)
			continue
		}
		k.mu.Lock()
		if k.pending[vk] == v {
			delete(k.pending, vk)
			if v == nil {
				delete(k.stored, vk)
			} else {
				k.stored[vk] = *v
			}
		}
		k.mu.Unlock()
	}
}

// pendingCount is the number of writes still to make.
func (k *lastGoodKeeper) pendingCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.pending)
}

// carryOver adds to next the versions of prev whose clusters have no
// input: translation only knows the resources of the inputs it holds, and
// a cluster that has not reported since a restart must not lose them.
func carryOver(next, prev domain.LastGood, present func(cluster string) bool) domain.LastGood {
	var missing []domain.KeptVersion
	prev.Each(func(v domain.KeptVersion) {
		if !present(v.Key.Cluster) {
			missing = append(missing, v)
		}
	})
	if len(missing) == 0 {
		return next
	}
	// next wins for a resource both hold.
	merged, _ := domain.LastGoodOf(append(missing, next.Versions()...))
	return merged
}
