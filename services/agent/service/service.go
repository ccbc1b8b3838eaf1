// Package service is the composition root of the agent.
package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	"github.com/meshplane/meshplane/libs/kube"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/agent/internal/adapters/connectrpc"
	"github.com/meshplane/meshplane/services/agent/internal/adapters/files"
	kubeadapter "github.com/meshplane/meshplane/services/agent/internal/adapters/kube"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// Name is the component's name in logs and metrics.
const Name = "agent"

// compressMinBytes is the smallest request sent gzipped to distribution.
const compressMinBytes = 1 << 10

// Option overrides a dependency, for tests.
type Option func(*Agent)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(a *Agent) { a.log = l } }

// WithRegistry sets the metrics registry served on the admin port.
func WithRegistry(r *prometheus.Registry) Option { return func(a *Agent) { a.reg = r } }

// WithAdminListener serves the admin endpoints on ln instead of
// cfg.AdminAddr.
func WithAdminListener(ln net.Listener) Option { return func(a *Agent) { a.adminLn = ln } }

// WithLeader adds a gate on the Istio CA manager, which already runs only
// on the leader (tests). The default is this replica's leadership: Raft's,
// or always true without Raft.
func WithLeader(leader func() bool) Option { return func(a *Agent) { a.leader = leader } }

// Agent is a built agent.
type Agent struct {
	cfg       Config
	log       *slog.Logger
	reg       *prometheus.Registry
	deltas    *deltaMetrics
	adminLn   net.Listener
	raftLn    net.Listener
	envoyLn   net.Listener
	certs     *certHolder
	envoySink app.EnvoyConfigSink
	metrics   *metrics
	leader    func() bool
}

// New builds the agent. Nothing connects until Run.
func New(cfg Config, opts ...Option) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(a)
	}
	if a.reg == nil {
		a.reg = platform.NewRegistry()
	}
	a.log = a.log.With("component", Name, "cluster", cfg.Cluster)
	deltas, err := newDeltaMetrics(a.reg)
	if err != nil {
		return nil, err
	}
	a.deltas = deltas
	m, err := newMetrics(a.reg)
	if err != nil {
		return nil, err
	}
	a.metrics = m
	return a, nil
}

func (a *Agent) clientOptions(addr string, withCert app.CertificateSource) platform.ClientOptions {
	o := platform.NewClientOptions()
	o.Addr = addr
	o.CAFile = a.cfg.RelayCAFile
	o.ServerName = a.cfg.ServerName
	if withCert != nil {
		o.CertificateSource = withCert
	}
	return o
}

func (a *Agent) httpClient(o platform.ClientOptions) (connectClient, error) {
	if err := o.Validate(); err != nil {
		return connectClient{}, err
	}
	c, err := platform.NewHTTPClient(o, a.log)
	if err != nil {
		return connectClient{}, err
	}
	return connectClient{c: c, url: platform.BaseURL(o), opts: o}, nil
}

