// Package istioloop runs translation's golden outputs through a real
// istiod (libs/kube/istiotest) and checks what Envoy would be told: that
// istiod stays up, and the clusters, endpoints, priorities and TLS
// settings the outputs mean. Its tests need the kube-apiserver and
// pilot-discovery from `bash hack/tools.sh`; they fail with a how-to
// without them, unless MESHPLANE_SKIP_ISTIO_TESTS=1.
//
// The tests share one API server, leased to one test at a time and
// cleaned after each; each test starts its own istiod on one golden case's
// output, with the pods, services and endpoint slices it needs (no
// controller manager runs: the test writes the EndpointSlices). Each
// assertion names the Meshplane field and the Envoy field, and a failure
// prints the Meshplane resource from the case's input and the Envoy
// resource; docs/istio-in-the-loop.md lists them.
package istioloop
