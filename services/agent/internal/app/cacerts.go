package app

import (
	"bytes"
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"google.golang.org/protobuf/proto"
)

// The keys of Istio's plug-in CA Secret ("cacerts").
const (
	CACertKey    = "ca-cert.pem"
	CAKeyKey     = "ca-key.pem"
	RootCertKey  = "root-cert.pem"
	CertChainKey = "cert-chain.pem"
)

// Annotations the agent writes on a cacerts Secret, so that a restarted
// agent (or another replica) knows what it holds without asking anyone.
const (
	AnnotationRootGeneration = "meshplane.dev/cacerts-root-generation"
	AnnotationTrustDomain    = "meshplane.dev/cacerts-trust-domain"
	AnnotationExpiresAt      = "meshplane.dev/cacerts-expires-at"
	AnnotationVirtualMesh    = "meshplane.dev/cacerts-virtual-mesh"
	AnnotationMesh           = "meshplane.dev/cacerts-mesh"
)

// KeyAlgorithm is the key type of an intermediate CA.
type KeyAlgorithm = networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_KeyAlgorithm

// IntermediateRequest asks the registration service to sign an istiod
// intermediate CA.
type IntermediateRequest struct {
	VirtualMeshNamespace, VirtualMeshName string
	MeshNamespace, MeshName               string
	CSRPEM                                []byte
	// TTL is the lifetime asked for; zero leaves it to the server.
	TTL time.Duration
}

// SignedIntermediate is the registration service's answer.
type SignedIntermediate struct {
	CertPEM  []byte // the intermediate
	ChainPEM []byte // the intermediate, then the root
	RootPEM  []byte
}

// IntermediateSigner calls RegistrationService.SignIntermediate over the
// agent's mTLS identity.
type IntermediateSigner interface {
	SignIntermediate(ctx context.Context, req IntermediateRequest) (SignedIntermediate, error)
}

// StoredSecret is a Secret as the CA store reads it.
type StoredSecret struct {
	// Owned: the Secret carries this install's and cluster's ownership
	// labels.
	Owned           bool
	ResourceVersion string
	Data            map[string][]byte
	Annotations     map[string]string
}

// CASecret is a cacerts Secret to write.
type CASecret struct {
	Namespace, Name string
	Data            map[string][]byte
	Annotations     map[string]string
}

// ErrSecretNotFound is returned by CASecretStore.Get for a missing Secret.
var ErrSecretNotFound = errors.New("secret not found")

// ErrSecretChanged is returned by CASecretStore.Update when the Secret is
// no longer at the version that was read: someone else wrote it since.
var ErrSecretChanged = errors.New("secret changed since it was read")

// CASecretStore reads and writes istiod's plug-in CA Secrets.
type CASecretStore interface {
	// Get returns the Secret, or ErrSecretNotFound.
	Get(ctx context.Context, namespace, name string) (StoredSecret, error)
	// Create creates the Secret with the ownership labels. It returns
	// ErrConflict (wrapped) when a Secret of that name exists.
	Create(ctx context.Context, s CASecret) error
	// Update replaces the data and annotations of an owned Secret that is
	// still at resourceVersion; otherwise it returns ErrSecretChanged or
	// ErrConflict (wrapped). It never touches a Secret the user owns.
	Update(ctx context.Context, s CASecret, resourceVersion string) error
}

// CACertsMetrics records what the cacerts manager did.
type CACertsMetrics interface {
	// CACertsIssued counts an intermediate written, by reason.
	CACertsIssued(reason string)
	// CACertsFailed counts a failed attempt, by stage: "read", "key",
	// "sign", "verify", "write" or "invalid".
	CACertsFailed(stage string)
	// CACertsObserved reports the state of every wanted CA after a pass.
	CACertsObserved(states []CACertsStatus)
}

type nopCACertsMetrics struct{}