// Run joins the replicas' Raft group (when configured) and, while this
// replica leads, registers, discovers, pushes and applies, until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	admin, err := a.adminServer()
	if err != nil {
		return err
	}
	adminCtx, stopAdmin := context.WithCancel(context.Background())
	defer stopAdmin()
	adminDone := make(chan error, 1)
	go func() { adminDone <- admin.serve(adminCtx) }()

	// Every replica serves its proxies on 9977 and forwards the access
	// logs it keeps; the EnvoyConfig reaches its sinks on every replica.
	envoySrv, err := a.newEnvoyServers(ctx)
	if err != nil {
		return err
	}
	a.envoySink = envoyConfigSinks(envoySrv.sink, a.envoySink)
	admin.mux.Handle("/debug/accesslogs", envoySrv.debugHandler())
	a.certs = &certHolder{dir: a.cfg.StateDir}

	lead, err := a.newLeadership()
	if err != nil {
		return err
	}
	// With Raft, every write to the cluster waits for a recent quorum
	// confirmation of this replica's leadership (app.WriteFence).
	var fence *app.WriteFence
	if lead.fenceValid > 0 {
		fence = app.NewWriteFence(lead, app.WriteFenceOptions{Valid: lead.fenceValid})
	}
	var term atomic.Uint64
	restCfg, err := kube.RESTConfigFromKubeconfig(a.cfg.Kubeconfig, a.cfg.KubeContext)
	if err != nil {
		return fmt.Errorf("kubernetes config: %w", err)
	}
	// The API server's audit log names the replica, and the Raft term,
	// behind every write.
	restCfg.UserAgent = "meshplane-agent/" + platform.Version
	userAgent := func() string {
		if !lead.raft {
			return fmt.Sprintf("meshplane-agent/%s (%s/%s)", platform.Version, a.cfg.Cluster, a.cfg.Replica)
		}
		return fmt.Sprintf("meshplane-agent/%s (%s/%s; term %d)", platform.Version, a.cfg.Cluster, a.cfg.Replica, term.Load())
	}
	var holdWrites func(context.Context) error
	if fence != nil {
		holdWrites = fence.Wait
	}
	restCfg.WrapTransport = kubeadapter.WrapTransport(userAgent, holdWrites)
	// client-go's default of 5 requests a second (burst 10) would make the
	// first apply of a 21,000-object output take over an hour. The budget
	// is the operator's to set (docs/operations.md): the agent writes only
	// what changed, so it is spent at the first apply, after a large
	// change, and when much was changed behind its back.
	restCfg.QPS, restCfg.Burst = float32(a.cfg.KubeQPS), a.cfg.KubeBurst
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	clients, err := kubeadapter.NewClients(restCfg)
	if err != nil {
		return err
	}

	if err := a.reg.Register(newRaftCollector(lead.status)); err != nil {
		return err
	}
	admin.mux.Handle("/debug/raft", raftHandler(lead.status))
	if a.leader == nil {
		a.leader = lead.IsLeader
	}
	runs := []func(context.Context) error{lead.run}
	if lead.raft {
		// Every replica serves its proxies (9977), leader or not, once it
		// has joined the group.
		runs = append(runs, func(ctx context.Context) error { return followReadiness(ctx, admin, lead.status) })
	}
	// Only the leader talks to the management plane, discovers, applies
	// and keeps the Istio CAs.
	relay := app.Duty{
		Name: "relay",
		Run: func(ctx context.Context) error {
			term.Store(lead.status().Term)
			return a.runLeader(ctx, admin, lead, dyn, mapper, clients)
		},
	}
	all := []app.Duty{relay}
	if fence != nil {
		all = append(all, fence.Duty())
	}
	duties := app.NewDuties(lead, app.DutiesOptions{StartDelay: lead.startDelay, Log: a.log}, all...)
	err = platform.RunAll(ctx, append(runs, duties.Run,
		func(ctx context.Context) error { return envoySrv.serve(ctx, a) },
		func(ctx context.Context) error { return envoySrv.forward(ctx, a, a.certs) },
	)...)
	stopAdmin()
	<-adminDone
	return err
}

