package domain

import (
	"fmt"
	"slices"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	multiclusterv1 "github.com/meshplane/meshplane/libs/gen/meshplane/multicluster/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
)

// Names of the ScopeGrant resource.
const (
	MulticlusterV1 = "multicluster.meshplane.dev/v1"
	KindScopeGrant = "ScopeGrant"
)

// scopes says what the resources read from each cluster may select and
// change. A resource from the management cluster may change anything. A
// resource from a workload cluster may change its own cluster, and what
// the ScopeGrants in the management cluster add for it: a workload
// cluster's input is trusted for that cluster only, so a compromised
// cluster cannot steer another's routing.
type scopes struct {
	management string
	// grants holds, per workload cluster, the targets granted to it.
	grants map[string][]*multiclusterv1.ScopeGrantSpec_Target
	// all are the ScopeGrants of every input, for their statuses.
	all []*scopeGrant
}

type scopeGrant struct {
	Key    ObjectKey
	Meta   *commonv1.ObjectMeta
	Spec   *multiclusterv1.ScopeGrantSpec
	Errors []string
}

// readScopes reads the ScopeGrants. Only the management cluster's count:
// one read from a workload cluster is INVALID, or a cluster could grant
// itself the others.
func readScopes(inputs map[string]*snapshotv1.InputSnapshot, management string) *scopes {
	s := &scopes{management: management, grants: map[string][]*multiclusterv1.ScopeGrantSpec_Target{}}
	for _, c := range collectResources(inputs, (*snapshotv1.InputSnapshot).GetScopeGrants) {
		g := &scopeGrant{Key: c.Key, Meta: c.Res.GetMetadata(), Spec: c.Res.GetSpec()}
		s.all = append(s.all, g)
		if c.Key.Cluster != management {
			g.Errors = []string{fmt.Sprintf("a ScopeGrant is read only from the management cluster %q, not from cluster %q", management, c.Key.Cluster)}
			continue
		}
		if g.Errors = validateVersion(g.Meta, g.Spec, ValidateScopeGrant); len(g.Errors) > 0 {
			continue
		}
		for _, cluster := range g.Spec.GetClusters() {
			if cluster == management {
				continue // it is global already
			}
			s.grants[cluster] = append(s.grants[cluster], g.Spec.GetTargets()...)
		}
	}
	return s
}

// ValidateScopeGrant checks a ScopeGrant's spec.
func ValidateScopeGrant(spec *multiclusterv1.ScopeGrantSpec) []string {
	v := &validator{}
	if len(spec.GetClusters()) == 0 {
		v.add("spec.clusters", "must name at least one workload cluster")
	}
	for i, c := range spec.GetClusters() {
		if c == "" {
			v.add(fmt.Sprintf("spec.clusters[%d]", i), "must not be empty")
		}
	}
	if len(spec.GetTargets()) == 0 {
		v.add("spec.targets", "must not be empty: a grant of nothing has no effect")
	}
	return v.errs
}

// allows says whether a resource read from cluster source may select or
// change what is in namespace of cluster.
func (s *scopes) allows(source, cluster, namespace string) bool {
	if s == nil || source == s.management || source == cluster {
		return true
	}
	for _, t := range s.grants[source] {
		if matchesAny(t.GetClusters(), cluster) && matchesAny(t.GetNamespaces(), namespace) {
			return true
		}
	}
	return false
}

// global says whether a resource read from cluster source may change every
// cluster, as Settings do.
func (s *scopes) global(source string) bool {
	if s == nil || source == s.management {
		return true
	}
	for _, t := range s.grants[source] {
		if len(t.GetClusters()) == 0 && len(t.GetNamespaces()) == 0 {
			return true
		}
	}
	return false
}

func matchesAny(list []string, v string) bool {
	return len(list) == 0 || slices.Contains(list, v)
}

// outOfScope is the error for a resource of cluster source that selects
// what (in cluster, namespace) at field path.
func (s *scopes) outOfScope(path, what, source, cluster, namespace string) string {
	return fmt.Sprintf("%s: %s is in cluster %q, namespace %q, outside the scope of cluster %q: a resource read from a workload cluster changes only that cluster, unless a ScopeGrant in the management cluster %q grants it", path, what, cluster, namespace, source, s.management)
}

// scopeWarning marks an ApprovalStatus that is INVALID because its target
// is outside the scope: the resource's spec is valid, so it may still be
// its last valid version.
const scopeWarning = "outside the scope of the cluster the resource was read from"

func outOfScope(as *commonv1.ApprovalStatus) bool {
	return as.GetState() == commonv1.ApprovalState_INVALID && slices.Contains(as.GetWarnings(), scopeWarning)
}

// scopeGrantStatus is the status written back to a ScopeGrant.
func scopeGrantStatus(enc encode.Encoder, g *scopeGrant) (*snapshotv1.ResourceStatus, error) {
	st := &multiclusterv1.ScopeGrantStatus{
		ObservedGeneration: g.Meta.GetGeneration(),
		State:              commonv1.ApprovalState_ACCEPTED,
		Errors:             slices.Clone(g.Errors),
	}
	if len(g.Errors) > 0 {
		st.State = commonv1.ApprovalState_INVALID
	}
	return resourceStatus(enc, MulticlusterV1, KindScopeGrant, g.Key, g.Meta.GetGeneration(), st)
}