func (nopCACertsMetrics) CACertsIssued(string)            {}
func (nopCACertsMetrics) CACertsFailed(string)            {}
func (nopCACertsMetrics) CACertsObserved([]CACertsStatus) {}

// States of a wanted CA.
const (
	CAStatePending  = "pending"  // not looked at yet
	CAStateCurrent  = "current"  // held and valid
	CAStateConflict = "conflict" // the user's own Secret is there: left alone
	CAStateFailing  = "failing"  // the last attempt failed; retrying
)

// CACertsStatus is the state of one wanted CA, for the admin endpoint,
// metrics and acknowledgements.
type CACertsStatus struct {
	Namespace      string    `json:"namespace"`
	Name           string    `json:"name"`
	VirtualMesh    string    `json:"virtualMesh"`
	Mesh           string    `json:"mesh"`
	State          string    `json:"state"`
	RootGeneration string    `json:"rootGeneration,omitempty"`
	ExpiresAt      time.Time `json:"expiresAt,omitzero"`
	RenewAt        time.Time `json:"renewAt,omitzero"`
	Error          string    `json:"error,omitempty"`
	// Failures counts the attempts that failed in a row.
	Failures int `json:"failures,omitempty"`
	// Rotation is the restart of the mesh's pods after a new
	// intermediate, when one was recorded on the Secret.
	Rotation *RotationStatus `json:"rotation,omitempty"`
}

// How often a Secret that the user owns is looked at again, so that the
// agent takes over once the user removes it. A new snapshot also triggers
// a look.
const conflictRecheck = 5 * time.Minute

// signTimeout bounds one SignIntermediate call, so that a hung server
// delays the other meshes' CAs by no more than this.
const signTimeout = 30 * time.Second

// leaderRecheck is how often a non-leader asks whether it leads now.
const leaderRecheck = 5 * time.Second

// CACertsOptions configures a CACerts manager. Every field is optional.
type CACertsOptions struct {
	// Leader reports whether this replica leads; only the leader issues
	// and writes. Default: always.
	Leader func() bool
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// NewKey makes the intermediate's key. Default: NewCAKey.
	NewKey  func(KeyAlgorithm) (crypto.Signer, error)
	Metrics CACertsMetrics
	Log     *slog.Logger
	// RetryMin and RetryMax bound the jittered backoff after a failure.
	// Default: 1s and 5m.
	RetryMin, RetryMax time.Duration

	// Pods restarts the mesh's pods after a new intermediate when the
	// IssuedCertificate asks for it (auto_restart_pods). Nil: never.
	Pods MeshPods
	// GatewayLabels select the gateway pods, restarted after istiod and
	// before the workloads (discovery's gateway labels).
	GatewayLabels []map[string]string
	// GatewayDetection, when set, holds the gateway detector of the output
	// snapshots, which overrides Discovery, the agent's own gateway rules:
	// together they replace GatewayLabels, so that the gateways restarted
	// are those that discovery finds.
	GatewayDetection *GatewayDetection
	Discovery        domain.Options
	// MaxUnavailable is the fraction of a controller's pods that may be
	// down at once while they restart (at least one pod). Default: 0.25.
	MaxUnavailable float64
	// BouncePoll is how often a phase's pods are looked at while it
	// waits for them. Default: 2s.
	BouncePoll time.Duration
	// BounceStall is how long a phase waits for missing pods before it
	// expects only the pods there are. Default: 10m.
	BounceStall     time.Duration
	RotationMetrics RotationMetrics
}

type secretKey struct{ namespace, name string }

type caState struct {
	ic      *snapshotv1.IssuedCertificate
	status  CACertsStatus
	backoff Backoff
	// retryAt holds off the next attempt after a failure.
	retryAt time.Time
	// reported: the conflict was logged; it is logged again only after
	// it went away.
	reported bool
	// bounce and rotationBackoff belong to the rotation of this term.
	bounce          bounceState
	rotationBackoff Backoff
}

