package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
)

// Sync waits for the view of the cluster and rebuilds what the syncer
// knows to be applied from it: the owned objects and their digest
// annotations. Run calls it; call it yourself only to use Apply without
// Run.
func (s *Syncer) Sync(ctx context.Context) error {
	if err := s.applier.Sync(ctx); err != nil {
		return fmt.Errorf("watch the cluster's objects: %w", err)
	}
	s.inCluster = map[domain.ObjectID]domain.Applied{}
	s.suspect = map[domain.ObjectID]string{}
	s.settled = false
	for _, l := range s.applier.Owned() {
		id := domain.ObjectIDOf(l.Key)
		rec := domain.AppliedFrom(l)
		if l.WrittenSince() {
			// Changed by someone else while no agent watched: its digest
			// annotation no longer says what the spec holds.
			rec.Digest = ""
			s.suspect[id] = l.SpecWriter
		}
		s.inCluster[id] = rec
	}
	s.log.Info("found the applied objects in the cluster", "owned", len(s.inCluster), "changed_by_others", len(s.suspect))
	if len(s.inCluster) == 0 && s.detection != nil {
		// Nothing was applied here before: no output's gateway detection
		// is in force, and the first push need not wait for one.
		s.detection.NoneApplied()
	}
	return nil
}

func ref(k domain.ObjectKey) *snapshotv1.ObjectRef {
	return &snapshotv1.ObjectRef{ApiVersion: k.APIVersion, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}
}

// want is an object of the latest snapshot as the syncer applies it.
type want struct {
	domain.DesiredObject
	// source is the object as received: the next snapshot holds the same
	// object when it was made from this one by a delta, and then reuses
	// this record, digest included.
	source *snapshotv1.Object
	// applied is its APPLIED result, made once.
	applied *snapshotv1.ApplyResult
	// seen and look are the last applies whose snapshot held it and that
	// looked at it.
	seen, look uint64
	// pos is its index in the snapshot that held it last: the next one,
	// made by a delta, holds most objects at or near the same index.
	pos int
}

// desire makes the objects of a new snapshot the desired ones, and
// returns the identities whose desired object changed, appeared or went.
// An object the last snapshot held too (the same message: a delta's
// unchanged objects) keeps its record; one with the same identity and
// content (a whole snapshot sent again) keeps its digest.
func (s *Syncer) desire(objs []*snapshotv1.Object) map[domain.ObjectID]struct{} {
	s.gen++
	gen := s.gen
	// The new list goes in the array of the list before the last.
	list := slices.Grow(s.spare[:0], len(objs))[:len(objs)]
	var misses []int
	next := 0 // where in the last list the next object is looked for first
	for i, o := range objs {
		w := (*want)(nil)
		if next < len(s.list) && s.list[next].source == o {
			w = s.list[next]
		} else {
			w = s.bySource[o]
		}
		if w != nil && w.seen != gen {
			next = w.pos + 1
			w.seen, w.pos, list[i] = gen, i, w
			continue
		}
		list[i] = nil
		misses = append(misses, i)
	}
	changed := map[domain.ObjectID]struct{}{}
	var made []domain.DesiredObject
	if len(misses) > 0 {
		fresh := make([]*snapshotv1.Object, len(misses))
		for j, i := range misses {
			fresh[j] = objs[i]
		}
		made = domain.DesireReusing(fresh, s.opts.Install, s.opts.Cluster, func(id domain.ObjectID) *domain.DesiredObject {
			if w := s.desired[id]; w != nil {
				return &w.DesiredObject
			}
			return nil
		})
		for j := range made {
			id := domain.ObjectIDOf(made[j].Key)
			if prev := s.desired[id]; prev == nil || prev.Digest != made[j].Digest || prev.seen == gen {
				changed[id] = struct{}{}
			}
		}
	}
	for j, i := range misses {
		w := &want{DesiredObject: made[j], source: objs[i], seen: gen, pos: i}
		w.applied = &snapshotv1.ApplyResult{Ref: ref(w.Key), Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED}
		s.desired[domain.ObjectIDOf(w.Key)] = w
		s.bySource[objs[i]] = w
		list[i] = w
	}
	for _, w := range s.list {
		if w.seen != gen {
			delete(s.bySource, w.source)
			if id := domain.ObjectIDOf(w.Key); s.desired[id] == w {
				// Not replaced by an object of the same identity: gone
				// from the snapshot.
				delete(s.desired, id)
				changed[id] = struct{}{}
			}
		}
	}
	clear(s.list) // nothing is kept alive by the spare array
	s.spare, s.list = s.list, list
	return changed
}

