// Package istioloop runs translation's golden outputs through a real
// istiod (libs/kube/istiotest) and checks what Envoy would be told: that
// istiod stays up, and the clusters, endpoints, priorities and TLS
// settings the outputs mean. Its tests need the kube-apiserver and
// pilot-discovery from `bash hack/tools.sh`; they fail with a how-to
// without them, unless MESHPLANE_SKIP_ISTIO_TESTS=1.
package istioloop
