package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/snapshots/meshview"
	"github.com/meshplane/meshplane/services/console/internal/domain"
)

// Console is the read side behind the pages: every call authorizes the
// user's view first, then reads the management services.
type Console struct {
	up      Upstream
	authz   Authorizer
	recent  *Recent
	metrics Metrics
	log     *slog.Logger
	now     func() time.Time
}

// NewConsole builds the use cases. recent may be nil: then outputs have
// only their latest version and the graph has no traffic.
func NewConsole(up Upstream, authz Authorizer, recent *Recent, metrics Metrics, log *slog.Logger) *Console {
	if metrics == nil {
		metrics = NopMetrics{}
	}
	return &Console{up: up, authz: authz, recent: recent, metrics: metrics, log: log, now: time.Now}
}

// authorize refuses with a DeniedError unless the user may do a.
func (c *Console) authorize(ctx context.Context, u domain.User, view domain.View, a domain.Attributes) error {
	ok, err := c.authz.Allowed(ctx, u, a)
	if err != nil {
		return fmt.Errorf("%w: SubjectAccessReview: %w", ErrUnavailable, err)
	}
	if !ok {
		c.metrics.Denied(view)
		return &DeniedError{User: u.Username, What: a.String()}
	}
	return nil
}

// upstream wraps a failed read so that it maps to unavailable and is
// counted.
func (c *Console) upstream(call string, err error) error {
	c.metrics.UpstreamError(call)
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, call, err)
}

// Views are the views the user may open, by the checks of each without
// names.
func (c *Console) Views(ctx context.Context, u domain.User) ([]domain.View, error) {
	var out []domain.View
	for _, v := range domain.Views {
		for _, a := range domain.ViewAttributes(v) {
			ok, err := c.authz.Allowed(ctx, u, a)
			if err != nil {
				return nil, fmt.Errorf("%w: SubjectAccessReview: %w", ErrUnavailable, err)
			}
			if ok {
				out = append(out, v)
				break
			}
		}
	}
	return out, nil
}

// Overview is `meshctl check`, problems first.
func (c *Console) Overview(ctx context.Context, u domain.User) (domain.Overview, error) {
	if err := c.authorize(ctx, u, domain.ViewOverview, domain.OverviewAttributes()); err != nil {
		return domain.Overview{}, err
	}
	services := c.up.Health(ctx)
	var notes []string
	in := meshview.CheckInput{Now: c.now()}
	clusters, err := c.up.ListClusters(ctx)
	if err != nil {
		return domain.Overview{}, c.upstream("ingest ListClusters", err)
	}
	acks, err := c.up.ListAcks(ctx)
	if err != nil {
		return domain.Overview{}, c.upstream("distribution ListAcks", err)
	}
	in.Clusters, in.Acks = clusters, acks
	if recs, err := c.up.ListRegistrations(ctx); err != nil {
		c.metrics.UpstreamError("registration ListClusters")
		notes = append(notes, "certificates not checked: registration: "+err.Error())
	} else {
		in.Records = recs
	}
	if st, err := c.up.TranslationStatus(ctx); err != nil {
		c.metrics.UpstreamError("translation GetStatus")
		notes = append(notes, "safe mode not checked: translation: "+err.Error())
	} else {
		in.Translation = st
	}
	return domain.NewOverview(services, meshview.CheckClusters(in), notes, in.Now), nil
}

// outputs reads every cluster's latest output snapshot from translation.
func (c *Console) outputs(ctx context.Context) (domain.Outputs, error) {
	st, err := c.up.TranslationStatus(ctx)
	if err != nil {
		return nil, c.upstream("translation GetStatus", err)
	}
	outs := domain.Outputs{}
	for cl, v := range st.GetOutputVersions() {
		// A version the background loop already fetched is not fetched
		// again: at scale an output is megabytes, and pages poll.
		if c.recent != nil && v != "" {
			if o, _ := c.recent.Output(cl, v); o != nil {
				outs[cl] = o
				continue
			}
		}
		o, err := c.up.OutputSnapshot(ctx, cl)
		if err != nil {
			return nil, c.upstream("translation GetOutputSnapshot", err)
		}
		if o != nil {
			outs[cl] = o
			if c.recent != nil {
				c.recent.AddOutput(o)
			}
		}
	}
	return outs, nil
}

