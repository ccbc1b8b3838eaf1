package domain

import (
	"cmp"
	"slices"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/proto"
)

// trafficPolicy is a TrafficPolicy with what translation learns about it.
type trafficPolicy struct {
	Key  ObjectKey // the cluster is the one whose input carried it
	Meta *commonv1.ObjectMeta
	Spec *networkingv1.TrafficPolicySpec
	// Errors found by validation: the policy is not translated at all.
	Errors []string
	Status *commonv1.ResourceStatus
	// lastGood is set when the current version failed validation and the
	// last valid version, now in Spec, is translated instead.
	lastGood *LastGoodTraffic
	// prior is the last valid version when it is older than the current
	// one, which passed validation: it stays in force for each destination
	// where the current version fails (a reference that does not resolve,
	// a conflict). heldOn holds those destinations; priorSelects the
	// destinations prior selects, found when first needed.
	prior        *LastGoodTraffic
	priorSelects map[ObjectKey]bool
	heldOn       map[ObjectKey]bool
	// conflicts are errors about outputs for destinations the policy does
	// not select (subsets it names) that users' Istio objects blocked.
	conflicts map[ObjectKey]string
	// selected are the destinations the spec in force selects, in key
	// order.
	selected []ObjectKey

	src *networkingv1.TrafficPolicy
}

// collectTrafficPolicies gathers the policies of every input in acceptance
// order: by creation time, then namespace, name and cluster. A policy found
// twice (same cluster, namespace and name) is kept once, by content.
func collectTrafficPolicies(inputs map[string]*snapshotv1.InputSnapshot) []*trafficPolicy {
	byKey := map[ObjectKey]*trafficPolicy{}
	for _, cluster := range sortedKeys(inputs) {
		for _, tp := range inputs[cluster].GetTrafficPolicies() {
			md := tp.GetMetadata()
			key := ObjectKey{Cluster: cluster, Namespace: md.GetNamespace(), Name: md.GetName()}
			if key.Name == "" {
				continue
			}
			if old, dup := byKey[key]; dup && compareContent(old.src, tp) <= 0 {
				continue
			}
			byKey[key] = newTrafficPolicy(key, tp)
		}
	}
	out := make([]*trafficPolicy, 0, len(byKey))
	for _, p := range byKey {
		out = append(out, p)
	}
	slices.SortFunc(out, compareAcceptance)
	return out
}

// compareAcceptance orders policies for acceptance: by creation time, then
// namespace, name and cluster.
func compareAcceptance(a, b *trafficPolicy) int {
	ta, tb := a.Meta.GetCreationTimestamp(), b.Meta.GetCreationTimestamp()
	return cmp.Or(
		cmp.Compare(ta.GetSeconds(), tb.GetSeconds()),
		cmp.Compare(ta.GetNanos(), tb.GetNanos()),
		cmp.Compare(a.Key.Namespace, b.Key.Namespace),
		cmp.Compare(a.Key.Name, b.Key.Name),
		cmp.Compare(a.Key.Cluster, b.Key.Cluster),
	)
}

func compareContent(a, b proto.Message) int {
	opts := proto.MarshalOptions{Deterministic: true}
	ab, _ := opts.Marshal(a)
	bb, _ := opts.Marshal(b)
	return slices.Compare(ab, bb)
}

func newTrafficPolicy(key ObjectKey, tp *networkingv1.TrafficPolicy) *trafficPolicy {
	p := &trafficPolicy{Key: key, Meta: tp.GetMetadata(), Spec: tp.GetSpec(), src: tp}
	if p.Spec == nil {
		p.Spec = &networkingv1.TrafficPolicySpec{}
	}
	return p
}
