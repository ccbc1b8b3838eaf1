package service

import "github.com/meshplane/meshplane/services/ingest/internal/app"

// Limits bound the objects of each kind in a workload cluster's input
// snapshot; zero means no bound.
type Limits = app.Limits

// DefaultLimits returns the defaults: ten times the reference estate's
// cluster.
func DefaultLimits() Limits { return app.DefaultLimits() }

func (c *Config) addLimitFlags() {
	c.flags.Int(&c.Limits.Destinations, "max-input-destinations", "most destinations (Services) one workload cluster's input snapshot may hold; a push with more is refused and the last accepted one stays (0: no limit)")
	c.flags.Int(&c.Limits.Workloads, "max-input-workloads", "most workloads one workload cluster's input snapshot may hold (0: no limit)")
	c.flags.Int(&c.Limits.Meshes, "max-input-meshes", "most meshes one workload cluster's input snapshot may hold (0: no limit)")
	c.flags.Int(&c.Limits.Policies, "max-input-policies", "most user resources of each kind (TrafficPolicy, AccessPolicy, VirtualMesh, VirtualDestination, Settings, WasmDeploymentPolicy, AccessLogPolicy) one workload cluster's input snapshot may hold (0: no limit)")
	c.flags.Int(&c.Limits.IstioObjects, "max-input-istio-objects", "most of the user's own VirtualServices and DestinationRules one workload cluster's input snapshot may report (0: no limit)")
}