// CACerts keeps, for each IssuedCertificate of the latest output snapshot,
// istiod's plug-in CA Secret: it makes a key in the cluster, has the
// registration service sign an intermediate with the VirtualMesh's root,
// and writes the Secret; it renews at 75-80% of the lifetime, and at once
// when the root changes.
//
// It never overwrites a Secret without Meshplane's ownership labels, and
// it never deletes a cacerts Secret: when an IssuedCertificate leaves the
// output, the Secret stays, because istiod needs it to start again.
//
// It runs apart from the syncer: signing that fails or hangs never holds
// up the Istio objects.
type CACerts struct {
	signer  IntermediateSigner
	store   CASecretStore
	leader  func() bool
	now     func() time.Time
	newKey  func(KeyAlgorithm) (crypto.Signer, error)
	metrics CACertsMetrics
	log     *slog.Logger
	retry   Backoff

	pods            MeshPods
	gatewayLabels   []map[string]string
	detection       *GatewayDetection
	discovery       domain.Options
	maxUnavailable  float64
	bouncePoll      time.Duration
	bounceStall     time.Duration
	rotationMetrics RotationMetrics

	poke chan struct{}
	// changed is signalled when Results changes.
	changed chan struct{}
	// pass serializes Reconcile; lastResults is what Results said after
	// the previous pass.
	pass        sync.Mutex
	lastResults string

	mu      sync.Mutex
	desired []*snapshotv1.IssuedCertificate
	states  map[secretKey]*caState
}

