package domain

// Allocation of output objects: outputs hold up to millions of them.

import snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"

// objectAllocator hands out objects a few at a time: one array for all
// would be cleared with stores that bypass the caches, and then filled
// from memory.
type objectAllocator struct {
	chunk []snapshotv1.Object
	left  int // objects still to be asked for
	// Room for slices of objects, for objects.
	room []*snapshotv1.Object
}

// object is next, or a new object on its own when a is nil or has
// handed out as many as it was to.
func (a *objectAllocator) object() *snapshotv1.Object {
	if a == nil || (a.left <= 0 && len(a.chunk) == 0) {
		return &snapshotv1.Object{}
	}
	return a.next()
}

// objects is a slice of n objects, cut from a larger array when a is not
// nil; appending to it copies.
func (a *objectAllocator) objects(n int) []*snapshotv1.Object {
	if a == nil {
		return make([]*snapshotv1.Object, n)
	}
	if len(a.room) < n {
		a.room = make([]*snapshotv1.Object, max(n, 256))
	}
	s := a.room[:n:n]
	a.room = a.room[n:]
	return s
}

func (a *objectAllocator) next() *snapshotv1.Object {
	if len(a.chunk) == 0 {
		a.chunk = make([]snapshotv1.Object, min(a.left, 128))
	}
	o := &a.chunk[0]
	a.chunk = a.chunk[1:]
	a.left--
	return o
}