// GraphResult is the graph and where its traffic comes from.
type GraphResult struct {
	Graph            domain.Graph
	TrafficSince     time.Time
	TrafficAvailable bool
}

// Graph builds the graph, with traffic over window (one minute when zero).
func (c *Console) Graph(ctx context.Context, u domain.User, window time.Duration) (GraphResult, error) {
	if err := c.authorize(ctx, u, domain.ViewGraph, domain.GraphAttributes()); err != nil {
		return GraphResult{}, err
	}
	if window <= 0 {
		window = time.Minute
	}
	meshes, err := c.up.ListMeshes(ctx)
	if err != nil {
		return GraphResult{}, c.upstream("ingest ListMeshes", err)
	}
	dests, err := c.up.ListDestinations(ctx, nil)
	if err != nil {
		return GraphResult{}, c.upstream("ingest ListDestinations", err)
	}
	outs, err := c.outputs(ctx)
	if err != nil {
		return GraphResult{}, err
	}
	now := c.now()
	res := GraphResult{TrafficSince: now.Add(-window)}
	in := domain.GraphInput{Meshes: meshes, Destinations: dests, Outputs: outs, Window: window}
	if c.recent != nil {
		in.Traffic, res.TrafficAvailable = c.recent.Traffic(now, window)
	}
	res.Graph = domain.BuildGraph(in)
	return res, nil
}

// Policies lists the policies of kind (every kind when empty) the user may
// list; kinds and namespaces they may not are left out. With no kind
// allowed at all it is a denial.
func (c *Console) Policies(ctx context.Context, u domain.User, kind string) ([]domain.Policy, error) {
	kinds := domain.PolicyKinds
	if kind != "" {
		k, ok := domain.PolicyKindOf(kind)
		if !ok {
			return nil, fmt.Errorf("%w: kind %q is not a policy kind", ErrInvalid, kind)
		}
		kinds = []domain.PolicyKind{k}
	}
	var allowed []string
	var firstDenial error
	for _, k := range kinds {
		// A user allowed cluster-wide sees every namespace; others are
		// checked namespace by namespace below.
		if err := c.authorize(ctx, u, domain.ViewPolicies, domain.PolicyAttributes(k, "")); err == nil {
			allowed = append(allowed, k.Kind)
		} else if !errors.As(err, new(*DeniedError)) {
			return nil, err
		} else if firstDenial == nil {
			firstDenial = err
		}
	}
	outs, err := c.outputs(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(kinds))
	for _, k := range kinds {
		names = append(names, k.Kind)
	}
	var authErr error
	keep := func(kind, ns string) bool {
		if slices.Contains(allowed, kind) {
			return true
		}
		k, _ := domain.PolicyKindOf(kind)
		ok, err := c.authz.Allowed(ctx, u, domain.PolicyAttributes(k, ns))
		if err != nil && authErr == nil {
			authErr = err
		}
		return ok
	}
	list := domain.Policies(outs, names, keep)
	if authErr != nil {
		return nil, fmt.Errorf("%w: SubjectAccessReview: %w", ErrUnavailable, authErr)
	}
	if len(list) == 0 && len(allowed) == 0 {
		return nil, firstDenial
	}
	return list, nil
}