// lookedAt is the number of objects an apply looked at.
func lookedAt(look map[domain.ObjectID]struct{}, all int) int {
	if look == nil {
		return all
	}
	return len(look)
}

// applyDesired writes the desired objects that the cluster does not hold
// as they are, and returns a result for every object, in the snapshot's
// order. It looks only at the identities in look, or at every object when
// look is nil; the others are in the cluster as they are (settled). ok is
// false when leadership was lost: what was not written yet is left.
func (s *Syncer) applyDesired(ctx context.Context, look map[domain.ObjectID]struct{}) (results []*snapshotv1.ApplyResult, written, failed int, ok bool) {
	for id := range look {
		if w := s.desired[id]; w != nil {
			w.look = s.gen
		}
	}
	results = make([]*snapshotv1.ApplyResult, len(s.list))
	var todo []int
	for i, w := range s.list {
		if look != nil && w.look != s.gen {
			results[i] = w.applied
			continue
		}
		id := domain.ObjectIDOf(w.Key)
		if rec, found := s.inCluster[id]; found && rec.Digest == w.Digest {
			// Only owned objects have a record: no need to ask the view.
			results[i] = w.applied
			continue
		}
		if live, found := s.applier.Get(w.Key); found && !live.Owned {
			// A user's object: left alone, with no call to the API server.
			results[i] = &snapshotv1.ApplyResult{Ref: ref(w.Key), Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_CONFLICT,
				Error: fmt.Sprintf("%v: %s has no ownership labels of this install and cluster", ErrConflict, w.Key)}
			failed++
			s.pending[id] = struct{}{}
			continue
		}
		todo = append(todo, i)
	}
	// Written in dependency order; the results stay in the output's.
	order := make([]*domain.DesiredObject, len(todo))
	for j, i := range todo {
		order[j] = &s.list[i].DesiredObject
	}
	domain.SortForApply(order)
	at := make(map[*domain.DesiredObject]int, len(order))
	for j, d := range order {
		at[d] = j
	}
	outcomes, ok := s.write(ctx, order)
	for _, i := range todo {
		r := outcomes[at[&s.list[i].DesiredObject]]
		if r == nil {
			continue // not written: leadership was lost
		}
		if r == appliedNoRef {
			r = s.list[i].applied
		}
		results[i] = r
		if r.GetOutcome() == snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED {
			written++
		} else {
			failed++
			s.pending[domain.ObjectIDOf(s.list[i].Key)] = struct{}{}
		}
	}
	if !ok {
		return nil, written, failed, false
	}
	return results, written, failed, true
}

// appliedNoRef is the result write gives every object it applied: one
// without the object's reference, which the caller replaces with the
// object's own APPLIED result, made once (want.applied), so that a first
// apply does not make 21,000 more.
var appliedNoRef = &snapshotv1.ApplyResult{Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED}

