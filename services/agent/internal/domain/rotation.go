package domain

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The rotation of a mesh's plug-in CA: after a new intermediate is
// written to the cacerts Secret, the pods that hold certificates of the
// old one are restarted in order (istiod, then the gateways, then the
// workloads), and a root that was carried for the transition is dropped.
// The state lives in the Secret's annotations, so that whichever replica
// leads next resumes where the last one stopped.

// RotationPhase is where a rotation stands.
type RotationPhase string

const (
	// RotationNone: no rotation was recorded, or auto-restart is off.
	RotationNone RotationPhase = ""
	// RotationIstiod: istiod's pods are restarted, so that they load the
	// new intermediate; the next phase waits until they are Ready.
	RotationIstiod RotationPhase = "istiod"
	// RotationGateways: the ingress and east-west gateways.
	RotationGateways RotationPhase = "gateways"
	// RotationWorkloads: the pods with the mesh's sidecar.
	RotationWorkloads RotationPhase = "workloads"
	// RotationDropOldRoot: every pod holds a certificate of the new root;
	// root-cert.pem keeps only the new root.
	RotationDropOldRoot RotationPhase = "drop-old-root"
	// RotationDone: nothing left to do.
	RotationDone RotationPhase = "done"
)

// Bounces reports whether pods are restarted in this phase.
func (p RotationPhase) Bounces() bool {
	return p == RotationIstiod || p == RotationGateways || p == RotationWorkloads
}

// Active reports whether the rotation has work left.
func (p RotationPhase) Active() bool { return p.Bounces() || p == RotationDropOldRoot }

// Next is the phase after p; dropOldRoot says the Secret carries an old
// root to drop at the end.
func (p RotationPhase) Next(dropOldRoot bool) RotationPhase {
	switch p {
	case RotationIstiod:
		return RotationGateways
	case RotationGateways:
		return RotationWorkloads
	case RotationWorkloads:
		if dropOldRoot {
			return RotationDropOldRoot
		}
	}
	return RotationDone
}

// Annotations that hold a rotation on the cacerts Secret.
const (
	AnnotationRotationPhase          = "meshplane.dev/rotation-phase"
	AnnotationRotationSerial         = "meshplane.dev/rotation-serial"
	AnnotationRotationRoot           = "meshplane.dev/rotation-root-sha256"
	AnnotationRotationRevisions      = "meshplane.dev/rotation-revisions"
	AnnotationRotationStartedAt      = "meshplane.dev/rotation-started-at"
	AnnotationRotationPhaseStartedAt = "meshplane.dev/rotation-phase-started-at"
	AnnotationRotationBounced        = "meshplane.dev/rotation-bounced"
)

// Rotation is the state of one rotation, as the Secret records it.
type Rotation struct {
	Phase RotationPhase
	// Serial is the hex serial number of the intermediate being rolled
	// out: a rotation recorded for another intermediate is stale.
	Serial string
	// NewRoot is the SHA-256 (hex) of the new root when root-cert.pem
	// also carries old roots for the transition; empty when it does not.
	NewRoot string
	// Revisions are the istiod revisions of the Secret's namespace when
	// the rotation started ("" is the default revision): the gateways and
	// workloads of these revisions are restarted.
	Revisions []string
	StartedAt time.Time
	// PhaseStartedAt: a pod created at or after it counts as restarted in
	// this phase, which is what keeps a resumed rotation from restarting a
	// pod twice.
	PhaseStartedAt time.Time
	// Bounced counts the pods deleted, by phase.
	Bounced map[RotationPhase]int
}

