// Package upstream reads the management services over Connect with the
// console's own service certificate (mTLS), through a read-only allowlist.
package upstream

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/console/internal/app"
	"github.com/meshplane/meshplane/services/console/internal/domain"
)

// Addrs are where the services are: Management is the front door, and each
// override, when set, replaces it for one service.
type Addrs struct {
	Management, Ingest, Translation, Distribution, Registration string
}

// Client reads the management services.
type Client struct {
	hc           *http.Client
	ingest       ingestv1connect.IngestServiceClient
	translation  translationv1connect.TranslationServiceClient
	distribution distributionv1connect.DistributionServiceClient
	clusters     registrationv1connect.ClusterServiceClient
	health       map[string]*grpchealth.Client
}

var _ app.Upstream = (*Client)(nil)

// New builds the clients: opts carry the TLS settings (CA, the console's
// certificate), addrs the addresses.
func New(opts platform.ClientOptions, addrs Addrs, log *slog.Logger) (*Client, error) {
	opts.Addr = cmp.Or(addrs.Management, addrs.Ingest)
	hc, err := platform.NewHTTPClient(opts, log)
	if err != nil {
		return nil, err
	}
	hc.Transport = ReadOnly{Next: hc.Transport}
	base := func(addr string) string {
		o := opts
		o.Addr = cmp.Or(addr, addrs.Management)
		return platform.BaseURL(o)
	}
	copts := platform.DefaultClientOptions(opts)
	c := &Client{
		hc:           hc,
		ingest:       ingestv1connect.NewIngestServiceClient(hc, base(addrs.Ingest), copts...),
		translation:  translationv1connect.NewTranslationServiceClient(hc, base(addrs.Translation), copts...),
		distribution: distributionv1connect.NewDistributionServiceClient(hc, base(addrs.Distribution), copts...),
		clusters:     registrationv1connect.NewClusterServiceClient(hc, base(addrs.Registration), copts...),
		health: map[string]*grpchealth.Client{
			ingestv1connect.IngestServiceName:             grpchealth.NewClient(hc, base(addrs.Ingest), copts...),
			translationv1connect.TranslationServiceName:   grpchealth.NewClient(hc, base(addrs.Translation), copts...),
			distributionv1connect.DistributionServiceName: grpchealth.NewClient(hc, base(addrs.Distribution), copts...),
			registrationv1connect.ClusterServiceName:      grpchealth.NewClient(hc, base(addrs.Registration), copts...),
		},
	}
	return c, nil
}

// HTTPClient is the read-only client, for tests of the allowlist.
func (c *Client) HTTPClient() *http.Client { return c.hc }

// Close drops idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Health implements app.Upstream, in a fixed order.
func (c *Client) Health(ctx context.Context) []domain.ServiceHealth {
	var out []domain.ServiceHealth
	for _, name := range []string{ingestv1connect.IngestServiceName, translationv1connect.TranslationServiceName, distributionv1connect.DistributionServiceName, registrationv1connect.ClusterServiceName} {
		res, err := c.health[name].Check(ctx, &grpchealth.CheckRequest{Service: name})
		switch {
		case err != nil:
			out = append(out, domain.ServiceHealth{Name: name, Status: "ERROR", Error: err.Error()})
		default:
			// The contract spells statuses as gRPC's enum does
			// ("SERVING"); grpchealth's String is lower case.
			out = append(out, domain.ServiceHealth{Name: name, Status: strings.ToUpper(res.Status.String())})
		}
	}
	return out
}

// ListClusters implements app.Upstream.
func (c *Client) ListClusters(ctx context.Context) ([]*ingestv1.ClusterConnectivity, error) {
	res, err := c.ingest.ListClusters(ctx, connect.NewRequest(&ingestv1.ListClustersRequest{}))
	if err != nil {
		return nil, err
	}
	return res.Msg.GetClusters(), nil
}

// ListMeshes implements app.Upstream.
func (c *Client) ListMeshes(ctx context.Context) ([]*discoveryv1.Mesh, error) {
	res, err := c.ingest.ListMeshes(ctx, connect.NewRequest(&ingestv1.ListMeshesRequest{}))
	if err != nil {
		return nil, err
	}
	return res.Msg.GetMeshes(), nil
}

// ListWorkloads implements app.Upstream.
func (c *Client) ListWorkloads(ctx context.Context, f *ingestv1.DiscoveryFilter) ([]*discoveryv1.Workload, error) {
	res, err := c.ingest.ListWorkloads(ctx, connect.NewRequest(&ingestv1.ListWorkloadsRequest{Filter: f}))
	if err != nil {
		return nil, err
	}
	return res.Msg.GetWorkloads(), nil
}

// ListDestinations implements app.Upstream.
func (c *Client) ListDestinations(ctx context.Context, f *ingestv1.DiscoveryFilter) ([]*discoveryv1.Destination, error) {
	res, err := c.ingest.ListDestinations(ctx, connect.NewRequest(&ingestv1.ListDestinationsRequest{Filter: f}))
	if err != nil {
		return nil, err
	}
	return res.Msg.GetDestinations(), nil
}

// ListAcks implements app.Upstream.
func (c *Client) ListAcks(ctx context.Context) ([]*distributionv1.ClusterAck, error) {
	res, err := c.distribution.ListAcks(ctx, connect.NewRequest(&distributionv1.ListAcksRequest{}))
	if err != nil {
		return nil, err
	}
	return res.Msg.GetClusters(), nil
}

// ListRegistrations implements app.Upstream.
func (c *Client) ListRegistrations(ctx context.Context) ([]*registrationv1.Cluster, error) {
	res, err := c.clusters.ListClusters(ctx, connect.NewRequest(&registrationv1.ListClustersRequest{}))
	if err != nil {
		return nil, err
	}
	return res.Msg.GetClusters(), nil
}

// TranslationStatus implements app.Upstream.
func (c *Client) TranslationStatus(ctx context.Context) (*translationv1.GetStatusResponse, error) {
	res, err := c.translation.GetStatus(ctx, connect.NewRequest(&translationv1.GetStatusRequest{}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// Describe implements app.Upstream.
func (c *Client) Describe(ctx context.Context, req *translationv1.DescribeRequest) (*translationv1.DescribeResponse, error) {
	res, err := c.translation.Describe(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// OutputSnapshot implements app.Upstream.
func (c *Client) OutputSnapshot(ctx context.Context, cluster string) (*snapshotv1.OutputSnapshot, error) {
	res, err := c.translation.GetOutputSnapshot(ctx, connect.NewRequest(&translationv1.GetOutputSnapshotRequest{Cluster: cluster}))
	if connect.CodeOf(err) == connect.CodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return res.Msg.GetSnapshot(), nil
}

// WatchAccessLogs implements app.Upstream.
func (c *Client) WatchAccessLogs(ctx context.Context, req *ingestv1.WatchAccessLogsRequest, fn func([]*observabilityv1.AccessLogEntry) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.ingest.WatchAccessLogs(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	defer stream.Close()
	for stream.Receive() {
		if err := fn(stream.Msg().GetEntries()); err != nil {
			return err
		}
	}
	if err := stream.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
