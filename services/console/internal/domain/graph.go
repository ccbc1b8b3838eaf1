package domain

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots/meshview"
)

// Node kinds and edge kinds of the graph.
const (
	NodeCluster            = "cluster"
	NodeMesh               = "mesh"
	NodeDestination        = "destination"
	NodeVirtualDestination = "virtualdestination"
	NodeWorkload           = "workload"

	EdgeFederation = "federation"
	EdgeFailover   = "failover"
	EdgeAccess     = "access"
	EdgeTraffic    = "traffic"
)

// Node is a graph node; ID is "<kind>/<name>.<namespace>.<cluster>" or
// "cluster/<name>".
type Node struct {
	ID, Kind, Name, Namespace, Cluster, Parent string
	Hosts                                      []string
}

// Edge is a graph edge.
type Edge struct {
	Source, Target, Kind string
	Order                uint32
	Policy               string
	RequestRate          float64
	ErrorRate            float64
	Label                string
}

// Graph is nodes and edges, each sorted by ID (edges by source, target,
// kind, order) so that two builds of the same state are equal.
type Graph struct {
	Nodes []Node
	Edges []Edge
}

// TrafficCount is what the access-log window saw from one source workload
// to one host.
type TrafficCount struct {
	Source   meshview.Ref
	Host     string
	Requests uint64
	Errors   uint64
}

// GraphInput is the state a graph is built from: discovery from ingest,
// outputs (objects and statuses) from translation, traffic from the access
// logs.
type GraphInput struct {
	Meshes       []*discoveryv1.Mesh
	Destinations []*discoveryv1.Destination
	Outputs      map[string]*snapshotv1.OutputSnapshot
	Traffic      []TrafficCount
	Window       time.Duration
}

// NodeID is a namespaced object's node ID.
func NodeID(kind, name, namespace, cluster string) string {
	return kind + "/" + name + "." + namespace + "." + cluster
}

// ClusterID is a cluster's node ID.
func ClusterID(cluster string) string { return NodeCluster + "/" + cluster }

type graphBuilder struct {
	nodes map[string]Node
	edges map[Edge]struct{}
	// hosts maps every hostname a destination answers to to its node.
	hosts map[string]string
	// meshesIn lists each cluster's mesh node IDs.
	meshesIn map[string][]string
}

// BuildGraph builds the graph. Federation edges come from the ServiceEntries
// each cluster's output holds for another cluster's destination (what
// translation produced), failover edges from VirtualDestination statuses'
// selected destinations in order, access edges from AccessPolicy statuses
// (source workloads to accepted destinations), and traffic edges from the
// access-log counts. It runs in time linear in its input.
func BuildGraph(in GraphInput) Graph {
	b := &graphBuilder{nodes: map[string]Node{}, edges: map[Edge]struct{}{}, hosts: map[string]string{}, meshesIn: map[string][]string{}}
	b.addMeshes(in.Meshes)
	b.addDestinations(in.Destinations)
	clusters := slices.Sorted(maps.Keys(in.Outputs))
	for _, cl := range clusters {
		b.addCluster(cl)
		b.addFederation(cl, in.Outputs[cl])
		b.addStatuses(cl, in.Outputs[cl])
	}
	b.addTraffic(in.Traffic, in.Window)
	return b.graph()
}

func (b *graphBuilder) addCluster(cl string) {
	if _, ok := b.nodes[ClusterID(cl)]; !ok {
		b.nodes[ClusterID(cl)] = Node{ID: ClusterID(cl), Kind: NodeCluster, Name: cl, Cluster: cl}
	}
}

func (b *graphBuilder) addMeshes(meshes []*discoveryv1.Mesh) {
	for _, m := range meshes {
		md := m.GetMetadata()
		b.addCluster(md.GetCluster())
		id := NodeID(NodeMesh, md.GetName(), md.GetNamespace(), md.GetCluster())
		b.nodes[id] = Node{ID: id, Kind: NodeMesh, Name: md.GetName(), Namespace: md.GetNamespace(), Cluster: md.GetCluster(), Parent: ClusterID(md.GetCluster())}
		b.meshesIn[md.GetCluster()] = append(b.meshesIn[md.GetCluster()], id)
	}
}

func (b *graphBuilder) addDestinations(dests []*discoveryv1.Destination) {
	for _, d := range dests {
		ref := d.GetSpec().GetKubeService().GetRef()
		cl := cmp.Or(d.GetMetadata().GetCluster(), ref.GetCluster())
		b.addCluster(cl)
		id := NodeID(NodeDestination, ref.GetName(), ref.GetNamespace(), cl)
		parent := ClusterID(cl)
		if m := d.GetSpec().GetMesh(); m != nil {
			parent = NodeID(NodeMesh, m.GetName(), m.GetNamespace(), cl)
		}
		n := Node{ID: id, Kind: NodeDestination, Name: ref.GetName(), Namespace: ref.GetNamespace(), Cluster: cl, Parent: parent}
		if h := d.GetStatus().GetLocalFqdn(); h != "" {
			n.Hosts = append(n.Hosts, h)
		}
		for _, fh := range d.GetStatus().GetFederatedHostnames() {
			n.Hosts = append(n.Hosts, fh.GetHostname())
		}
		for _, h := range n.Hosts {
			b.hosts[h] = id
		}
		b.nodes[id] = n
	}
}