// Annotations encodes the rotation; every key is written, so that a new
// rotation overwrites every trace of the last.
func (r Rotation) Annotations() map[string]string {
	var bounced []string
	for _, p := range []RotationPhase{RotationIstiod, RotationGateways, RotationWorkloads} {
		if n := r.Bounced[p]; n > 0 {
			bounced = append(bounced, fmt.Sprintf("%s=%d", p, n))
		}
	}
	revs := make([]string, len(r.Revisions))
	for i, rev := range r.Revisions {
		revs[i] = cmp.Or(rev, defaultRevisionLabel)
	}
	return map[string]string{
		AnnotationRotationPhase:          string(r.Phase),
		AnnotationRotationSerial:         r.Serial,
		AnnotationRotationRoot:           r.NewRoot,
		AnnotationRotationRevisions:      strings.Join(revs, ","),
		AnnotationRotationStartedAt:      formatTime(r.StartedAt),
		AnnotationRotationPhaseStartedAt: formatTime(r.PhaseStartedAt),
		AnnotationRotationBounced:        strings.Join(bounced, ","),
	}
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// ParseRotation reads a rotation from a Secret's annotations. No phase
// annotation is RotationNone; a malformed one is an error, and the caller
// treats the rotation as unknown rather than guessing.
func ParseRotation(a map[string]string) (Rotation, error) {
	r := Rotation{Phase: RotationPhase(a[AnnotationRotationPhase]), Serial: a[AnnotationRotationSerial], NewRoot: a[AnnotationRotationRoot]}
	switch r.Phase {
	case RotationNone, RotationIstiod, RotationGateways, RotationWorkloads, RotationDropOldRoot, RotationDone:
	default:
		return Rotation{}, fmt.Errorf("annotation %s: unknown phase %q", AnnotationRotationPhase, r.Phase)
	}
	if v := a[AnnotationRotationRevisions]; v != "" {
		for _, rev := range strings.Split(v, ",") {
			r.Revisions = append(r.Revisions, normalizeRevision(rev))
		}
	}
	for _, f := range []struct {
		key string
		to  *time.Time
	}{{AnnotationRotationStartedAt, &r.StartedAt}, {AnnotationRotationPhaseStartedAt, &r.PhaseStartedAt}} {
		if v := a[f.key]; v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return Rotation{}, fmt.Errorf("annotation %s: %w", f.key, err)
			}
			*f.to = t
		}
	}
	if v := a[AnnotationRotationBounced]; v != "" {
		r.Bounced = map[RotationPhase]int{}
		for _, kv := range strings.Split(v, ",") {
			k, n, ok := strings.Cut(kv, "=")
			c, err := strconv.Atoi(n)
			if !ok || err != nil || c < 0 {
				return Rotation{}, fmt.Errorf("annotation %s: bad entry %q", AnnotationRotationBounced, kv)
			}
			r.Bounced[RotationPhase(k)] = c
		}
	}
	if r.Phase.Bounces() && r.PhaseStartedAt.IsZero() {
		return Rotation{}, fmt.Errorf("annotation %s is missing in phase %s", AnnotationRotationPhaseStartedAt, r.Phase)
	}
	return r, nil
}

// Clone returns a copy that shares nothing with r.
func (r Rotation) Clone() Rotation {
	r.Revisions = slices.Clone(r.Revisions)
	r.Bounced = maps.Clone(r.Bounced)
	return r
}

// BouncePod is the part of a pod that a rotation looks at.
type BouncePod struct {
	Namespace, Name, UID string
	Labels               map[string]string
	Controller           OwnerRef
	Sidecar              bool
	SidecarRevision      string
	// Istiod: the pod runs istiod's discovery container.
	Istiod      bool
	Ready       bool
	Terminating bool
	// Finished: the pod succeeded or failed (a Job's); it is neither
	// restarted nor waited for.
	Finished  bool
	CreatedAt time.Time
}

func (p BouncePod) revision() string {
	if p.SidecarRevision != "" {
		return normalizeRevision(p.SidecarRevision)
	}
	return normalizeRevision(p.Labels[LabelRevision])
}

// Group names the set of pods that one controller replaces: a bare pod is
// a group of its own.
func (p BouncePod) Group() string {
	if p.Controller.Name == "" {
		return p.Namespace + "/Pod/" + p.Name
	}
	return p.Namespace + "/" + p.Controller.Kind + "/" + p.Controller.Name
}

// BounceScope says which pods a rotation of the cacerts Secret in
// Namespace restarts. istiod reads cacerts from its own namespace, so every
// istiod there, of any revision, takes the new intermediate.
type BounceScope struct {
	Namespace string
	Revisions []string
	// GatewayLabels select gateway pods (discovery's ingress and
	// east-west gateway labels).
	GatewayLabels []map[string]string
}

