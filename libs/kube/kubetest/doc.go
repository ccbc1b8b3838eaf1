// Package kubetest starts real Kubernetes API servers for tests and demos.
//
// Each Cluster is one etcd process (Debian's etcd-server) and one
// kube-apiserver process, both on loopback, with their own temporary state
// directory. No controller-manager, scheduler or kubelet runs: the API is
// real, the nodes are not. Tests create Pods through the API and write their
// status themselves.
//
// Binaries:
//
//   - etcd: $MESHPLANE_ETCD, else `etcd` on $PATH, else /usr/bin/etcd.
//   - kube-apiserver and kubectl: $MESHPLANE_KUBE_APISERVER and
//     $MESHPLANE_KUBECTL, else the tools cache printed by
//     `bash hack/tools.sh --print` (see ToolsDir). Build them with
//     `make tools` or `bash hack/tools.sh`.
//
// Start fails the test when a binary is missing. It skips only when
// MESHPLANE_SKIP_KUBE_TESTS=1 is set.
//
// After start, the Istio CRDs from the istio.io/api module
// (kubernetes/customresourcedefinitions.gen.yaml) and Options.CRDs are
// installed with server-side apply, and StartCluster returns once every one of
// them is Established.
package kubetest