// NewCACerts returns a manager. Nothing happens until SetDesired and Run
// (or Reconcile).
func NewCACerts(signer IntermediateSigner, store CASecretStore, o CACertsOptions) *CACerts {
	c := &CACerts{
		signer: signer, store: store,
		leader: o.Leader, now: o.Now, newKey: o.NewKey, metrics: o.Metrics, log: o.Log,
		retry:   Backoff{Min: cmp.Or(o.RetryMin, time.Second), Max: cmp.Or(o.RetryMax, 5*time.Minute)},
		poke:    make(chan struct{}, 1),
		changed: make(chan struct{}, 1),
		states:  map[secretKey]*caState{},

		pods: o.Pods, gatewayLabels: o.GatewayLabels, rotationMetrics: o.RotationMetrics,
		detection: o.GatewayDetection, discovery: o.Discovery,
		maxUnavailable: cmp.Or(o.MaxUnavailable, defaultMaxUnavailable),
		bouncePoll:     cmp.Or(o.BouncePoll, defaultBouncePoll),
		bounceStall:    cmp.Or(o.BounceStall, defaultBounceStall),
	}
	if c.rotationMetrics == nil {
		c.rotationMetrics = nopRotationMetrics{}
	}
	if c.leader == nil {
		c.leader = func() bool { return true }
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.newKey == nil {
		c.newKey = NewCAKey
	}
	if c.metrics == nil {
		c.metrics = nopCACertsMetrics{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c
}

// SetDesired sets the IssuedCertificates of the latest applied snapshot. It
// does not block: the work happens in Run.
func (c *CACerts) SetDesired(ics []*snapshotv1.IssuedCertificate) {
	c.mu.Lock()
	c.desired = slices.Clone(ics)
	c.mu.Unlock()
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

// Status returns the state of every wanted CA, sorted by Secret.
func (c *CACerts) Status() []CACertsStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]CACertsStatus, 0, len(c.states))
	for _, st := range c.states {
		out = append(out, st.status)
	}
	slices.SortFunc(out, func(a, b CACertsStatus) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Results returns an acknowledgement result for each CA that is not
// current: CONFLICT for a Secret the user owns, REJECTED for one that
// keeps failing. The syncer adds them to its acknowledgements; they do not
// make a snapshot count as failed.
func (c *CACerts) Results() []*snapshotv1.ApplyResult {
	var out []*snapshotv1.ApplyResult
	for _, s := range c.Status() {
		ref := &snapshotv1.ObjectRef{ApiVersion: "v1", Kind: "Secret", Namespace: s.Namespace, Name: s.Name}
		switch s.State {
		case CAStateConflict:
			out = append(out, &snapshotv1.ApplyResult{Ref: ref, Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_CONFLICT, Error: s.Error})
		case CAStateFailing:
			out = append(out, &snapshotv1.ApplyResult{Ref: ref, Outcome: snapshotv1.ApplyOutcome_APPLY_OUTCOME_REJECTED, Error: s.Error})
		}
	}
	return out
}

// Run reconciles whenever the desired set changes or a CA is due, until ctx
// ends. While this replica does not lead, it only waits.
func (c *CACerts) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		var wait time.Duration
		if c.leader() {
			next := c.Reconcile(ctx)
			if !next.IsZero() {
				wait = max(next.Sub(c.now()), 0)
			} else {
				wait = -1 // until poked
			}
		} else {
			wait = leaderRecheck
		}
		var timer *time.Timer
		var fired <-chan time.Time
		if wait >= 0 {
			timer = time.NewTimer(wait)
			fired = timer.C
		}
		select {
		case <-ctx.Done():
		case <-c.poke:
		case <-fired:
		}
		if timer != nil {
			timer.Stop()
		}
	}
	return nil
}

// Reconcile makes one pass over the wanted CAs at the manager's clock and
// returns when the next one is due (zero: none is). Run calls it; tests
// call it directly with a fake clock.
func (c *CACerts) Reconcile(ctx context.Context) time.Time {
	c.pass.Lock()
	defer c.pass.Unlock()

	c.mu.Lock()
	wanted := map[secretKey]bool{}
	var todo []*caState
	for _, ic := range c.desired {
		k := secretKey{ic.GetSecretNamespace(), ic.GetSecretName()}
		if wanted[k] {
			c.log.Warn("two issued certificates name one Secret; keeping the first", "namespace", k.namespace, "name", k.name, "mesh", refString(ic.GetMesh().GetNamespace(), ic.GetMesh().GetName()))
			continue
		}
		wanted[k] = true
		st := c.states[k]
		if st == nil {
			st = &caState{backoff: c.retry, rotationBackoff: c.retry, status: CACertsStatus{State: CAStatePending}}
			c.states[k] = st
		}
		if !proto.Equal(st.ic, ic) {
			// New instructions: whatever held the last attempt back no
			// longer applies.
			st.ic, st.retryAt = ic, time.Time{}
			st.backoff.Reset()
		}
		st.status.Namespace, st.status.Name = k.namespace, k.name
		st.status.VirtualMesh = refString(ic.GetVirtualMesh().GetNamespace(), ic.GetVirtualMesh().GetName())
		st.status.Mesh = refString(ic.GetMesh().GetNamespace(), ic.GetMesh().GetName())
		todo = append(todo, st)
	}
	// The Secrets of CAs no longer wanted stay: istiod reads cacerts when
	// it starts, and would fall back to a self-signed root without it.
	for k := range c.states {
		if !wanted[k] {
			delete(c.states, k)
		}
	}
	c.mu.Unlock()

	var next time.Time
	for _, st := range todo {
		if ctx.Err() != nil {
			break
		}
		at := c.ensure(ctx, st)
		if at.IsZero() {
			continue // nothing to do until new instructions arrive
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	c.metrics.CACertsObserved(c.Status())
	if sig := resultsSignature(c.Results()); sig != c.lastResults {
		c.lastResults = sig
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
	return next
}

// Changed receives a value when Results has changed after a pass: a
// conflict or failure appeared, changed or went away.
func (c *CACerts) Changed() <-chan struct{} { return c.changed }

func resultsSignature(rs []*snapshotv1.ApplyResult) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%d %s/%s %s\n", r.GetOutcome(), r.GetRef().GetNamespace(), r.GetRef().GetName(), r.GetError())
	}
	return b.String()
}

func refString(namespace, name string) string { return namespace + "/" + name }

// ensure brings one CA up to date and returns when to look at it again.
func (c *CACerts) ensure(ctx context.Context, st *caState) time.Time {
	now := c.now()
	c.mu.Lock()
	ic, retryAt := st.ic, st.retryAt
	c.mu.Unlock()
	if !retryAt.IsZero() && now.Before(retryAt) {
		return retryAt
	}
	log := c.log.With("namespace", ic.GetSecretNamespace(), "name", ic.GetSecretName(), "mesh", refString(ic.GetMesh().GetNamespace(), ic.GetMesh().GetName()), "virtual_mesh", refString(ic.GetVirtualMesh().GetNamespace(), ic.GetVirtualMesh().GetName()))
	if err := validateIssued(ic); err != nil {
		// Retrying cannot help; a new snapshot brings new instructions.
		c.fail(st, log, "invalid", err, now)
		c.mu.Lock()
		st.retryAt = time.Time{}
		c.mu.Unlock()
		return time.Time{}
	}

	stored, err := c.store.Get(ctx, ic.GetSecretNamespace(), ic.GetSecretName())
	var held *domain.HeldCA
	switch {
	case errors.Is(err, ErrSecretNotFound):
	case err != nil:
		return c.fail(st, log, "read", fmt.Errorf("read Secret %s/%s: %w", ic.GetSecretNamespace(), ic.GetSecretName(), err), now)
	default:
		h := heldCA(stored)
		held = &h
	}

	d := domain.DecideCACerts(domain.WantedCA{RootGeneration: ic.GetRootGeneration(), TrustDomain: ic.GetTrustDomain()}, held, now)
	switch d.Action {
	case domain.CACertsLeaveAlone:
		msg := fmt.Sprintf("Secret %s/%s exists without Meshplane's ownership labels: it is the user's own plug-in CA and is left alone, so mesh %s does not get the intermediate of VirtualMesh %s",
			ic.GetSecretNamespace(), ic.GetSecretName(), refString(ic.GetMesh().GetNamespace(), ic.GetMesh().GetName()), refString(ic.GetVirtualMesh().GetNamespace(), ic.GetVirtualMesh().GetName()))
		c.mu.Lock()
		first := !st.reported
		st.reported = true
		st.status.State, st.status.Error, st.status.Failures = CAStateConflict, msg, 0
		st.status.ExpiresAt, st.status.RenewAt, st.status.RootGeneration = time.Time{}, time.Time{}, ""
		c.mu.Unlock()
		if first {
			log.Warn("left a user-owned cacerts Secret alone", "reason", msg)
		}
		return now.Add(conflictRecheck)
	case domain.CACertsKeep:
		c.current(st, held.NotAfter, d.RenewAt, held.RootGeneration)
		if at := c.rotate(ctx, st, ic, stored, held, log); !at.IsZero() && at.Before(d.RenewAt) {
			return at
		}
		return d.RenewAt
	}

	log.Info("issuing an istiod intermediate CA", "reason", d.Reason)
	secret, notBefore, notAfter, serial, stage, err := c.issue(ctx, ic)
	if err != nil {
		return c.fail(st, log, stage, err, now)
	}
	superseded := c.startRotation(&secret, ic, stored, held, d.Reason, serial, now, log)
	if held == nil {
		err = c.store.Create(ctx, secret)
	} else {
		err = c.store.Update(ctx, secret, stored.ResourceVersion)
	}
	if err != nil {
		return c.fail(st, log, "write", fmt.Errorf("write Secret %s/%s: %w", ic.GetSecretNamespace(), ic.GetSecretName(), err), now)
	}
	renewAt := domain.CACertsRenewAt(notBefore, notAfter, serial)
	c.metrics.CACertsIssued(d.Reason)
	if superseded {
		c.rotationMetrics.RotationFinished(RotationSuperseded)
	}
	c.current(st, notAfter, renewAt, ic.GetRootGeneration())
	log.Info("wrote the istiod intermediate CA", "reason", d.Reason, "expires", notAfter, "renew_at", renewAt, "rotation", secret.Annotations[domain.AnnotationRotationPhase])
	if secret.Annotations[domain.AnnotationRotationPhase] != "" {
		return now // restart istiod's pods at once
	}
	return renewAt
}

func (c *CACerts) current(st *caState, notAfter, renewAt time.Time, rootGen string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st.reported = false
	st.retryAt = time.Time{}
	st.backoff.Reset()
	st.status.State, st.status.Error, st.status.Failures = CAStateCurrent, "", 0
	st.status.ExpiresAt, st.status.RenewAt, st.status.RootGeneration = notAfter, renewAt, rootGen
}

// fail records a failed attempt and returns when to retry.
func (c *CACerts) fail(st *caState, log *slog.Logger, stage string, err error, now time.Time) time.Time {
	c.metrics.CACertsFailed(stage)
	c.mu.Lock()
	st.status.State, st.status.Error = CAStateFailing, err.Error()
	st.status.Failures++
	st.retryAt = now.Add(st.backoff.Next())
	failures, retryAt := st.status.Failures, st.retryAt
	c.mu.Unlock()
	log.Warn("istiod intermediate CA not written; retrying", "stage", stage, "error", err, "failures", failures, "retry_at", retryAt)
	return retryAt
}

func validateIssued(ic *snapshotv1.IssuedCertificate) error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"secret_namespace", ic.GetSecretNamespace()}, {"secret_name", ic.GetSecretName()},
		{"mesh.namespace", ic.GetMesh().GetNamespace()}, {"mesh.name", ic.GetMesh().GetName()},
		{"virtual_mesh.namespace", ic.GetVirtualMesh().GetNamespace()}, {"virtual_mesh.name", ic.GetVirtualMesh().GetName()},
		{"root_generation", ic.GetRootGeneration()},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("issued certificate lacks %v", missing)
	}
	if _, ok := networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_KeyAlgorithm_name[int32(ic.GetKeyAlgorithm())]; !ok {
		return fmt.Errorf("issued certificate has unknown key algorithm %d", ic.GetKeyAlgorithm())
	}
	if ttl := ic.GetTtl(); ttl != nil && (ttl.CheckValid() != nil || ttl.AsDuration() < 0) {
		return fmt.Errorf("issued certificate has invalid ttl %v", ttl)
	}
	return nil
}