// IstiodRevisions returns the revisions of the istiod pods in namespace,
// sorted; the default revision when there is none.
func IstiodRevisions(pods []BouncePod, namespace string) []string {
	seen := map[string]bool{}
	for _, p := range pods {
		if p.Namespace == namespace && p.Istiod {
			seen[p.revision()] = true
		}
	}
	if len(seen) == 0 {
		return []string{""}
	}
	return slices.Sorted(maps.Keys(seen))
}

// PhaseOf says in which phase a pod is restarted; RotationNone for a pod
// of another mesh or without a sidecar.
func (s BounceScope) PhaseOf(p BouncePod) RotationPhase {
	if p.Finished {
		return RotationNone
	}
	if p.Istiod {
		if p.Namespace == s.Namespace {
			return RotationIstiod
		}
		return RotationNone
	}
	if !slices.Contains(s.Revisions, p.revision()) {
		return RotationNone
	}
	for _, sel := range s.GatewayLabels {
		if len(sel) > 0 && matchesAll(p.Labels, sel) {
			return RotationGateways
		}
	}
	if p.Sidecar {
		return RotationWorkloads
	}
	return RotationNone
}

func matchesAll(labels, sel map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// BouncePlan is the next step of a phase.
type BouncePlan struct {
	// Delete are the pods to delete now, sorted by namespace and name.
	Delete []BouncePod
	// Waiting counts the pods the phase still waits for: old pods, pods
	// terminating, and pods missing or not Ready.
	Waiting int
	// Done: every pod of the phase was created since the phase started and
	// is Ready, and each controller has as many Ready pods as expected.
	Done bool
}

// MaxUnavailable is how many pods of a controller of n pods may be down at
// once: the fraction of n rounded down, and at least one.
func MaxUnavailable(n int, fraction float64) int {
	return max(1, int(math.Floor(float64(n)*fraction)))
}

// PlanBounce decides the next step of a phase from its pods. expected
// holds, per group, how many pods the group had when the phase was first
// looked at; a group that is missing is set from pods. Pods created
// before started are old and restarted, at most MaxUnavailable of a group
// down at once; an old pod that is not Ready is deleted at once, since it
// serves nothing.
func PlanBounce(pods []BouncePod, started time.Time, expected map[string]int, fraction float64) BouncePlan {
	groups := map[string][]BouncePod{}
	for _, p := range pods {
		groups[p.Group()] = append(groups[p.Group()], p)
	}
	for g, ps := range groups {
		if _, ok := expected[g]; !ok {
			live := 0
			for _, p := range ps {
				if !p.Terminating {
					live++
				}
			}
			expected[g] = live
		}
	}
	plan := BouncePlan{Done: true}
	for _, g := range slices.Sorted(maps.Keys(expected)) {
		ps := groups[g]
		slices.SortFunc(ps, func(a, b BouncePod) int { return cmp.Compare(a.Name, b.Name) })
		exp := expected[g]
		ready, terminating := 0, 0
		var oldReady, oldUnready []BouncePod
		for _, p := range ps {
			switch {
			case p.Terminating:
				terminating++
			case p.CreatedAt.Before(started):
				if p.Ready {
					ready++
					oldReady = append(oldReady, p)
				} else {
					oldUnready = append(oldUnready, p)
				}
			case p.Ready:
				ready++
			}
		}
		plan.Delete = append(plan.Delete, oldUnready...)
		unavailable := max(0, exp-ready)
		budget := MaxUnavailable(exp, fraction) - unavailable
		for _, p := range oldReady {
			if budget <= 0 {
				break
			}
			plan.Delete = append(plan.Delete, p)
			budget--
		}
		live := 0
		for _, p := range ps {
			if !p.Terminating {
				live++
			}
		}
		old := len(oldReady) + len(oldUnready)
		newPods, newReady := live-old, ready-len(oldReady)
		missing := max(0, exp-live)
		plan.Waiting += old + terminating + (newPods - newReady) + missing
		if old > 0 || terminating > 0 || newReady < newPods || newReady < exp {
			plan.Done = false
		}
	}
	slices.SortFunc(plan.Delete, func(a, b BouncePod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return plan
}
