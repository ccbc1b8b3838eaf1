package domain

import (
	"cmp"
	"slices"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
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
// order (compareOrder). A policy found
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

// compareAcceptance orders TrafficPolicies for acceptance (compareOrder).
func compareAcceptance(a, b *trafficPolicy) int {
	return compareOrder(a.Meta, a.Key, b.Meta, b.Key)
}

// acceptedAt is when a resource counts as created in the acceptance order:
// when the plane first saw it (metadata.firstSeen, which translation's
// caller sets from its durable records, never from what an agent sends),
// else its creation time.
func acceptedAt(md *commonv1.ObjectMeta) *timestamppb.Timestamp {
	if fs := md.GetFirstSeen(); fs != nil {
		return fs
	}
	return md.GetCreationTimestamp()
}

// compareOrder orders resources for acceptance: the earlier one wins a
// conflict. By acceptedAt, then namespace, name and cluster.
func compareOrder(am *commonv1.ObjectMeta, ak ObjectKey, bm *commonv1.ObjectMeta, bk ObjectKey) int {
	ta, tb := acceptedAt(am), acceptedAt(bm)
	return cmp.Or(
		cmp.Compare(ta.GetSeconds(), tb.GetSeconds()),
		cmp.Compare(ta.GetNanos(), tb.GetNanos()),
		cmp.Compare(ak.Namespace, bk.Namespace),
		cmp.Compare(ak.Name, bk.Name),
		cmp.Compare(ak.Cluster, bk.Cluster),
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
