// Package app holds the console's use cases: signing in and out, sessions,
// per-view authorization, and the reads behind every page, over ports that
// adapters implement.
package app

import (
	"context"

	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/services/console/internal/domain"
)

// Authenticator checks a bearer token of the management cluster
// (TokenReview). ok is false when the token is not accepted; err is for
// when the question could not be asked.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (user domain.User, ok bool, err error)
}

// Authorizer asks whether user may do what a (SubjectAccessReview).
type Authorizer interface {
	Allowed(ctx context.Context, user domain.User, a domain.Attributes) (bool, error)
}

// Upstream reads the management services. Every method is a read.
type Upstream interface {
	// Health asks every management service's gRPC health.
	Health(ctx context.Context) []domain.ServiceHealth
	ListClusters(ctx context.Context) ([]*ingestv1.ClusterConnectivity, error)
	ListMeshes(ctx context.Context) ([]*discoveryv1.Mesh, error)
	ListWorkloads(ctx context.Context, f *ingestv1.DiscoveryFilter) ([]*discoveryv1.Workload, error)
	ListDestinations(ctx context.Context, f *ingestv1.DiscoveryFilter) ([]*discoveryv1.Destination, error)
	ListAcks(ctx context.Context) ([]*distributionv1.ClusterAck, error)
	ListRegistrations(ctx context.Context) ([]*registrationv1.Cluster, error)
	TranslationStatus(ctx context.Context) (*translationv1.GetStatusResponse, error)
	Describe(ctx context.Context, req *translationv1.DescribeRequest) (*translationv1.DescribeResponse, error)
	// OutputSnapshot returns nil, nil when translation holds none for
	// cluster.
	OutputSnapshot(ctx context.Context, cluster string) (*snapshotv1.OutputSnapshot, error)
	// WatchAccessLogs calls fn with each batch of entries until ctx ends,
	// fn fails or the stream ends.
	WatchAccessLogs(ctx context.Context, req *ingestv1.WatchAccessLogsRequest, fn func([]*observabilityv1.AccessLogEntry) error) error
}

// Metrics counts what the console does. Labels never carry secrets.
type Metrics interface {
	SignIn(ok bool)
	ActiveSessions(n int)
	Denied(view domain.View)
	UpstreamError(call string)
}

// NopMetrics counts nothing.
type NopMetrics struct{}

func (NopMetrics) SignIn(bool)               {}
func (NopMetrics) ActiveSessions(int)        {}
func (NopMetrics) Denied(domain.View)        {}
func (NopMetrics) UpstreamError(call string) {}