// addFederation adds an edge from the meshes of cluster cl to every
// destination of another cluster that one of cl's ServiceEntries was made
// for.
func (b *graphBuilder) addFederation(cl string, out *snapshotv1.OutputSnapshot) {
	for _, o := range out.GetObjects() {
		if o.GetKind() != "ServiceEntry" {
			continue
		}
		parents := meshview.Parents(o)
		sources := b.meshesIn[cl]
		if ms := parents[meshview.ParentMesh]; len(ms) > 0 {
			sources = sources[:0:0]
			for _, m := range ms {
				sources = append(sources, NodeID(NodeMesh, m.Name, m.Namespace, cmp.Or(m.Cluster, cl)))
			}
		}
		if len(sources) == 0 {
			sources = []string{ClusterID(cl)}
		}
		for _, d := range parents[meshview.ParentDestination] {
			if d.Cluster == cl || d.Cluster == "" {
				continue
			}
			target := NodeID(NodeDestination, d.Name, d.Namespace, d.Cluster)
			for _, s := range sources {
				b.edges[Edge{Source: s, Target: target, Kind: EdgeFederation, Label: o.GetNamespace() + "/" + o.GetName()}] = struct{}{}
			}
		}
	}
}

// statusRefs is the part of VirtualDestination and AccessPolicy statuses
// the graph reads.
type statusRefs struct {
	Selected []meshview.Ref `json:"selectedDestinations"`
}

func (b *graphBuilder) addStatuses(cl string, out *snapshotv1.OutputSnapshot) {
	for _, rs := range out.GetStatuses() {
		policy := rs.GetKind() + "/" + rs.GetNamespace() + "/" + rs.GetName()
		switch rs.GetKind() {
		case "VirtualDestination":
			b.addVirtualDestination(cl, rs, policy)
		case "AccessPolicy":
			b.addAccess(rs, policy)
		}
	}
}

func (b *graphBuilder) addVirtualDestination(cl string, rs *snapshotv1.ResourceStatus, policy string) {
	id := NodeID(NodeVirtualDestination, rs.GetName(), rs.GetNamespace(), cl)
	b.nodes[id] = Node{ID: id, Kind: NodeVirtualDestination, Name: rs.GetName(), Namespace: rs.GetNamespace(), Cluster: cl}
	var st statusRefs
	_ = json.Unmarshal(rs.GetStatus(), &st)
	for i, d := range st.Selected {
		b.edges[Edge{Source: id, Target: NodeID(NodeDestination, d.Name, d.Namespace, d.Cluster), Kind: EdgeFailover, Order: uint32(i + 1), Policy: policy}] = struct{}{}
	}
}

func (b *graphBuilder) addAccess(rs *snapshotv1.ResourceStatus, policy string) {
	st := meshview.ParseStatus(rs)
	for key, ts := range st.Destinations {
		if ts.State != "ACCEPTED" {
			continue
		}
		target := NodeDestination + "/" + key
		for _, w := range st.Workloads {
			src := b.workload(w)
			b.edges[Edge{Source: src, Target: target, Kind: EdgeAccess, Policy: policy}] = struct{}{}
		}
	}
}

// workload adds a workload node, only where an edge needs one.
func (b *graphBuilder) workload(w meshview.Ref) string {
	id := NodeID(NodeWorkload, w.Name, w.Namespace, w.Cluster)
	if _, ok := b.nodes[id]; !ok {
		b.addCluster(w.Cluster)
		b.nodes[id] = Node{ID: id, Kind: NodeWorkload, Name: w.Name, Namespace: w.Namespace, Cluster: w.Cluster, Parent: ClusterID(w.Cluster)}
	}
	return id
}

func (b *graphBuilder) addTraffic(counts []TrafficCount, window time.Duration) {
	secs := window.Seconds()
	if secs <= 0 {
		return
	}
	for _, c := range counts {
		target, ok := b.hosts[hostOnly(c.Host)]
		if !ok {
			continue
		}
		src := b.workload(c.Source)
		b.edges[Edge{Source: src, Target: target, Kind: EdgeTraffic, RequestRate: float64(c.Requests) / secs, ErrorRate: float64(c.Errors) / secs}] = struct{}{}
	}
}

// hostOnly drops a port from an authority.
func hostOnly(authority string) string {
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.Contains(authority[i:], "]") {
		return authority[:i]
	}
	return authority
}

func (b *graphBuilder) graph() Graph {
	g := Graph{Nodes: make([]Node, 0, len(b.nodes)), Edges: make([]Edge, 0, len(b.edges))}
	for _, id := range slices.Sorted(maps.Keys(b.nodes)) {
		g.Nodes = append(g.Nodes, b.nodes[id])
	}
	for e := range b.edges {
		g.Edges = append(g.Edges, e)
	}
	slices.SortFunc(g.Edges, func(x, y Edge) int {
		return cmp.Or(cmp.Compare(x.Source, y.Source), cmp.Compare(x.Target, y.Target), cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Order, y.Order), cmp.Compare(x.Label, y.Label), cmp.Compare(x.Policy, y.Policy))
	})
	return g
}
