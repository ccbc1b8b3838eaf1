//go:build tools

// Package tools pins istiod (pilot-discovery), which the Istio-in-the-loop
// tests run against the kubetest API server (see libs/istiotest).
package tools

import (
	_ "istio.io/istio/pilot/cmd/pilot-discovery"
)
