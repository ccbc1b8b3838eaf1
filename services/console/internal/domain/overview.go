package domain

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meshplane/meshplane/libs/snapshots/meshview"
)

// ServiceHealth is one management service's gRPC health answer.
type ServiceHealth struct {
	Name, Status, Error string
}

// Overview is what `meshctl check` reports, problems first.
type Overview struct {
	OK       bool
	Problems []string
	Services []ServiceHealth
	SafeMode *meshview.SafeMode
	Clusters []meshview.ClusterCheck
	Notes    []string
}

// NewOverview orders the check's findings for a reader: services that do
// not serve, then safe mode, then clusters with problems (those never seen
// first), then the healthy clusters by name.
func NewOverview(services []ServiceHealth, rep meshview.ClusterReport, notes []string, now time.Time) Overview {
	o := Overview{OK: rep.OK, Services: services, SafeMode: rep.SafeMode, Notes: notes}
	for _, s := range services {
		if s.Status != "SERVING" {
			o.OK = false
			o.Problems = append(o.Problems, strings.TrimSpace(fmt.Sprintf("service %s is %s %s", s.Name, s.Status, s.Error)))
		}
	}
	if sm := rep.SafeMode; sm != nil {
		if sm.On {
			p := "safe mode is on: publishing held until every cluster reports"
			if len(sm.Waiting) > 0 {
				p += "; waiting for " + strings.Join(sm.Waiting, ", ")
			}
			o.Problems = append(o.Problems, p)
		}
		if len(sm.Missing) > 0 {
			o.Problems = append(o.Problems, "expected clusters missing: "+strings.Join(sm.Missing, ", ")+": outputs are incomplete, agents hold their deletions")
		}
	}
	o.Clusters = slices.Clone(rep.Clusters)
	slices.SortStableFunc(o.Clusters, func(a, b meshview.ClusterCheck) int {
		if ra, rb := clusterRank(a), clusterRank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a.Cluster, b.Cluster)
	})
	for _, c := range o.Clusters {
		o.Problems = append(o.Problems, clusterProblems(c, now)...)
	}
	return o
}

// clusterRank puts clusters never heard from first, then other unhealthy
// ones, then healthy ones.
func clusterRank(c meshview.ClusterCheck) int {
	switch {
	case c.Push == "never":
		return 0
	case !c.Healthy:
		return 1
	}
	return 2
}

func clusterProblems(c meshview.ClusterCheck, now time.Time) []string {
	var out []string
	add := func(format string, args ...any) {
		out = append(out, "cluster "+c.Cluster+": "+fmt.Sprintf(format, args...))
	}
	switch {
	case c.Push == "never":
		add("its agent never connected")
	case strings.HasPrefix(c.Push, "disconnected"):
		add("its agent does not push")
	}
	if c.Refused != nil {
		add("last push refused (%s): %s", c.Refused.Reason, c.Refused.Message)
	}
	if !c.Management && c.Push != "never" {
		if c.Pull != "connected" {
			add("its agent does not pull")
		}
		if c.Applied != "current" {
			add("applied version is %s, not the latest", c.Applied)
		}
	}
	if c.ApplyErrors > 0 {
		add("%d objects failed to apply", c.ApplyErrors)
	}
	if c.HeldDeletions > 0 {
		add("%d deletions held", c.HeldDeletions)
	}
	if c.CertExpires != nil && !now.Before(*c.CertExpires) {
		add("agent certificate expired at %s", c.CertExpires.Format(time.RFC3339))
	}
	return out
}
