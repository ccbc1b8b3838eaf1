package domain

import (
	"slices"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

// DefaultTrustDomain is Istio's trust domain when the mesh config names none.
const DefaultTrustDomain = "cluster.local"

// mesh is a discovered istiod.
type mesh struct {
	Key ObjectKey // the cluster that reported it, its namespace and name
	// Namespace is where istiod runs. Meshplane takes it to be the mesh's
	// root namespace, where mesh-wide policies go; that is Istio's default.
	Namespace   string
	TrustDomain string
	Ingress     []*discoveryv1.MeshSpec_Gateway
	EastWest    []*discoveryv1.MeshSpec_Gateway
	SmartDNS    bool
}

// RefKey is how VirtualMeshes and statuses name the mesh: "<name>.<namespace>".
func (m *mesh) RefKey() string { return m.Key.Name + "." + m.Key.Namespace }

type meshIndex struct {
	meshes          []*mesh // sorted by key
	meshByKey       map[ObjectKey]*mesh
	meshesByRef     map[[2]string][]*mesh // (namespace, name) -> meshes in any cluster
	meshesByCluster map[string][]*mesh
}

func (ix *meshIndex) indexMeshes(inputs map[string]*snapshotv1.InputSnapshot) {
	ix.meshByKey = map[ObjectKey]*mesh{}
	ix.meshesByRef = map[[2]string][]*mesh{}
	ix.meshesByCluster = map[string][]*mesh{}
	found := map[ObjectKey]*discoveryv1.Mesh{}
	for _, cluster := range sortedKeys(inputs) {
		for _, m := range inputs[cluster].GetMeshes() {
			md := m.GetMetadata()
			key := ObjectKey{Cluster: cluster, Namespace: md.GetNamespace(), Name: md.GetName()}
			if key.Name == "" {
				continue
			}
			if old, dup := found[key]; !dup || compareContent(m, old) < 0 {
				found[key] = m
			}
		}
	}
	for key, m := range found {
		is := m.GetSpec().GetIstio()
		ms := &mesh{
			Key:         key,
			Namespace:   is.GetInstallation().GetNamespace(),
			TrustDomain: is.GetTrustDomain(),
			Ingress:     is.GetIngressGateways(),
			EastWest:    is.GetEastWestGateways(),
			SmartDNS:    is.GetSmartDnsProxyingEnabled(),
		}
		if ms.Namespace == "" {
			ms.Namespace = key.Namespace
		}
		if ms.TrustDomain == "" {
			ms.TrustDomain = DefaultTrustDomain
		}
		ix.meshes = append(ix.meshes, ms)
	}
	slices.SortFunc(ix.meshes, func(a, b *mesh) int { return a.Key.compare(b.Key) })
	for _, m := range ix.meshes {
		ix.meshByKey[m.Key] = m
		rk := [2]string{m.Key.Namespace, m.Key.Name}
		ix.meshesByRef[rk] = append(ix.meshesByRef[rk], m)
		ix.meshesByCluster[m.Key.Cluster] = append(ix.meshesByCluster[m.Key.Cluster], m)
	}
}

// meshOf resolves the mesh reference of a workload or destination in
// cluster. Without a reference, the cluster's only mesh is meant; the zero
// key means the mesh is not known.
func (ix *meshIndex) meshOf(cluster string, ref *commonv1.ObjectRef) ObjectKey {
	if ref.GetName() != "" {
		k := ObjectKey{Cluster: cluster, Namespace: ref.GetNamespace(), Name: ref.GetName()}
		if _, ok := ix.meshByKey[k]; ok {
			return k
		}
		return ObjectKey{}
	}
	if ms := ix.meshesByCluster[cluster]; len(ms) == 1 {
		return ms[0].Key
	}
	return ObjectKey{}
}

// clusterTrustDomains returns the trust domains of the meshes in cluster,
// or Istio's default when no mesh is known there.
func (ix *meshIndex) clusterTrustDomains(cluster string) []string {
	var tds []string
	for _, m := range ix.meshesByCluster[cluster] {
		tds = append(tds, m.TrustDomain)
	}
	if len(tds) == 0 {
		return []string{DefaultTrustDomain}
	}
	return uniqueSorted(tds)
}

// serviceAccountTrustDomains returns the trust domains under which the
// service account sa (cluster, namespace, name) has identities: those of
// the meshes of the workloads that run as it. known is false when no
// discovered workload runs as it; the cluster's trust domains are returned
// then, so that a workload deployed later is allowed at once.
func (ix *Index) serviceAccountTrustDomains(sa ObjectKey) (tds []string, known bool) {
	ws := ix.workloadsBySA[sa]
	if len(ws) == 0 {
		return ix.clusterTrustDomains(sa.Cluster), false
	}
	for _, w := range ws {
		if m, ok := ix.meshByKey[w.Mesh]; ok {
			tds = append(tds, m.TrustDomain)
		} else {
			tds = append(tds, ix.clusterTrustDomains(sa.Cluster)...)
		}
	}
	return uniqueSorted(tds), true
}
