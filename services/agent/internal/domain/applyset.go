package domain

import (
	"cmp"
	"maps"
	"runtime"
	"slices"
	"sync"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// DesiredObject is one object of an output as the agent applies it: with
// this install's and cluster's ownership labels, and the digest of all of
// it (snapshots.ObjectDigest), which goes into its digest annotation.
type DesiredObject struct {
	Object *snapshotv1.Object
	Key    ObjectKey
	Digest string
	// Rank orders the writes: every object of a rank is written before
	// any object of a higher rank, and objects of one rank in any order.
	Rank int
}

// Desire returns the objects of an output as the agent applies them, in
// the output's order (SortForApply orders the few that are written). The
// ownership labels are enforced whatever translation sent: garbage
// collection trusts them. The digests are computed on every core: an
// output holds tens of thousands of objects.
func Desire(objs []*snapshotv1.Object, install, cluster string) []DesiredObject {
	return DesireReusing(objs, install, cluster, nil)
}

// DesireReusing is Desire taking the digest of an object from prev, when
// prev has an object of the same identity and the same content
// (snapshots.SameObject), instead of computing it: comparing costs a
// fraction of digesting. prev may be nil; it is called from several
// goroutines at once.
func DesireReusing(objs []*snapshotv1.Object, install, cluster string, prev func(ObjectID) *DesiredObject) []DesiredObject {
	out := make([]DesiredObject, len(objs))
	workers := min(runtime.GOMAXPROCS(0), max(1, len(objs)/256))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var d snapshots.ObjectDigester
			for i := w; i < len(objs); i += workers {
				o := owned(objs[i], install, cluster)
				key := KeyOf(o)
				digest := ""
				if prev != nil {
					if p := prev(ObjectIDOf(key)); p != nil && snapshots.SameObject(p.Object, o) {
						digest = p.Digest
					}
				}
				if digest == "" {
					digest = d.Digest(o)
				}
				out[i] = DesiredObject{Object: o, Key: key, Digest: digest, Rank: ApplyRank(o)}
			}
		})
	}
	wg.Wait()
	return out
}

// owned returns o with the ownership labels, o itself when it has them.
func owned(o *snapshotv1.Object, install, cluster string) *snapshotv1.Object {
	l := o.GetLabels()
	if len(l) > 0 && l[snapshots.LabelManagedBy] == install && l[snapshots.LabelCluster] == cluster {
		return o
	}
	c := &snapshotv1.Object{
		ApiVersion: o.GetApiVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(),
		Labels: maps.Clone(l), Annotations: o.GetAnnotations(), Spec: o.GetSpec(),
	}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Labels[snapshots.LabelManagedBy] = install
	c.Labels[snapshots.LabelCluster] = cluster
	return c
}

// SortForApply sorts objects in dependency order, as OrderForApply does.
func SortForApply(objs []*DesiredObject) {
	slices.SortStableFunc(objs, func(a, b *DesiredObject) int {
		return cmp.Or(cmp.Compare(a.Rank, b.Rank),
			cmp.Compare(a.Key.Namespace, b.Key.Namespace), cmp.Compare(a.Key.Name, b.Key.Name))
	})
}

// ApplyRank is the place of o's group in the apply order: kinds that
// others depend on first, and Istio's deny-by-default AuthorizationPolicy
// after every ALLOW policy (see OrderForApply).
func ApplyRank(o *snapshotv1.Object) int {
	r := 2 * kindRank(o.GetKind())
	if allowsNothing(o) {
		r++
	}
	return r
}

// LiveObject is what the agent sees of an object of an output kind in the
// cluster: its metadata, from a metadata-only watch.
type LiveObject struct {
	Key             ObjectKey
	UID             string
	ResourceVersion string
	// Generation moves on with every change of the spec.
	Generation int64
	// Owned says the object carries this install's and cluster's
	// ownership labels: it is Meshplane's to update and delete.
	Owned       bool
	Labels      map[string]string
	Annotations map[string]string
	// SpecWriter is the field manager other than Meshplane's that changed
	// fields of the spec last, and SpecWritten when; empty when there is
	// none. Applied is when Meshplane's apply last changed a field.
	SpecWriter  string
	SpecWritten time.Time
	Applied     time.Time
}

// Digest is the digest annotation: the digest of the object Meshplane
// applied last.
func (l LiveObject) Digest() string { return l.Annotations[snapshots.AnnotationDigest] }

// WrittenSince reports whether another field manager changed the spec
// after Meshplane last applied it, as the managed fields tell. They count
// in whole seconds, so a change in the same second as Meshplane's apply
// is not seen here (a running agent sees it by the generation).
func (l LiveObject) WrittenSince() bool {
	return l.SpecWriter != "" && l.SpecWritten.After(l.Applied)
}

// Applied is what the agent knows to be in the cluster for one owned
// object: the object it last applied or found right, as of a generation.
type Applied struct {
	Key        ObjectKey
	UID        string
	Generation int64
	// Digest is the digest the object carries; empty when the object must
	// be written again whatever its annotation says.
	Digest string
}

// AppliedFrom returns the record of a live owned object.
func AppliedFrom(l LiveObject) Applied {
	return Applied{Key: l.Key, UID: l.UID, Generation: l.Generation, Digest: l.Digest()}
}

// Drift says why a live owned object is not the desired object that the
// agent had applied, or "" when it is. rec is the agent's record of it
// before this observation.
func Drift(d DesiredObject, rec Applied, live LiveObject) string {
	switch {
	case live.Digest() != d.Digest:
		return "digest annotation changed"
	case rec.UID == live.UID && live.Generation > rec.Generation:
		return "spec changed"
	case !subset(d.Object.GetLabels(), live.Labels):
		return "labels changed"
	case !subset(d.Object.GetAnnotations(), live.Annotations):
		return "annotations changed"
	}
	return ""
}
