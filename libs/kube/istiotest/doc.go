// Package istiotest runs a real istiod (pilot-discovery) against a kubetest
// API server, and speaks ADS to it as an Envoy would (a sidecar or a
// gateway), so tests can check what Envoy would be told: clusters,
// endpoints, priorities, TLS settings, routes, and the RBAC filters of the
// inbound listener.
//
// The binary: $MESHPLANE_PILOT_DISCOVERY, else pilot-discovery in the tools
// cache (kubetest.ToolsDir(), where `bash hack/tools.sh` builds it from
// tools/istiod). Start fails the test with a how-to when it is missing; it
// skips only when MESHPLANE_SKIP_ISTIO_TESTS=1 (or
// MESHPLANE_SKIP_KUBE_TESTS=1, as it needs a kube-apiserver too). Run does
// the same without a test, for the demo.
//
// istiod runs with every address on 127.0.0.1 and a free port (its webhook
// and ControlZ too), without its CA (ENABLE_CA_SERVER=false) and with
// plain-text xDS (--grpcAddr); Options give it a trust domain, a cluster
// ID and a network (the label topology.istio.io/network of istio-system).
// Its log is kept in the test's temporary directory and printed when the
// test fails; Rejections finds the lines in which istiod rejects, drops or
// ignores config, and Options.FailOnRejections fails the test on them.
package istiotest