// write applies objs, rank by rank and up to Workers at once within a
// rank, and records what it wrote. A result is nil for an object not
// written because leadership was lost (ok false), appliedNoRef for one
// applied.
func (s *Syncer) write(ctx context.Context, objs []*domain.DesiredObject) (results []*snapshotv1.ApplyResult, ok bool) {
	results = make([]*snapshotv1.ApplyResult, len(objs))
	// Only what the record needs of each object written: the whole
	// metadata the API server answered with is garbage at once, not held
	// until the last of a first apply's 21,000 writes.
	type record struct {
		uid        string
		generation int64
	}
	lives := make([]record, len(objs))
	ok = s.inRankOrder(ctx, len(objs), func(i int) int { return objs[i].Rank }, func(i int) {
		d := objs[i]
		var live *domain.LiveObject
		if l, found := s.applier.Get(d.Key); found {
			live = &l
		}
		got, err := s.applier.Apply(ctx, *d, live)
		switch {
		case err == nil:
			lives[i] = record{got.UID, got.Generation}
			results[i] = appliedNoRef
		case errors.Is(err, ErrConflict):
			results[i] = &snapshotv1.ApplyResult{Ref: ref(d.Key), Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_CONFLICT, Error: err.Error()}
			s.log.Warn("left a user-owned object alone", "object", d.Key.String())
		default:
			results[i] = &snapshotv1.ApplyResult{Ref: ref(d.Key), Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED, Error: err.Error()}
			s.log.Warn("apply failed", "object", d.Key.String(), "error", err)
		}
	})
	for i, r := range results {
		if r == nil {
			continue
		}
		id := domain.ObjectIDOf(objs[i].Key)
		switch r.GetOutcome() {
		case snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED:
			s.inCluster[id] = domain.Applied{Key: objs[i].Key, UID: lives[i].uid, Generation: lives[i].generation, Digest: objs[i].Digest}
			if manager, was := s.suspect[id]; was {
				delete(s.suspect, id)
				s.corrected(objs[i].Key, "changed while no agent watched", manager)
			}
		case snapshotv1.ApplyOutcome_APPLY_OUTCOME_CONFLICT:
			// Not Meshplane's (any more): never garbage-collected.
			delete(s.inCluster, id)
		}
	}
	return results, ok
}

func (s *Syncer) corrected(key domain.ObjectKey, reason, manager string) {
	s.metrics.DriftCorrected(key.Kind)
	s.log.Info("put back an object that someone else changed", "object", key.String(), "reason", reason, "manager", manager)
}

// collectGarbage deletes the owned objects that the latest snapshot no
// longer holds, in reverse dependency order; with missing clusters it
// holds them instead. It looks only at the identities in look, or at
// every record when look is nil (see applyDesired). ok is false when
// leadership was lost.
func (s *Syncer) collectGarbage(ctx context.Context, missing []string, look map[domain.ObjectID]struct{}) (results []*snapshotv1.ApplyResult, deleted, held, failed int, ok bool) {
	var obsolete []domain.ObjectKey
	if look == nil {
		for id, rec := range s.inCluster {
			if _, want := s.desired[id]; !want {
				obsolete = append(obsolete, rec.Key)
			}
		}
	} else {
		for id := range look {
			if rec, had := s.inCluster[id]; had {
				if _, want := s.desired[id]; !want {
					obsolete = append(obsolete, rec.Key)
				}
			}
		}
	}
	domain.SortForDelete(obsolete)
	if len(missing) > 0 {
		// What the missing clusters' inputs would have kept is not known:
		// nothing is deleted until an output built from every expected
		// cluster's input arrives.
		for _, k := range obsolete {
			results = append(results, &snapshotv1.ApplyResult{Ref: ref(k), Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_DELETION_HELD})
			s.pending[domain.ObjectIDOf(k)] = struct{}{}
		}
		if len(obsolete) > 0 {
			s.log.Warn("deletions held: the output was built without the inputs of expected clusters", "held", len(obsolete), "missing_clusters", missing)
		}
		return results, 0, len(obsolete), 0, true
	}
	outcomes := make([]*snapshotv1.ApplyResult, len(obsolete))
	rank := func(i int) int { return -domain.ApplyRank(&snapshotv1.Object{Kind: obsolete[i].Kind}) }
	ok = s.inRankOrder(ctx, len(obsolete), rank, func(i int) {
		k := obsolete[i]
		live, found := s.applier.Get(k)
		if !found || !live.Owned {
			// Not seen yet (created a moment ago) or taken by a user: the
			// record's UID is the object this agent applied.
			rec := s.inClusterRecord(k)
			live = domain.LiveObject{Key: k, UID: rec.UID, Owned: true}
		}
		if err := s.applier.Delete(ctx, live); err != nil {
			outcomes[i] = &snapshotv1.ApplyResult{Ref: ref(k), Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED, Error: "delete: " + err.Error()}
			s.log.Warn("delete failed", "object", k.String(), "error", err)
			return
		}
		outcomes[i] = &snapshotv1.ApplyResult{Ref: ref(k), Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_DELETED}
	})
	for i, r := range outcomes {
		if r == nil {
			continue
		}
		results = append(results, r)
		if r.GetOutcome() == snapshotv1.ApplyOutcome_APPLY_OUTCOME_DELETED {
			deleted++
			delete(s.inCluster, domain.ObjectIDOf(obsolete[i]))
		} else {
			failed++
			s.pending[domain.ObjectIDOf(obsolete[i])] = struct{}{}
		}
	}
	return results, deleted, 0, failed, ok
}

