package app

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
)

// MeshPods lists and restarts the pods of the cluster's meshes, for the
// rotation of a plug-in CA.
type MeshPods interface {
	// List returns the pods the agent can see, with their readiness.
	List(ctx context.Context) ([]domain.BouncePod, error)
	// Delete deletes a pod only while it still has uid, so that a pod
	// that a controller replaced meanwhile is left alone. A pod already
	// gone is not an error.
	Delete(ctx context.Context, namespace, name, uid string) error
}

// RotationMetrics records what rotations did.
type RotationMetrics interface {
	// RotationFinished counts a rotation that ended: "completed",
	// "superseded" (a newer intermediate came first) or "abandoned"
	// (auto-restart was turned off mid-way).
	RotationFinished(result string)
	// PodsBounced counts pods deleted, by phase.
	PodsBounced(phase string, n int)
}

type nopRotationMetrics struct{}

func (nopRotationMetrics) RotationFinished(string) {}
func (nopRotationMetrics) PodsBounced(string, int) {}

// Results of RotationMetrics.RotationFinished.
const (
	RotationCompleted  = "completed"
	RotationSuperseded = "superseded"
	RotationAbandoned  = "abandoned"
)

// Defaults of the rotation options.
const (
	defaultMaxUnavailable = 0.25
	defaultBouncePoll     = 2 * time.Second
	defaultBounceStall    = 10 * time.Minute
)

// RotationStatus is the state of a rotation, for /debug/cacerts.
type RotationStatus struct {
	Phase          string         `json:"phase"`
	Serial         string         `json:"serial,omitempty"`
	StartedAt      time.Time      `json:"startedAt,omitzero"`
	PhaseStartedAt time.Time      `json:"phaseStartedAt,omitzero"`
	Bounced        map[string]int `json:"bounced,omitempty"`
	// Waiting counts the pods the phase waits for (old, terminating,
	// missing or not Ready) after the last pass.
	Waiting int `json:"waiting,omitempty"`
	// DualRoot: root-cert.pem holds the old roots as well as the new one.
	DualRoot bool   `json:"dualRoot,omitempty"`
	Error    string `json:"error,omitempty"`
}

// bounceState is what one term of leadership remembers about the phase
// it drives; a new leader starts it afresh from the Secret.
type bounceState struct {
	key          string // serial and phase
	expected     map[string]int
	lastWaiting  int
	lastProgress time.Time
}

func serialHex(serial []byte) string { return hex.EncodeToString(serial) }

func rootFingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// carryRoots puts the roots that the Secret held, other than the new one,
// after the new root in s's root-cert.pem, so that istiod and the proxies
// trust both while the pods move to the new intermediate. It returns the
// new root's fingerprint, or "" when nothing was carried.
func carryRoots(s *CASecret, heldRootPEM []byte) (string, error) {
	newRoots, err := pki.ParseCertificates(s.Data[RootCertKey])
	if err != nil {
		return "", fmt.Errorf("new root: %w", err)
	}
	old, err := pki.ParseCertificates(heldRootPEM)
	if err != nil {
		return "", nil // nothing usable to carry
	}
	seen := map[string]bool{}
	for _, c := range newRoots {
		seen[rootFingerprint(c)] = true
	}
	all := newRoots
	for _, c := range old {
		if fp := rootFingerprint(c); !seen[fp] {
			seen[fp] = true
			all = append(all, c)
		}
	}
	if len(all) == len(newRoots) {
		return "", nil
	}
	s.Data[RootCertKey] = pki.EncodeCertificates(all...)
	return rootFingerprint(newRoots[0]), nil
}

// startRotation prepares a freshly issued Secret: it carries the old roots
// when the root changes (or a transition is still under way), and records
// the rotation that restarts the pods when auto-restart is on. It reports
// whether the new Secret supersedes a rotation in progress.
func (c *CACerts) startRotation(s *CASecret, ic *snapshotv1.IssuedCertificate, stored StoredSecret, held *domain.HeldCA, reason string, serial []byte, now time.Time, log *slog.Logger) (superseded bool) {
	var prev domain.Rotation
	if held != nil && held.Owned {
		prev, _ = domain.ParseRotation(stored.Annotations)
	}
	bounce := ic.GetAutoRestartPods() && c.pods != nil
	var newRoot string
	if held != nil && held.Complete && (reason == domain.ReasonRootChanged || (bounce && prev.Phase.Active())) {
		fp, err := carryRoots(s, stored.Data[RootCertKey])
		if err != nil {
			log.Warn("old roots not carried into root-cert.pem", "error", err)
		}
		newRoot = fp
	}
	if prev.Phase.Active() {
		log.Info("a rotation in progress is superseded by a new intermediate", "phase", prev.Phase, "serial", prev.Serial)
	}
	rot := domain.Rotation{Phase: domain.RotationNone, Serial: serialHex(serial), NewRoot: newRoot, StartedAt: now}
	if bounce {
		rot.Phase, rot.PhaseStartedAt = domain.RotationIstiod, now.Truncate(time.Second)
	}
	maps.Copy(s.Annotations, rot.Annotations())
	return prev.Phase.Active()
}