// heldCA reads what a stored Secret holds.
func heldCA(s StoredSecret) domain.HeldCA {
	h := domain.HeldCA{
		Owned:          s.Owned,
		RootGeneration: s.Annotations[AnnotationRootGeneration],
		TrustDomain:    s.Annotations[AnnotationTrustDomain],
	}
	for _, k := range []string{CACertKey, CAKeyKey, RootCertKey, CertChainKey} {
		if len(s.Data[k]) == 0 {
			return h
		}
	}
	certs, err := pki.ParseCertificates(s.Data[CACertKey])
	if err != nil {
		return h
	}
	h.NotBefore, h.NotAfter, h.Serial = certs[0].NotBefore, certs[0].NotAfter, certs[0].SerialNumber.Bytes()
	h.Complete = true
	return h
}

// issue makes a key, has the intermediate signed, checks the answer and
// returns the Secret to write. stage names what failed.
func (c *CACerts) issue(ctx context.Context, ic *snapshotv1.IssuedCertificate) (s CASecret, notBefore, notAfter time.Time, serial []byte, stage string, err error) {
	key, err := c.newKey(ic.GetKeyAlgorithm())
	if err != nil {
		return s, notBefore, notAfter, nil, "key", err
	}
	keyPEM, err := encodeCAKey(key)
	if err != nil {
		return s, notBefore, notAfter, nil, "key", err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		// The server sets the names; these only make the request readable.
		Subject: pkix.Name{Organization: []string{ic.GetTrustDomain()}, CommonName: "istiod " + refString(ic.GetMesh().GetNamespace(), ic.GetMesh().GetName())},
	}, key)
	if err != nil {
		return s, notBefore, notAfter, nil, "key", fmt.Errorf("create CSR: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, signTimeout)
	defer cancel()
	signed, err := c.signer.SignIntermediate(ctx, IntermediateRequest{
		VirtualMeshNamespace: ic.GetVirtualMesh().GetNamespace(), VirtualMeshName: ic.GetVirtualMesh().GetName(),
		MeshNamespace: ic.GetMesh().GetNamespace(), MeshName: ic.GetMesh().GetName(),
		CSRPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr}),
		TTL:    ic.GetTtl().AsDuration(),
	})
	if err != nil {
		return s, notBefore, notAfter, nil, "sign", fmt.Errorf("SignIntermediate: %w", err)
	}
	cert, err := verifyIntermediate(signed, key)
	if err != nil {
		return s, notBefore, notAfter, nil, "verify", err
	}
	return CASecret{
		Namespace: ic.GetSecretNamespace(),
		Name:      ic.GetSecretName(),
		Data: map[string][]byte{
			CACertKey:    signed.CertPEM,
			CAKeyKey:     keyPEM,
			RootCertKey:  signed.RootPEM,
			CertChainKey: signed.ChainPEM,
		},
		Annotations: map[string]string{
			AnnotationRootGeneration: ic.GetRootGeneration(),
			AnnotationTrustDomain:    ic.GetTrustDomain(),
			AnnotationExpiresAt:      cert.NotAfter.UTC().Format(time.RFC3339),
			AnnotationVirtualMesh:    refString(ic.GetVirtualMesh().GetNamespace(), ic.GetVirtualMesh().GetName()),
			AnnotationMesh:           refString(ic.GetMesh().GetNamespace(), ic.GetMesh().GetName()),
		},
	}, cert.NotBefore, cert.NotAfter, cert.SerialNumber.Bytes(), "", nil
}