// inClusterRecord reads the record of k; the workers only read the map.
func (s *Syncer) inClusterRecord(k domain.ObjectKey) domain.Applied {
	return s.inCluster[domain.ObjectIDOf(k)]
}

// inRankOrder runs do(i) for i in [0, n): every i of one rank before any
// of the next, i being in nondecreasing rank order, and up to Workers at
// once within a rank. Each worker checks leadership before each object,
// so that a replica that lost it stops between objects; ok is false then.
func (s *Syncer) inRankOrder(ctx context.Context, n int, rank func(i int) int, do func(i int)) (ok bool) {
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && rank(hi) == rank(lo) {
			hi++
		}
		var (
			next    atomic.Int64
			stopped atomic.Bool
			wg      sync.WaitGroup
		)
		next.Store(int64(lo))
		for range min(s.opts.Workers, hi-lo) {
			wg.Go(func() {
				for !stopped.Load() {
					i := int(next.Add(1) - 1)
					if i >= hi {
						return
					}
					if !s.leading(ctx) {
						stopped.Store(true)
						return
					}
					do(i)
				}
			})
		}
		wg.Wait()
		if stopped.Load() {
			return false
		}
		lo = hi
	}
	return true
}

// observe takes the view's changes, keeps what the syncer knows of the
// cluster current, and puts back the owned objects of the latest snapshot
// that someone else changed or deleted. It reports whether everything it
// had to put back was.
func (s *Syncer) observe(ctx context.Context) bool {
	type drift struct{ reason, manager string }
	var (
		restore []*domain.DesiredObject
		why     []drift
	)
	for _, ch := range s.applier.TakeChanges() {
		l := ch.Object
		id := domain.ObjectIDOf(l.Key)
		// Whatever the change, the next apply looks at this object.
		s.pending[id] = struct{}{}
		rec, had := s.inCluster[id]
		var d *domain.DesiredObject
		if w := s.desired[id]; w != nil {
			d = &w.DesiredObject
		}
		if ch.Gone || !l.Owned {
			if !had || rec.UID != l.UID {
				continue // not Meshplane's, or an object replaced since
			}
			delete(s.inCluster, id)
			if d != nil && rec.Digest == d.Digest {
				reason := "deleted"
				if !ch.Gone {
					// Apply finds it a user's now, and leaves it alone.
					reason = "ownership labels removed"
				}
				restore, why = append(restore, d), append(why, drift{reason, l.SpecWriter})
			}
			continue
		}
		if had && rec.UID == l.UID && l.Generation < rec.Generation {
			continue // older than what this agent wrote since
		}
		if !had || rec.UID != l.UID {
			rec = domain.AppliedFrom(l)
		}
		s.inCluster[id] = domain.AppliedFrom(l)
		if d == nil || (had && rec.Digest != d.Digest) {
			// Not in the snapshot (garbage collection's), or not applied
			// yet: the apply of the snapshot writes it.
			continue
		}
		if reason := domain.Drift(*d, rec, l); reason != "" {
			next := s.inCluster[id]
			next.Digest = ""
			s.inCluster[id] = next
			restore, why = append(restore, d), append(why, drift{reason, l.SpecWriter})
		}
	}
	if len(restore) == 0 || !s.leading(ctx) {
		return true
	}
	order := make([]int, len(restore))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return restore[a].Rank - restore[b].Rank })
	sorted := make([]*domain.DesiredObject, len(order))
	whys := make([]drift, len(order))
	for i, j := range order {
		sorted[i], whys[i] = restore[j], why[j]
	}
	restore, why = sorted, whys
	results, _ := s.write(ctx, restore)
	ok := true
	for i, r := range results {
		switch r.GetOutcome() {
		case snapshotv1.ApplyOutcome_APPLY_OUTCOME_APPLIED:
			s.corrected(restore[i].Key, why[i].reason, why[i].manager)
		case snapshotv1.ApplyOutcome_APPLY_OUTCOME_CONFLICT:
		default:
			ok = false
		}
	}
	return ok
}