// rotate drives the rotation recorded on a current Secret one step and
// returns when to look again (zero: nothing left to do).
func (c *CACerts) rotate(ctx context.Context, st *caState, ic *snapshotv1.IssuedCertificate, stored StoredSecret, held *domain.HeldCA, log *slog.Logger) time.Time {
	now := c.now()
	rot, err := domain.ParseRotation(stored.Annotations)
	if err != nil {
		c.setRotation(st, &RotationStatus{Error: err.Error()})
		log.Warn("the rotation state on the cacerts Secret does not parse; left alone", "error", err)
		return time.Time{}
	}
	status := rotationStatusOf(rot)
	c.setRotation(st, status)
	if !rot.Phase.Active() {
		return time.Time{}
	}
	if rot.Serial != serialHex(held.Serial) {
		// Someone wrote another intermediate without a rotation: the state
		// describes a CA that is gone.
		status.Error = "the rotation was recorded for another intermediate; left alone"
		c.setRotation(st, status)
		return time.Time{}
	}
	step := rotationStep{st: st, ic: ic, stored: stored, rot: rot, status: status, log: log, now: now}
	switch {
	case rot.Phase.Bounces() && (!ic.GetAutoRestartPods() || c.pods == nil):
		return c.stopRotation(ctx, step)
	case rot.Phase == domain.RotationDropOldRoot:
		return c.dropOldRoots(ctx, step)
	}
	return c.bounceStep(ctx, step)
}

// rotationStep is what one step of a rotation works on: the state, the
// certificate and the Secret it is for, the rotation recorded there and
// the status being reported.
type rotationStep struct {
	st     *caState
	ic     *snapshotv1.IssuedCertificate
	stored StoredSecret
	rot    domain.Rotation
	status *RotationStatus
	log    *slog.Logger
	now    time.Time
}

// rotationStatusOf is the status that reports rot; nil for no rotation.
func rotationStatusOf(rot domain.Rotation) *RotationStatus {
	if rot.Phase == domain.RotationNone && rot.Serial == "" {
		return nil
	}
	status := &RotationStatus{
		Phase: string(rot.Phase), Serial: rot.Serial, StartedAt: rot.StartedAt, PhaseStartedAt: rot.PhaseStartedAt,
		DualRoot: rot.NewRoot != "" && rot.Phase != domain.RotationDone,
	}
	for p, n := range rot.Bounced {
		if status.Bounced == nil {
			status.Bounced = map[string]int{}
		}
		status.Bounced[string(p)] = n
	}
	return status
}

// failed records a failed step (rotationFailed) and returns when to try
// again.
func (c *CACerts) failed(s rotationStep, err error) time.Time {
	return c.rotationFailed(s.st, s.status, s.log, err, s.now)
}

// stopRotation ends a rotation whose auto-restart was turned off: no more
// restarts, and the old root stays, which the pods not yet restarted
// still need; the next intermediate drops it.
func (c *CACerts) stopRotation(ctx context.Context, s rotationStep) time.Time {
	rot := s.rot
	rot.Phase = domain.RotationNone
	if err := c.writeRotation(ctx, s.stored, s.ic, rot, nil); err != nil {
		return c.failed(s, err)
	}
	c.rotationMetrics.RotationFinished(RotationAbandoned)
	s.log.Info("auto-restart is off: the rotation stops here", "serial", rot.Serial)
	c.setRotation(s.st, &RotationStatus{Phase: string(rot.Phase), Serial: rot.Serial, DualRoot: rot.NewRoot != ""})
	return time.Time{}
}

