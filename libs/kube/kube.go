// Package kube holds small client-go helpers shared by Meshplane's services.
//
// The real-API-server test harness lives in the kubetest subpackage.
package kube

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfigFromKubeconfig loads a *rest.Config from the kubeconfig file at
// path, using the named context (the file's current-context when context is
// empty). An empty path follows the usual client-go rules: $KUBECONFIG, then
// ~/.kube/config, then the in-cluster config.
func RESTConfigFromKubeconfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		if path == "" {
			return nil, fmt.Errorf("load kubeconfig (default rules, context %q): %w", context, err)
		}
		return nil, fmt.Errorf("load kubeconfig %s (context %q): %w", path, context, err)
	}
	return cfg, nil
}
