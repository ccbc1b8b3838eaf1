package domain_test

import (
	"fmt"
	"slices"
	"testing"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/encoding/protojson"
	networkingv1alpha3 "istio.io/api/networking/v1alpha3"
)

// dnsFailoverPriority returns an error for every DestinationRule of an
// output that sets localityLbSetting.failoverPriority on a host that a
// ServiceEntry of the same output resolves by DNS: istiod's CDS build
// panics on it (index out of range in applyFailoverPriorityPerLocality)
// when the endpoints are in several localities, and the process exits.
// The golden and fuzz tests run it on every output.
func dnsFailoverPriority(o *snapshotv1.OutputSnapshot) error {
	dnsHosts := map[string]bool{}
	for _, obj := range o.GetObjects() {
		if obj.GetKind() != "ServiceEntry" {
			continue
		}
		var se networkingv1alpha3.ServiceEntry
		if err := protojson.Unmarshal(obj.GetSpec(), &se); err != nil {
			return fmt.Errorf("ServiceEntry %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
		}
		if se.GetResolution() == networkingv1alpha3.ServiceEntry_DNS || se.GetResolution() == networkingv1alpha3.ServiceEntry_DNS_ROUND_ROBIN {
			for _, h := range se.GetHosts() {
				dnsHosts[h] = true
			}
		}
	}
	for _, obj := range o.GetObjects() {
		if obj.GetKind() != "DestinationRule" {
			continue
		}
		var dr networkingv1alpha3.DestinationRule
		if err := protojson.Unmarshal(obj.GetSpec(), &dr); err != nil {
			return fmt.Errorf("DestinationRule %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
		}
		policies := []*networkingv1alpha3.TrafficPolicy{dr.GetTrafficPolicy()}
		for _, s := range dr.GetSubsets() {
			policies = append(policies, s.GetTrafficPolicy())
		}
		for _, p := range policies {
			lbs := []*networkingv1alpha3.LoadBalancerSettings{p.GetLoadBalancer()}
			for _, pp := range p.GetPortLevelSettings() {
				lbs = append(lbs, pp.GetLoadBalancer())
			}
			if !slices.ContainsFunc(lbs, func(lb *networkingv1alpha3.LoadBalancerSettings) bool {
				return len(lb.GetLocalityLbSetting().GetFailoverPriority()) > 0
			}) {
				continue
			}
			if dnsHosts[dr.GetHost()] {
				return fmt.Errorf("DestinationRule %s/%s sets failoverPriority on host %s, which a ServiceEntry resolves by DNS: istiod crashes on it", obj.GetNamespace(), obj.GetName(), dr.GetHost())
			}
		}
	}
	return nil
}

// The checker itself finds the output shape that crashed istiod.
func TestDNSFailoverPriorityCheckFindsTheCrashShape(t *testing.T) {
	se := []byte(`{"hosts":["reviews.global"],"resolution":"DNS","ports":[{"number":80,"name":"http-80","protocol":"HTTP"}],` +
		`"endpoints":[{"address":"west.gw.example.com","locality":"us-west-1","labels":{"failover.meshplane.dev/rank-1":"true"}},{"address":"reviews.default.svc.cluster.local","locality":"us-east-1"}]}`)
	dr := []byte(`{"host":"reviews.global","trafficPolicy":{"loadBalancer":{"localityLbSetting":{"enabled":true,"failoverPriority":["failover.meshplane.dev/rank-1=true"]}}}}`)
	o := &snapshotv1.OutputSnapshot{Objects: []*snapshotv1.Object{
		{Kind: "ServiceEntry", Namespace: "istio-system", Name: "reviews.global", Spec: se},
		{Kind: "DestinationRule", Namespace: "istio-system", Name: "reviews.global", Spec: dr},
	}}
	if err := dnsFailoverPriority(o); err == nil {
		t.Fatal("no error for failoverPriority over a DNS ServiceEntry")
	}
	o.Objects[0].Spec = []byte(`{"hosts":["reviews.global"],"resolution":"STATIC","ports":[{"number":80,"name":"http-80","protocol":"HTTP"}],"endpoints":[{"address":"203.0.113.10"}]}`)
	if err := dnsFailoverPriority(o); err != nil {
		t.Fatalf("STATIC ServiceEntry: %v", err)
	}
}
