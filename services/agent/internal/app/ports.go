// Package app holds the agent's use cases: obtain an identity, push what
// discovery sees, and apply what the management plane sends.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
)

// Credentials is the agent's key and certificate chain.
type Credentials struct {
	CertPEM   []byte
	KeyPEM    []byte
	BundlePEM []byte
	NotAfter  time.Time
}

// CredentialStore keeps the agent's credentials across restarts.
type CredentialStore interface {
	// Load returns the stored credentials, or ErrNoCredentials.
	Load(ctx context.Context) (Credentials, error)
	Save(ctx context.Context, c Credentials) error
}

// ErrNoCredentials is returned by a CredentialStore that holds none.
var ErrNoCredentials = errors.New("no stored credentials")

// Registrar talks to the registration service.
type Registrar interface {
	Register(ctx context.Context, cluster, token string, csrPEM []byte) (chainPEM, bundlePEM []byte, err error)
}

// ClusterReader is discovery's view of the cluster.
type ClusterReader interface {
	// WaitForSync blocks until the caches have synced.
	WaitForSync(ctx context.Context) error
	// Changed receives a value after any change.
	Changed() <-chan struct{}
	// Discover returns what is in the cluster now.
	Discover() (domain.Discovered, error)
}

// PushStream is an open push stream to ingest.
type PushStream interface {
	Send(s *snapshotv1.InputSnapshot) error
	// Receive returns the version ingest stored.
	Receive() (string, error)
	// CloseSend ends the sending side: ingest sees the end of the stream
	// and ends it, which ends a Receive waiting on it. It may be called
	// while Receive runs; cancelling the stream's context alone does not
	// end that Receive.
	CloseSend() error
	Close() error
}

// WatchStream is an open watch stream from distribution.
type WatchStream interface {
	Receive() (*snapshotv1.OutputSnapshot, error)
	Close() error
}

// Relay is the management plane as the agent sees it.
type Relay interface {
	OpenPush(ctx context.Context) (PushStream, error)
	Watch(ctx context.Context, have string) (WatchStream, error)
	Ack(ctx context.Context, version string, results []*snapshotv1.ApplyResult) error
}

// ErrConflict is returned by Applier.Apply for an object that exists
// without Meshplane's ownership labels: it belongs to the user.
var ErrConflict = errors.New("object exists and is not owned by Meshplane")

// ClusterObjects is the agent's view of the objects of the output kinds in
// its cluster, from a metadata-only watch: where the agent finds what it
// applied before (the digest annotations), which objects are a user's, and
// what someone else changed.
type ClusterObjects interface {
	// Sync starts the watch and returns once the view holds what the
	// cluster held when it started. The watch goes on until ctx ends.
	Sync(ctx context.Context) error
	// Get returns the object under key's identity, if the view holds one.
	Get(key domain.ObjectKey) (domain.LiveObject, bool)
	// Owned returns the objects that carry this install's and cluster's
	// ownership labels.
	Owned() []domain.LiveObject
	// Changed receives a value when there are changes to take.
	Changed() <-chan struct{}
	// TakeChanges returns the objects that changed or went away since the
	// last call, each in its latest state.
	TakeChanges() []ObjectChange
}

// ObjectChange is the latest state of an object that changed: Gone when it
// was deleted.
type ObjectChange struct {
	Object domain.LiveObject
	Gone   bool
}

// Applier writes objects to the cluster, and sees them (ClusterObjects).
type Applier interface {
	ClusterObjects
	// Apply server-side applies d with Meshplane's field manager. live is
	// what the view holds under d's identity, nil when nothing. It returns
	// the object as the API server stored it, and ErrConflict (wrapped)
	// for an object the user owns; a user's object is never written, even
	// one that appears after the view looked.
	Apply(ctx context.Context, d domain.DesiredObject, live *domain.LiveObject) (domain.LiveObject, error)
	// Delete deletes the owned object, only if it is still the object
	// live describes (its UID, and its resource version when set).
	Delete(ctx context.Context, live domain.LiveObject) error
}

// StatusWriter writes the statuses that translation computed onto the
// user's Meshplane resources in this cluster.
type StatusWriter interface {
	// WriteStatus writes st.Status to the status subresource of the
	// resource st names, only when the resource's generation is still
	// st.ObservedGeneration and its status differs. A resource that is
	// gone or has another generation is not an error (StatusSkipped): a
	// newer snapshot brings its status.
	WriteStatus(ctx context.Context, st *snapshotv1.ResourceStatus) (StatusOutcome, error)
}

// StatusOutcome is what WriteStatus did.
type StatusOutcome int

const (
	// StatusWritten: the status was written.
	StatusWritten StatusOutcome = iota + 1
	// StatusCurrent: the resource already had this status.
	StatusCurrent
	// StatusSkipped: the resource is gone or its generation differs.
	StatusSkipped
)

// Metrics records what the agent did.
type Metrics interface {
	Pushed(bytes int, err error)
	Applied(version string, applied, failed, deleted int)
	// HeldDeletions records how many owned objects the latest apply kept
	// although its output no longer holds them, because the output was
	// built without some expected cluster's input.
	HeldDeletions(n int)
	Connected(stream string, up bool)
	// DriftCorrected counts an owned object of kind put back after someone
	// else changed or deleted it.
	DriftCorrected(kind string)
}

// NopMetrics discards everything.
type NopMetrics struct{}

func (NopMetrics) Pushed(int, error)             {}
func (NopMetrics) Applied(string, int, int, int) {}
func (NopMetrics) HeldDeletions(int)             {}
func (NopMetrics) Connected(string, bool)        {}
func (NopMetrics) DriftCorrected(string)         {}

// CertificateSource hands the current client certificate to TLS.
type CertificateSource func() (*tls.Certificate, error)