// Describe is `meshctl describe` for one kind.
func (c *Console) Describe(ctx context.Context, u domain.User, kind, name, namespace, cluster string) ([]domain.Description, error) {
	k, err := domain.DescribeKind(kind)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := c.authorize(ctx, u, domain.ViewDescribe, domain.DescribeAttributes(k, namespace)); err != nil {
		return nil, err
	}
	outs, err := c.outputs(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := domain.PolicyKindOf(k.Kind); ok {
		var out []domain.Description
		for _, p := range domain.Policies(outs, []string{k.Kind}, func(string, string) bool { return true }) {
			if (name == "" || p.Name == name) && (namespace == "" || p.Namespace == namespace) && (cluster == "" || p.Cluster == cluster) {
				out = append(out, domain.DescribePolicy(p))
			}
		}
		return out, nil
	}
	return c.describeDiscovered(ctx, outs, k.Kind, &translationv1.DescribeRequest{Cluster: cluster, Namespace: namespace, Name: name})
}

func (c *Console) describeDiscovered(ctx context.Context, outs domain.Outputs, kind string, req *translationv1.DescribeRequest) ([]domain.Description, error) {
	res, err := c.up.Describe(ctx, req)
	if err != nil {
		return nil, c.upstream("translation Describe", err)
	}
	var out []domain.Description
	switch kind {
	case "Mesh":
		for _, m := range res.GetMeshes() {
			out = append(out, domain.DescribeMesh(outs, m))
		}
	case "Destination":
		var wls []*discoveryv1.Workload
		if len(res.GetDestinations()) > 0 {
			if wls, err = c.up.ListWorkloads(ctx, &ingestv1.DiscoveryFilter{Cluster: req.GetCluster(), Namespace: req.GetNamespace()}); err != nil {
				return nil, c.upstream("ingest ListWorkloads", err)
			}
		}
		for _, d := range res.GetDestinations() {
			out = append(out, domain.DescribeDestination(outs, d, wls))
		}
	case "Workload":
		var dests []*discoveryv1.Destination
		if len(res.GetWorkloads()) > 0 {
			if dests, err = c.up.ListDestinations(ctx, &ingestv1.DiscoveryFilter{Cluster: req.GetCluster()}); err != nil {
				return nil, c.upstream("ingest ListDestinations", err)
			}
		}
		for _, w := range res.GetWorkloads() {
			out = append(out, domain.DescribeWorkload(outs, w, dests))
		}
	}
	return out, nil
}

// OutputResult is one version of a cluster's output as YAML.
type OutputResult struct {
	Cluster, Version, YAML string
	Versions               []string
}

// Output renders cluster's output: version, or the latest when empty.
func (c *Console) Output(ctx context.Context, u domain.User, cluster, version string) (OutputResult, error) {
	if cluster == "" {
		return OutputResult{}, fmt.Errorf("%w: cluster is required", ErrInvalid)
	}
	if err := c.authorize(ctx, u, domain.ViewOutput, domain.OutputAttributes(cluster)); err != nil {
		return OutputResult{}, err
	}
	latest, err := c.up.OutputSnapshot(ctx, cluster)
	if err != nil {
		return OutputResult{}, c.upstream("translation GetOutputSnapshot", err)
	}
	snap, versions := latest, []string{latest.GetVersion()}
	if c.recent != nil {
		if latest != nil {
			c.recent.AddOutput(latest)
		}
		snap, versions = c.recent.Output(cluster, version)
	} else if version != "" && version != latest.GetVersion() {
		snap = nil
	}
	if snap == nil {
		return OutputResult{}, fmt.Errorf("%w: cluster %q has no output version %q", ErrNotFound, cluster, version)
	}
	y, err := domain.RenderYAML(snap)
	if err != nil {
		return OutputResult{}, fmt.Errorf("cluster %q output: %w", cluster, err)
	}
	return OutputResult{Cluster: cluster, Version: snap.GetVersion(), YAML: y, Versions: versions}, nil
}

// TailAccessLogs streams access logs with meshctl's filters until ctx
// ends.
func (c *Console) TailAccessLogs(ctx context.Context, u domain.User, req *ingestv1.WatchAccessLogsRequest, send func([]*observabilityv1.AccessLogEntry) error) error {
	if err := c.authorize(ctx, u, domain.ViewAccessLogs, domain.AccessLogAttributes(req.GetCluster())); err != nil {
		return err
	}
	if req.GetTail() == 0 {
		req.Tail = 100
	}
	req.Follow = true
	if err := c.up.WatchAccessLogs(ctx, req, send); err != nil && ctx.Err() == nil {
		return c.upstream("ingest WatchAccessLogs", err)
	}
	return nil
}