// dropOldRoots is the last phase: every pod holds a certificate of the
// new root, so root-cert.pem keeps only that root.
func (c *CACerts) dropOldRoots(ctx context.Context, s rotationStep) time.Time {
	rot := s.rot
	roots, err := pki.ParseCertificates(s.stored.Data[RootCertKey])
	if err != nil {
		return c.failed(s, fmt.Errorf("root-cert.pem: %w", err))
	}
	var keep []*x509.Certificate
	for _, r := range roots {
		if rootFingerprint(r) == rot.NewRoot {
			keep = append(keep, r)
		}
	}
	if len(keep) == 0 {
		return c.failed(s, errors.New("root-cert.pem lacks the new root; the old roots are kept"))
	}
	data := maps.Clone(s.stored.Data)
	data[RootCertKey] = pki.EncodeCertificates(keep...)
	rot.Phase = domain.RotationDone
	if err := c.writeRotation(ctx, s.stored, s.ic, rot, data); err != nil {
		return c.failed(s, err)
	}
	c.rotationMetrics.RotationFinished(RotationCompleted)
	s.log.Info("every pod holds a certificate of the new root: dropped the old roots from root-cert.pem", "serial", rot.Serial)
	s.status.Phase, s.status.DualRoot = string(rot.Phase), false
	c.setRotation(s.st, s.status)
	return time.Time{}
}

// bounceStep restarts the next pods of a restarting phase, and moves to
// the next phase once every pod of this one is restarted.
func (c *CACerts) bounceStep(ctx context.Context, s rotationStep) time.Time {
	rot, status, now := s.rot, s.status, s.now
	pods, err := c.pods.List(ctx)
	if err != nil {
		return c.failed(s, fmt.Errorf("list pods: %w", err))
	}
	write := false
	if len(rot.Revisions) == 0 {
		rot.Revisions = domain.IstiodRevisions(pods, s.ic.GetSecretNamespace())
		write = true
	}
	plan := c.planBounce(s, rot, pods)
	deleted, delErr := c.bouncePods(ctx, s, plan)
	if deleted > 0 {
		c.rotationMetrics.PodsBounced(string(rot.Phase), deleted)
		if rot.Bounced == nil {
			rot.Bounced = map[domain.RotationPhase]int{}
		}
		rot.Bounced[rot.Phase] += deleted
		write = true
	}
	if delErr == nil && plan.Done {
		prevPhase := rot.Phase
		rot.Phase = rot.Phase.Next(rot.NewRoot != "")
		rot.PhaseStartedAt = now.Truncate(time.Second)
		write = true
		s.log.Info("rotation phase done", "phase", prevPhase, "next", rot.Phase, "bounced", rot.Bounced[prevPhase])
	}
	if write {
		// A cancelled context (leadership lost) does not write: the next
		// leader reads the pods themselves, and a pod created since the
		// phase started counts as restarted whatever the counts say.
		if ctx.Err() != nil {
			return time.Time{}
		}
		if err := c.writeRotation(ctx, s.stored, s.ic, rot, nil); err != nil {
			if errors.Is(err, ErrSecretChanged) {
				return now // read it again
			}
			return c.failed(s, err)
		}
		if rot.Phase == domain.RotationDone {
			c.rotationMetrics.RotationFinished(RotationCompleted)
			s.log.Info("rotation completed", "serial", rot.Serial, "bounced", rot.Bounced)
		}
	}
	status.Phase, status.PhaseStartedAt, status.Waiting = string(rot.Phase), rot.PhaseStartedAt, plan.Waiting
	if plan.Done {
		status.Waiting = 0
	}
	status.Bounced = map[string]int{}
	for p, n := range rot.Bounced {
		status.Bounced[string(p)] = n
	}
	if delErr != nil {
		if ctx.Err() != nil {
			c.setRotation(s.st, status)
			return time.Time{}
		}
		return c.failed(s, delErr)
	}
	c.mu.Lock()
	s.st.rotationBackoff.Reset()
	c.mu.Unlock()
	c.setRotation(s.st, status)
	switch {
	case rot.Phase == domain.RotationDone:
		return time.Time{}
	case plan.Done:
		return now // the next phase at once
	}
	return now.Add(c.bouncePoll)
}

