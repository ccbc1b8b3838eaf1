package domain

// DestinationRules: every DestinationRule translation writes is made here,
// the rules choosing which and calling in; each with its hand encoding
// (package encode) where it has one.
//
//   - each destination's own (destinationRule, destinationRuleObject):
//     TLS mode, outlier detection and the subsets that policies name;
//   - a federated host's in the server cluster, with the subsets' labels
//     for the east-west gateway (serverDestinationRule), and in each client
//     cluster (clientDestinationRule);
//   - a VirtualDestination's hostname in every mesh (destinationRule of
//     virtualDestination).

import (
	"cmp"
	"maps"
	"slices"

	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain/encode"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

// Outlier detection defaults, as in Gloo Mesh v1.
var (
	defaultConsecutiveErrors  = uint32(5)
	defaultInterval           = durationpb.New(10e9)
	defaultBaseEjectionTime   = durationpb.New(30e9)
	defaultMaxEjectionPercent = int32(100)
)

// tlsModes are the client TLS modes of a TrafficPolicy's Istio mTLS modes;
// a mode not here leaves the Settings' default in force.
var tlsModes = map[networkingv1.TrafficPolicySpec_Policy_MTLS_Istio_TLSmode]istiov1alpha3.ClientTLSSettings_TLSmode{
	networkingv1.TrafficPolicySpec_Policy_MTLS_Istio_DISABLE:      istiov1alpha3.ClientTLSSettings_DISABLE,
	networkingv1.TrafficPolicySpec_Policy_MTLS_Istio_SIMPLE:       istiov1alpha3.ClientTLSSettings_SIMPLE,
	networkingv1.TrafficPolicySpec_Policy_MTLS_Istio_ISTIO_MUTUAL: istiov1alpha3.ClientTLSSettings_ISTIO_MUTUAL,
}

// destinationRule is the DestinationRule Meshplane owns for every
// discovered Service: the Settings' default TLS mode (Istio mutual TLS
// unless Settings say otherwise) to its FQDN unless a policy sets another
// mode, plus the subsets that traffic shifts name and outlier detection.
func (st *destState) destinationRule(d *destination, defaultTLS istiov1alpha3.ClientTLSSettings_TLSmode) *istiov1alpha3.DestinationRule {
	dr := &istiov1alpha3.DestinationRule{
		Host:          d.Host,
		TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{Mode: st.clientTLSMode(defaultTLS)}},
	}
	if st.outlier != nil {
		dr.TrafficPolicy.OutlierDetection = outlierDetection(st.outlier)
	}
	subsets := st.subsets()
	for _, name := range slices.Sorted(maps.Keys(subsets)) {
		dr.Subsets = append(dr.Subsets, &istiov1alpha3.Subset{Name: name, Labels: subsets[name]})
	}
	return dr
}

// destinationRuleJSON is the encoding of st.destinationRule(d, defaultTLS)
// written straight from st, without the DestinationRule, when that is one
// encode.TLSDestinationRule writes: every destination gets one. ok is
// false otherwise.
func (st *destState) destinationRuleJSON(d *destination, defaultTLS istiov1alpha3.ClientTLSSettings_TLSmode) (_ []byte, ok bool) {
	if st.outlier != nil {
		return nil, false
	}
	return encode.TLSDestinationRule(d.Host, st.clientTLSMode(defaultTLS), st.subsets())
}

// clientTLSMode is the TLS mode of the destination's DestinationRule: the
// one a policy sets, else defaultTLS, the Settings'.
func (st *destState) clientTLSMode(defaultTLS istiov1alpha3.ClientTLSSettings_TLSmode) istiov1alpha3.ClientTLSSettings_TLSmode {
	if mode, ok := tlsModes[st.tlsMode]; ok {
		return mode
	}
	return defaultTLS
}