// runLeader is the leader duty: registration and renewal, discovery and
// push, watch and apply, and the Istio CAs, until ctx ends (the agent
// stops or this replica loses leadership).
func (a *Agent) runLeader(ctx context.Context, admin *adminServer, lead *leadership, dyn dynamic.Interface, mapper meta.RESTMapper, clients kubeadapter.Clients) error {
	regClient, err := a.httpClient(a.clientOptions(a.cfg.addr(a.cfg.RegistrationAddr), nil))
	if err != nil {
		return fmt.Errorf("registration client: %w", err)
	}
	registrar := connectrpc.NewRegistrar(registrationv1connect.NewRegistrationServiceClient(regClient.c, regClient.url, regClient.options()...), platform.Version)
	// With Raft, the credentials a registration or renewal saves reach
	// every replica, so that the next leader needs no bootstrap token.
	store := replicatingStore{Credentials: files.Credentials{Dir: a.cfg.StateDir}, replicate: lead.replicateCredentials, log: a.log}
	identity := app.NewIdentity(a.cfg.Cluster, a.cfg.TrustDomain, a.readToken, store, registrar, a.log)
	if err := identity.Ensure(ctx); err != nil {
		return fmt.Errorf("obtain identity: %w", err)
	}
	if lead.replicateCredentials != nil {
		// Credentials this replica held already (from before Raft, say).
		if cred, err := store.Load(ctx); err == nil {
			store.Save(ctx, cred)
		}
	}
	a.certs.setLeader(identity.Certificate)

	// --ingest-addr may list several addresses, comma-separated: the
	// pusher uses one and moves to the next when its stream fails.
	var ingests []*connectrpc.IngestPushClient
	for _, addr := range splitList(a.cfg.addr(a.cfg.IngestAddr)) {
		ingestClient, err := a.httpClient(a.clientOptions(addr, identity.Certificate))
		if err != nil {
			return fmt.Errorf("ingest client for %s: %w", addr, err)
		}
		ingests = append(ingests, connectrpc.NewIngestPushClient(ingestClient.c, ingestClient.url, ingestClient.options()...))
	}
	if len(ingests) == 0 {
		return fmt.Errorf("no ingest address in %q", a.cfg.addr(a.cfg.IngestAddr))
	}
	// --distribution-addr may list several addresses, comma-separated:
	// the relay watches through one and fails over to the next.
	var dists []distributionv1connect.DistributionServiceClient
	for _, addr := range splitList(a.cfg.addr(a.cfg.DistributionAddr)) {
		distClient, err := a.httpClient(a.clientOptions(addr, identity.Certificate))
		if err != nil {
			return fmt.Errorf("distribution client for %s: %w", addr, err)
		}
		// Snapshots come gzipped from distribution; acks, which list a
		// result per object, go gzipped too.
		opts := append(distClient.options(), connect.WithSendGzip(), connect.WithCompressMinBytes(compressMinBytes))
		dists = append(dists, distributionv1connect.NewDistributionServiceClient(distClient.c, distClient.url, opts...))
	}
	if len(dists) == 0 {
		return fmt.Errorf("no distribution address in %q", a.cfg.addr(a.cfg.DistributionAddr))
	}
	relay := connectrpc.NewRelay(ingests[0], dists, platform.Version, connectrpc.WithDeltas(a.cfg.Deltas, a.deltas.observe))

	reader, err := kubeadapter.NewReader(ctx, clients, kubeadapter.Options{
		Cluster: a.cfg.Cluster,
		Namespaces: kubeadapter.NamespaceFilter{
			Include: splitList(a.cfg.IncludeNamespaces), Exclude: splitList(a.cfg.ExcludeNamespaces), Selector: a.cfg.NamespaceSelector,
		},
		Discovery: a.cfg.discoveryOptions(),
		Resync:    10 * time.Minute,
		Log:       a.log,
	})
	if err != nil {
		return err
	}
	id := domain.Identity{
		Cluster: a.cfg.Cluster, AgentVersion: platform.Version, Replica: a.cfg.Replica,
		Namespace: a.cfg.Namespace, ClusterDomain: a.cfg.ClusterDomain, Install: a.cfg.Install,
	}
	// The gateway detection of Settings reaches discovery through the
	// output snapshots.
	detection := app.NewGatewayDetection()
	var failover []app.PushTarget
	for _, ic := range ingests[1:] {
		// Only its push stream is used: watches and acks go through relay.
		failover = append(failover, connectrpc.NewRelay(ic, dists, platform.Version))
	}
	pusher := app.NewPusher(id, reader, relay, a.metrics, a.log, a.cfg.Debounce,
		app.WithGatewayDetection(detection), app.WithGatewayDetectionWait(a.cfg.GatewayDetectionWait),
		app.WithFailoverTo(failover...))
	if !lead.raft {
		admin.setReady(true)
	}
	a.log.Info("agent running")

	// Renewal goes over mTLS with the current certificate.
	renewClient, err := a.httpClient(a.clientOptions(a.cfg.addr(a.cfg.RegistrationAddr), identity.Certificate))
	if err != nil {
		return fmt.Errorf("renewal client: %w", err)
	}
	renewer := connectrpc.NewRenewer(registrationv1connect.NewRegistrationServiceClient(renewClient.c, renewClient.url, renewClient.options()...), platform.Version)
	renew := func(ctx context.Context) error { return identity.RunRenewal(ctx, renewer) }

	// The istiod intermediate CAs that the output snapshots ask for; the
	// key is made here and never leaves the cluster. After a new one, the
	// mesh's pods are restarted in order when the snapshot asks for it.
	disco := a.cfg.discoveryOptions()
	var pods app.MeshPods
	if a.cfg.RestartPods {
		pods = kubeadapter.NewMeshPods(clients.Kube, splitList(a.cfg.RestartNamespaces))
	}
	caCerts := app.NewCACerts(
		connectrpc.NewIntermediateSigner(registrationv1connect.NewRegistrationServiceClient(renewClient.c, renewClient.url, renewClient.options()...)),
		kubeadapter.NewCASecrets(clients.Kube, a.cfg.Install, a.cfg.Cluster),
		app.CACertsOptions{
			Leader: a.leader, Metrics: a.metrics, Log: a.log.With("duty", "cacerts"),
			Pods: pods, RotationMetrics: a.metrics,
			GatewayLabels:    []map[string]string{disco.IngressGatewayLabels, disco.EastWestGatewayLabels},
			GatewayDetection: detection, Discovery: disco,
		},
	)
	admin.setCACerts(caCerts.Status)
	syncer := app.NewSyncer(relay, kubeadapter.NewApplier(clients.Metadata, mapper, a.cfg.Install, a.cfg.Cluster), a.metrics, a.log,
		app.WithApplyOptions(app.ApplyOptions{Install: a.cfg.Install, Cluster: a.cfg.Cluster, Workers: a.cfg.ApplyWorkers}),
		app.WithStatusWriter(kubeadapter.NewStatusWriter(dyn, mapper)),
		app.WithLeadership(lead),
		app.WithEnvoyConfigReplicator(lead.replicator),
		app.WithGatewayDetectorSink(detection),
		app.WithCACerts(caCerts),
	)

	return platform.RunAll(ctx, pusher.Run, syncer.Run, renew, caCerts.Run)
}

func (a *Agent) readToken() (string, error) {
	if a.cfg.TokenFile == "" {
		return "", fmt.Errorf("no valid certificate in %s and no --token-file to register with", a.cfg.StateDir)
	}
	b, err := os.ReadFile(a.cfg.TokenFile)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