// planBounce plans the restarts of the pods of rot's phase, expecting
// those there now when nothing moved for bounceStall (a controller scaled
// down, or a pod deleted for good).
func (c *CACerts) planBounce(s rotationStep, rot domain.Rotation, pods []domain.BouncePod) domain.BouncePlan {
	scope := domain.BounceScope{Namespace: s.ic.GetSecretNamespace(), Revisions: rot.Revisions, GatewayLabels: c.currentGatewayLabels()}
	var phasePods []domain.BouncePod
	for _, p := range pods {
		if scope.PhaseOf(p) == rot.Phase {
			phasePods = append(phasePods, p)
		}
	}
	c.mu.Lock()
	key := rot.Serial + "/" + string(rot.Phase)
	if s.st.bounce.key != key {
		s.st.bounce = bounceState{key: key, expected: map[string]int{}, lastProgress: s.now, lastWaiting: -1}
	}
	bs := &s.st.bounce
	c.mu.Unlock()
	plan := domain.PlanBounce(phasePods, rot.PhaseStartedAt, bs.expected, c.maxUnavailable)
	if len(plan.Delete) > 0 || plan.Waiting != bs.lastWaiting {
		bs.lastProgress, bs.lastWaiting = s.now, plan.Waiting
	} else if !plan.Done && s.now.Sub(bs.lastProgress) >= c.bounceStall {
		s.log.Warn("pods of the phase did not come back; expecting the pods there are now", "phase", rot.Phase, "waiting", plan.Waiting, "stalled_for", s.now.Sub(bs.lastProgress))
		bs.expected = map[string]int{}
		bs.lastProgress = s.now
		plan = domain.PlanBounce(phasePods, rot.PhaseStartedAt, bs.expected, c.maxUnavailable)
	}
	return plan
}

// bouncePods deletes the pods plan restarts, and returns how many it
// deleted and the error that stopped it.
func (c *CACerts) bouncePods(ctx context.Context, s rotationStep, plan domain.BouncePlan) (int, error) {
	deleted := 0
	for _, p := range plan.Delete {
		if ctx.Err() != nil {
			return deleted, ctx.Err()
		}
		if err := c.pods.Delete(ctx, p.Namespace, p.Name, p.UID); err != nil {
			return deleted, fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		deleted++
		s.log.Info("restarted a pod for the new intermediate", "phase", s.rot.Phase, "pod", p.Namespace+"/"+p.Name)
	}
	return deleted, nil
}

// writeRotation records rot on the Secret, with data when it changes.
func (c *CACerts) writeRotation(ctx context.Context, stored StoredSecret, ic *snapshotv1.IssuedCertificate, rot domain.Rotation, data map[string][]byte) error {
	if data == nil {
		data = stored.Data
	}
	annotations := maps.Clone(stored.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	maps.Copy(annotations, rot.Annotations())
	err := c.store.Update(ctx, CASecret{
		Namespace: ic.GetSecretNamespace(), Name: ic.GetSecretName(), Data: data, Annotations: annotations,
	}, stored.ResourceVersion)
	if err != nil {
		return fmt.Errorf("record the rotation on Secret %s/%s: %w", ic.GetSecretNamespace(), ic.GetSecretName(), err)
	}
	return nil
}

// setRotation publishes a copy of r: Status hands it to readers while the
// pass goes on changing r.
func (c *CACerts) setRotation(st *caState, r *RotationStatus) {
	if r != nil {
		cp := *r
		cp.Bounced = maps.Clone(r.Bounced)
		r = &cp
	}
	c.mu.Lock()
	st.status.Rotation = r
	c.mu.Unlock()
}

// rotationFailed records a failed step; the CA itself stays current.
func (c *CACerts) rotationFailed(st *caState, status *RotationStatus, log *slog.Logger, err error, now time.Time) time.Time {
	c.metrics.CACertsFailed("rotation")
	c.mu.Lock()
	wait := st.rotationBackoff.Next()
	c.mu.Unlock()
	if status == nil {
		status = &RotationStatus{}
	}
	status.Error = err.Error()
	c.setRotation(st, status)
	log.Warn("rotation step failed; retrying", "phase", status.Phase, "error", err, "retry_in", wait)
	return now.Add(wait)
}

// currentGatewayLabels are the labels of the gateway pods: discovery's,
// with the gateway detector of the last output snapshot when there is one.
func (c *CACerts) currentGatewayLabels() []map[string]string {
	if c.detection == nil {
		return c.gatewayLabels
	}
	o := c.discovery.WithDetector(c.detection.Get())
	return []map[string]string{o.IngressGatewayLabels, o.EastWestGatewayLabels}
}
