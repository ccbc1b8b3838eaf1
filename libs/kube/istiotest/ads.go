package istiotest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// Type URLs of the xDS resources the client asks for.
const (
	TypeCluster = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	TypeCLA     = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	TypeRoute   = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
)

// Proxy describes the Envoy the client pretends to be.
type Proxy struct {
	// Type is "sidecar" (the default) or "router" (a gateway).
	Type string
	// IP is the proxy's pod IP (istiod finds the pod by it, when it exists).
	IP string
	// Name and Namespace of the pod.
	Name, Namespace string
	// ServiceAccount the pod runs as; "default" when empty.
	ServiceAccount string
	// Labels of the pod, which Gateway selectors and workload selectors
	// match.
	Labels map[string]string
	// Region and Zone of its node; empty for none.
	Region, Zone string
	// RouterMode is "sni-dnat" for an east-west gateway (what Istio's
	// gateway charts set), empty for the standard mode.
	RouterMode string
}

// ADS is one aggregated-discovery stream to istiod, holding what it has
// received.
type ADS struct {
	conn   *grpc.ClientConn
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node   *corev3.Node
	cancel context.CancelFunc
	// The last accepted response per type, for the ACKs.
	nonce, version map[string]string
}

// Connect opens an ADS stream to istiod as proxy p.
func (id *Istiod) Connect(ctx context.Context, p Proxy) (*ADS, error) {
	if p.Type == "" {
		p.Type = "sidecar"
	}
	if p.Namespace == "" {
		p.Namespace = "default"
	}
	if p.ServiceAccount == "" {
		p.ServiceAccount = "default"
	}
	labels := map[string]any{}
	for k, v := range p.Labels {
		labels[k] = v
	}
	meta := map[string]any{
		"ISTIO_VERSION":     "1.31.0",
		"NAMESPACE":         p.Namespace,
		"CLUSTER_ID":        id.ClusterID,
		"LABELS":            labels,
		"INTERCEPTION_MODE": "REDIRECT",
		"SERVICE_ACCOUNT":   p.ServiceAccount,
		"WORKLOAD_NAME":     p.Name,
		"INSTANCE_IPS":      p.IP,
	}
	if p.RouterMode != "" {
		meta["ROUTER_MODE"] = p.RouterMode
	}
	md, err := structpb.NewStruct(meta)
	if err != nil {
		return nil, fmt.Errorf("istiotest: node metadata: %w", err)
	}
	node := &corev3.Node{
		Id:       fmt.Sprintf("%s~%s~%s.%s~%s.svc.cluster.local", p.Type, p.IP, p.Name, p.Namespace, p.Namespace),
		Metadata: md,
	}
	if p.Region != "" || p.Zone != "" {
		node.Locality = &corev3.Locality{Region: p.Region, Zone: p.Zone}
	}
	conn, err := grpc.NewClient(id.XDSAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return nil, fmt.Errorf("istiotest: dial %s: %w", id.XDSAddr, err)
	}
	sctx, cancel := context.WithCancel(ctx)
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(sctx)
	if err != nil {
		cancel()
		conn.Close()
		return nil, fmt.Errorf("istiotest: open ADS stream: %w", err)
	}
	return &ADS{conn: conn, stream: stream, node: node, cancel: cancel, nonce: map[string]string{}, version: map[string]string{}}, nil
}

// Close ends the stream.
func (a *ADS) Close() {
	a.cancel()
	a.conn.Close()
}