// destinationRuleObject is the DestinationRule object of destination d,
// whose state is st, with these parents (ann, when not nil, is their
// annotation made already): written straight from st when it can be
// (destinationRuleJSON), else encoded from destinationRule. alloc, when
// not nil, hands out the object.
func (st *destState) destinationRuleObject(d *destination, parents []ObjectKey, ann map[string]string, defaultTLS istiov1alpha3.ClientTLSSettings_TLSmode, opts Options, alloc *objectAllocator) (*snapshotv1.Object, error) {
	if raw, ok := st.destinationRuleJSON(d, defaultTLS); ok {
		return newObjectEncoded(KindDestinationRule, d, parents, raw, ann, opts, alloc.object()), nil
	}
	return newObject(KindDestinationRule, d, parents, st.destinationRule(d, defaultTLS), ann, opts, alloc.object())
}

// serverDestinationRule is the DestinationRule of a federated host in
// its server cluster: Istio mutual TLS, and the subsets of the host's
// destination with their labels, which the east-west gateway routes by.
func serverDestinationRule(host string, subsets []*istiov1alpha3.Subset) *istiov1alpha3.DestinationRule {
	return &istiov1alpha3.DestinationRule{
		Host:          host,
		TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{Mode: istiov1alpha3.ClientTLSSettings_ISTIO_MUTUAL}},
		Subsets:       subsets,
	}
}

// clientDestinationRule encodes with enc the DestinationRule of a
// federated host in its client clusters: Istio mutual TLS, and the names
// of the subsets of the host's destination, which the client's routes
// name (the server cluster's DestinationRule gives their labels).
func clientDestinationRule(enc encode.Encoder, host string, subsets []string) ([]byte, error) {
	if len(subsets) == 0 {
		if raw, ok := encode.IstioMutualDestinationRule(host); ok {
			return raw, nil
		}
	}
	spec := &istiov1alpha3.DestinationRule{
		Host:          host,
		TrafficPolicy: &istiov1alpha3.TrafficPolicy{Tls: &istiov1alpha3.ClientTLSSettings{Mode: istiov1alpha3.ClientTLSSettings_ISTIO_MUTUAL}},
	}
	for _, name := range subsets {
		spec.Subsets = append(spec.Subsets, &istiov1alpha3.Subset{Name: name})
	}
	return enc.Spec(spec)
}

// outlierDetection is Istio's outlier detection for o, with the defaults
// for what o leaves unset (all of it when o is nil): TrafficPolicies and
// VirtualDestinations both build theirs here.
func outlierDetection(o *networkingv1.OutlierDetection) *istiov1alpha3.OutlierDetection {
	od := &istiov1alpha3.OutlierDetection{
		Consecutive_5XxErrors: wrapperspb.UInt32(cmp.Or(o.GetConsecutiveErrors(), defaultConsecutiveErrors)),
		Interval:              cloneDuration(defaultInterval),
		BaseEjectionTime:      cloneDuration(defaultBaseEjectionTime),
		MaxEjectionPercent:    cmp.Or(int32(o.GetMaxEjectionPercent()), defaultMaxEjectionPercent),
	}
	if o.GetInterval() != nil {
		od.Interval = cloneDuration(o.GetInterval())
	}
	if o.GetBaseEjectionTime() != nil {
		od.BaseEjectionTime = cloneDuration(o.GetBaseEjectionTime())
	}
	return od
}

// destinationRule is the DestinationRule of a VirtualDestination's
// hostname in every mesh, with the locality load balancing lb. Istio fails over only with outlier
// detection, so it is always set (with the defaults when the spec names
// none).
func (vd *virtualDestination) destinationRule(lb *istiov1alpha3.LocalityLoadBalancerSetting) *istiov1alpha3.DestinationRule {
	od := outlierDetection(vd.Spec.GetLocalized().GetOutlierDetection())
	return &istiov1alpha3.DestinationRule{
		Host: vd.Spec.GetHostname(),
		TrafficPolicy: &istiov1alpha3.TrafficPolicy{
			Tls:              &istiov1alpha3.ClientTLSSettings{Mode: istiov1alpha3.ClientTLSSettings_ISTIO_MUTUAL},
			OutlierDetection: od,
			LoadBalancer:     &istiov1alpha3.LoadBalancerSettings{LocalityLbSetting: lb},
		},
	}
}
