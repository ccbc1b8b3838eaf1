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
//
// Why not controller-runtime's envtest, which the Kubernetes ecosystem
// maintains (weighed for issue 19, against v0.25.2): it would replace
// about 470 lines here (process.go, certs.go and the two start functions)
// but lose what the tests here depend on:
//
//   - the processes' PIDs (Cluster.PIDs): envtest keeps each process's
//     state unexported, and the chaos soak freezes an API server with
//     SIGSTOP while the apply benchmark reads its CPU time;
//   - Pdeathsig: envtest's processes outlive a test binary that is killed
//     (a CI timeout, ^C), holding ports and state directories; here the
//     kernel kills them with it;
//   - a failed start that says why: Start reports the tail of the
//     process's log, which envtest discards unless given a writer;
//   - log files a failed test can point at (Cluster.LogFiles).
//
// Several clusters, impersonated users (ConfigFor), audit logs, the Istio
// CRDs and server-side apply would remain ours either way.
package kubetest