// verifyIntermediate checks that the signed intermediate is a CA for key
// and chains to the root it came with, before istiod is given it.
func verifyIntermediate(s SignedIntermediate, key crypto.Signer) (*x509.Certificate, error) {
	certs, err := pki.ParseCertificates(s.CertPEM)
	if err != nil {
		return nil, fmt.Errorf("intermediate: %w", err)
	}
	cert := certs[0]
	roots, err := pki.ParseCertificates(s.RootPEM)
	if err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	if _, err := pki.ParseCertificates(s.ChainPEM); err != nil {
		return nil, fmt.Errorf("chain: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("the signed certificate is not a CA")
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	certPub, err := x509.MarshalPKIXPublicKey(cert.PublicKey)
	if err != nil || !bytes.Equal(pub, certPub) {
		return nil, errors.New("the signed certificate is not for the key that was sent")
	}
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: cert.NotBefore.Add(time.Second), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("the signed certificate does not chain to the root: %w", err)
	}
	return cert, nil
}

// NewCAKey makes an intermediate CA key of the given algorithm.
func NewCAKey(alg KeyAlgorithm) (crypto.Signer, error) {
	switch alg {
	case networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_ECDSA_P256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_RSA_4096:
		return rsa.GenerateKey(rand.Reader, 4096)
	default:
		return nil, fmt.Errorf("unknown key algorithm %d", alg)
	}
}

// encodeCAKey PEM-encodes a key in the traditional form of its type (SEC 1
// for ECDSA, PKCS #1 for RSA), which every Istio release reads.
func encodeCAKey(key crypto.Signer) ([]byte, error) {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, fmt.Errorf("encode key: %w", err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
	case *rsa.PrivateKey:
		return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), nil
	default:
		return nil, fmt.Errorf("unsupported key type %T", key)
	}
}
