package istiotest

import (
	"strings"
	"testing"
)

// Rejections finds the lines in which istiod rejects, drops or ignores
// config, and none of the others. The benign lines are from real istiod
// logs of the e2e harness; the rejections are istiod's own messages (their
// format strings in istio.io/istio, filled in as istiod does).
func TestRejections(t *testing.T) {
	rejections := []string{
		// pilot/pkg/model/virtualservice.go
		"2026-11-26T05:04:22.262604Z\twarn\tmodel\tHTTPMatchRequests conflict: root route reviews, delegate route reviews-v2",
		// pilot/pkg/model/authorization.go
		"2026-11-26T05:04:22.262604Z\terror\tmodel\tignored authorization policy bookinfo.reviews with unsupported action: AUDIT",
		// pilot/pkg/model/gateway.go, at info level
		"2026-11-26T05:04:22.262604Z\tinfo\tmodel\tskipping server on gateway istio-system/cross-network-gateway port tls.15443.TLS: conflict with existing server 15443.TLS",
		"2026-11-26T05:04:22.262604Z\twarn\tmodel\tskipping server on gateway istio-system/cross-network-gateway, duplicate host names: [*.global]",
		// pilot/pkg/model/extensions.go
		"2026-11-26T05:04:22.262604Z\twarn\tmodel\ttrafficextension bookinfo/add-header discarded: wasm.url is required",
		// pkg/config/mesh/meshwatcher/collection.go
		"2026-11-26T05:04:22.262604Z\twarn\tinvalid mesh config, ignoring: unknown field \"trustDomainn\"",
		// pilot/pkg/networking/core/listener_inbound.go
		"2026-11-26T05:04:22.262604Z\twarn\tbuildInboundListeners: skipping sidecar port 15006 for node reviews-v1-0.bookinfo as it conflicts with static listener",
		// client-go's informer, through istiod's klog scope: an object of
		// a kind that does not decode.
		"2026-11-26T05:04:22.262604Z\terror\tklog\tk8s.io/client-go/tools/cache/reflector.go:569: failed to list *v1.VirtualService: json: cannot unmarshal string into Go struct field HTTPRetry.spec.http.retries.attempts of type int32",
		// pkg/xds/server.go: a proxy refused a push
		"2026-11-26T05:04:22.262604Z\twarn\tads\tADS:RDS: ACK ERROR productpage-v1-0.bookinfo-3 Internal:Proto constraint validation failed",
	}
	benign := []string{
		"2026-11-26T05:04:18.014235Z\twarn\tPILOT_CERT_PROVIDER=istiod is not implemented",
		"2026-11-26T05:04:19.716820Z\twarn\tconfig validation is not ready",
		"2026-11-26T05:04:18.109480Z\twarn\tdiscovery is not ready",
		"2026-11-26T05:04:22.262604Z\twarn\tslow startup task\tname=kube client runtime=1.670973667s",
		"2026-11-26T05:04:24.918404Z\tinfo\tleader election lock lost: istio-leader",
		"2026-11-26T05:04:18.020952Z\tinfo\tSkipping sidecar injector, template not found",
		"2026-11-26T05:04:18.020952Z\tinfo\tCRD trafficpolicies.networking.meshplane.dev is not at ignore list, adding to CRD watcher",
		"2026-11-26T05:04:22.809275Z\tinfo\tmodel\tFull push, new service bookinfo/details.bookinfo.svc.east.global",
		"2026-11-26T05:04:18.932360Z\tinfo\tads\tPush debounce stable[2] 5 for config DestinationRule/bookinfo/ratings and 4 more configs: 100.718361ms since last change, 130.072412ms since last push, forced=false",
		// Expected in a federation of meshes with their own trust domains
		// (docs/concepts.md): istiod keeps the principal as it is.
		"2026-11-26T05:04:24.808053Z\twarn\tauthorization\tTrust domain west.local from principal west.local/ns/bookinfo/sa/bookinfo-productpage does not match the current trust domain or its aliases",
		// Not istiod's own format: another library, and a YAML dump.
		"2026/11/26 05:04:17 INFO memory is not limited, skipping package=github.com/KimMachineGun/automemlimit/memlimit",
		"  ignoreDefaults: invalid",
	}
	log := strings.Join(append(append([]string{}, benign...), rejections...), "\n")
	got := Rejections(log)
	if strings.Join(got, "\n") != strings.Join(rejections, "\n") {
		t.Errorf("Rejections found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(rejections, "\n"))
	}
}
