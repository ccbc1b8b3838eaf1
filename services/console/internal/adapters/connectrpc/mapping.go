package connectrpc

import (
	"strings"
	"time"

	consolev1 "github.com/meshplane/meshplane/libs/gen/meshplane/console/v1"
	"github.com/meshplane/meshplane/libs/snapshots/meshview"
	"github.com/meshplane/meshplane/services/console/internal/app"
	"github.com/meshplane/meshplane/services/console/internal/domain"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func ts(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func overviewToProto(o domain.Overview) *consolev1.GetOverviewResponse {
	res := &consolev1.GetOverviewResponse{Ok: o.OK, Problems: o.Problems, Notes: o.Notes, SafeMode: &consolev1.SafeMode{}}
	for _, s := range o.Services {
		res.Services = append(res.Services, &consolev1.ServiceHealth{Name: s.Name, Status: s.Status, Error: s.Error})
	}
	if sm := o.SafeMode; sm != nil {
		res.SafeMode = &consolev1.SafeMode{On: sm.On, WaitingFor: sm.Waiting, MissingClusters: sm.Missing, Checked: true}
	}
	for _, c := range o.Clusters {
		res.Clusters = append(res.Clusters, clusterToProto(c))
	}
	return res
}

func clusterToProto(c meshview.ClusterCheck) *consolev1.ClusterOverview {
	pull := c.Pull
	if pull == "-" {
		pull = ""
	}
	// The contract's push states; a refusal has a field of its own, and a
	// cluster only registration or translation knows is "never".
	push := strings.TrimSuffix(c.Push, ", refused")
	if push == "disconnected" && c.Stale {
		push = "stale"
	}
	co := &consolev1.ClusterOverview{
		Cluster: c.Cluster, Push: push, Pull: pull, InputVersion: c.InputVersion, LastPush: ts(c.LastPush),
		LatestVersion: c.LatestVersion, AppliedVersion: c.AppliedVersion, UpToDate: c.Applied == "current",
		ApplyErrors: c.ApplyErrors, HeldDeletions: c.HeldDeletions, Registration: c.Registration, CertExpiresAt: ts(c.CertExpires),
		AgentVersion: c.AgentVersion, Management: c.Management,
	}
	if r := c.Refused; r != nil {
		co.Refused = r.Reason + ": " + r.Message
	}
	return co
}

func graphToProto(g app.GraphResult) *consolev1.GetGraphResponse {
	res := &consolev1.GetGraphResponse{TrafficSince: timestamppb.New(g.TrafficSince), TrafficAvailable: g.TrafficAvailable,
		Nodes: make([]*consolev1.GraphNode, 0, len(g.Graph.Nodes)), Edges: make([]*consolev1.GraphEdge, 0, len(g.Graph.Edges))}
	for _, n := range g.Graph.Nodes {
		res.Nodes = append(res.Nodes, &consolev1.GraphNode{Id: n.ID, Kind: n.Kind, Name: n.Name, Namespace: n.Namespace, Cluster: n.Cluster, Parent: n.Parent, Hosts: n.Hosts})
	}
	for _, e := range g.Graph.Edges {
		res.Edges = append(res.Edges, &consolev1.GraphEdge{Source: e.Source, Target: e.Target, Kind: e.Kind, Order: e.Order, Policy: e.Policy, RequestRate: e.RequestRate, ErrorRate: e.ErrorRate, Label: e.Label})
	}
	return res
}

func objectsToProto(objs []meshview.OutputObject) []*consolev1.OutputObject {
	out := make([]*consolev1.OutputObject, 0, len(objs))
	for _, o := range objs {
		out = append(out, &consolev1.OutputObject{Cluster: o.Cluster, ApiVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})
	}
	return out
}

func policyToProto(p domain.Policy) *consolev1.Policy {
	res := &consolev1.Policy{Kind: p.Kind, Name: p.Name, Namespace: p.Namespace, Cluster: p.Cluster, State: p.State,
		ObservedGeneration: p.ObservedGeneration, Errors: p.Errors, LastKnownGood: p.LastKnownGood, Objects: objectsToProto(p.Objects), StatusJson: p.StatusJSON}
	for _, t := range p.Targets {
		res.Targets = append(res.Targets, &consolev1.Target{Target: t.Target, AcceptanceOrder: t.AcceptanceOrder, State: t.State, Errors: t.Errors, Warnings: t.Warnings})
	}
	return res
}

func descriptionToProto(d domain.Description) *consolev1.Description {
	res := &consolev1.Description{Kind: d.Kind, Name: d.Name, Namespace: d.Namespace, Cluster: d.Cluster, Objects: objectsToProto(d.Objects), Related: d.Related}
	for _, x := range d.Details {
		res.Details = append(res.Details, &consolev1.Detail{Name: x.Name, Value: x.Value})
	}
	for _, a := range d.Applied {
		res.Applied = append(res.Applied, &consolev1.AppliedPolicy{AcceptanceOrder: a.AcceptanceOrder, Kind: a.Kind, Name: a.Name, Namespace: a.Namespace, Cluster: a.Cluster})
	}
	for _, r := range d.Rejected {
		res.Rejected = append(res.Rejected, &consolev1.Rejection{Kind: r.Kind, Name: r.Name, Namespace: r.Namespace, Cluster: r.Cluster, State: r.State, Errors: r.Errors})
	}
	return res
}