// request asks for typeURL (names nil: all) and returns the first response
// of that type, ACKing it. Responses of other types (istiod may push some)
// are ACKed and dropped.
func (a *ADS) request(typeURL string, names []string) (*discoveryv3.DiscoveryResponse, error) {
	req := &discoveryv3.DiscoveryRequest{Node: a.node, TypeUrl: typeURL, ResourceNames: names,
		VersionInfo: a.version[typeURL], ResponseNonce: a.nonce[typeURL]}
	if err := a.stream.Send(req); err != nil {
		return nil, fmt.Errorf("istiotest: send %s request: %w", typeURL, err)
	}
	for {
		resp, err := a.stream.Recv()
		if err != nil {
			return nil, fmt.Errorf("istiotest: waiting for %s: %w", typeURL, err)
		}
		a.nonce[resp.GetTypeUrl()], a.version[resp.GetTypeUrl()] = resp.GetNonce(), resp.GetVersionInfo()
		if resp.GetTypeUrl() != typeURL {
			continue
		}
		// ACK, so that istiod does not resend; no answer is awaited.
		ack := &discoveryv3.DiscoveryRequest{Node: a.node, TypeUrl: typeURL, ResourceNames: names,
			VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
		if err := a.stream.Send(ack); err != nil {
			return nil, fmt.Errorf("istiotest: ACK %s: %w", typeURL, err)
		}
		return resp, nil
	}
}

// Clusters asks for CDS and returns the clusters by name.
func (a *ADS) Clusters() (map[string]*clusterv3.Cluster, error) {
	resp, err := a.request(TypeCluster, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]*clusterv3.Cluster{}
	for _, r := range resp.GetResources() {
		c := &clusterv3.Cluster{}
		if err := r.UnmarshalTo(c); err != nil {
			return nil, fmt.Errorf("istiotest: decode cluster: %w", err)
		}
		out[c.GetName()] = c
	}
	return out, nil
}

// Endpoints asks for EDS of the named clusters and returns the load
// assignments by cluster name.
func (a *ADS) Endpoints(names ...string) (map[string]*endpointv3.ClusterLoadAssignment, error) {
	resp, err := a.request(TypeCLA, names)
	if err != nil {
		return nil, err
	}
	out := map[string]*endpointv3.ClusterLoadAssignment{}
	for _, r := range resp.GetResources() {
		c := &endpointv3.ClusterLoadAssignment{}
		if err := r.UnmarshalTo(c); err != nil {
			return nil, fmt.Errorf("istiotest: decode load assignment: %w", err)
		}
		out[c.GetClusterName()] = c
	}
	return out, nil
}

// Routes asks for RDS of the named route configurations (a sidecar's
// outbound HTTP routes are named by port, "9080") and returns them by
// name.
func (a *ADS) Routes(names ...string) (map[string]*routev3.RouteConfiguration, error) {
	resp, err := a.request(TypeRoute, names)
	if err != nil {
		return nil, err
	}
	out := map[string]*routev3.RouteConfiguration{}
	for _, r := range resp.GetResources() {
		rc := &routev3.RouteConfiguration{}
		if err := r.UnmarshalTo(rc); err != nil {
			return nil, fmt.Errorf("istiotest: decode route configuration: %w", err)
		}
		out[rc.GetName()] = rc
	}
	return out, nil
}

// EDSClusters are the names of the clusters that take their endpoints from
// EDS, sorted.
func EDSClusters(clusters map[string]*clusterv3.Cluster) []string {
	var out []string
	for name, c := range clusters {
		if c.GetType() == clusterv3.Cluster_EDS {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Endpoint is one endpoint of a load assignment, flattened.
type Endpoint struct {
	Address  string // IP or hostname
	Port     uint32
	Priority uint32
	Locality string // region/zone/subzone, trailing parts empty
}

func (e Endpoint) String() string {
	return fmt.Sprintf("%s:%d priority %d locality %q", e.Address, e.Port, e.Priority, e.Locality)
}

// Flatten lists the endpoints of a load assignment.
func Flatten(cla *endpointv3.ClusterLoadAssignment) []Endpoint {
	var out []Endpoint
	for _, l := range cla.GetEndpoints() {
		loc := strings.TrimRight(l.GetLocality().GetRegion()+"/"+l.GetLocality().GetZone()+"/"+l.GetLocality().GetSubZone(), "/")
		for _, e := range l.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, Endpoint{Address: sa.GetAddress(), Port: sa.GetPortValue(), Priority: l.GetPriority(), Locality: loc})
		}
	}
	return out
}
