package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/meshplane/meshplane/libs/snapshots"
)

// ErrLimitExceeded is returned for an agent's snapshot that holds more
// objects of a kind than the per-cluster limit. The last good snapshot of
// the cluster stays in use. The error is a *LimitError.
var ErrLimitExceeded = errors.New("input snapshot over a per-cluster limit")

// Limits bound the objects of each kind in one workload cluster's input
// snapshot, so that an agent cannot make the plane hold, translate and
// publish more than an operator planned for. Zero means no bound. The
// management cluster's own input is not bounded: it is read by ingest
// itself, not sent.
type Limits struct {
	Destinations, Workloads, Meshes int
	// Policies bounds each kind of user resource on its own: VirtualMeshes,
	// TrafficPolicies, AccessPolicies, VirtualDestinations, Settings,
	// WasmDeploymentPolicies and AccessLogPolicies.
	Policies int
	// IstioObjects bounds the user's own VirtualServices and
	// DestinationRules that the agent reports for conflict detection.
	IstioObjects int
}

// DefaultLimits are ten times the reference estate's cluster (1,000
// services with two workloads each), and as many policies of each kind as
// the reference estate has in all.
func DefaultLimits() Limits {
	return Limits{Destinations: 10_000, Workloads: 20_000, Meshes: 100, Policies: 10_000, IstioObjects: 20_000}
}

// LimitError says which limit a snapshot went over, and by how much.
type LimitError struct {
	// Limit names the limit as its flag does: --max-input-<Limit>.
	Limit string
	// Kind is what was counted, e.g. "destinations" or "TrafficPolicies".
	Kind       string
	Count, Max int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %d %s, more than the limit of %d per cluster (ingest --max-input-%s); the last accepted snapshot stays in use",
		ErrLimitExceeded, e.Count, e.Kind, e.Max, e.Limit)
}

// Is makes errors.Is(err, ErrLimitExceeded) hold.
func (e *LimitError) Is(target error) bool { return target == ErrLimitExceeded }

// Check returns a *LimitError for the first count over its limit, or nil.
func (l Limits) Check(c snapshots.InputCounts) error {
	for _, k := range []struct {
		limit, kind string
		count, max  int
	}{
		{"destinations", "destinations", c.Destinations, l.Destinations},
		{"workloads", "workloads", c.Workloads, l.Workloads},
		{"meshes", "meshes", c.Meshes, l.Meshes},
		{"policies", "VirtualMeshes", c.VirtualMeshes, l.Policies},
		{"policies", "TrafficPolicies", c.TrafficPolicies, l.Policies},
		{"policies", "AccessPolicies", c.AccessPolicies, l.Policies},
		{"policies", "VirtualDestinations", c.VirtualDestinations, l.Policies},
		{"policies", "Settings", c.Settings, l.Policies},
		{"policies", "WasmDeploymentPolicies", c.WasmDeploymentPolicies, l.Policies},
		{"policies", "AccessLogPolicies", c.AccessLogPolicies, l.Policies},
		{"istio-objects", "user Istio objects", c.UserIstioObjects, l.IstioObjects},
	} {
		if k.max > 0 && k.count > k.max {
			return &LimitError{Limit: k.limit, Kind: k.kind, Count: k.count, Max: k.max}
		}
	}
	return nil
}

// Validate reports a negative limit.
func (l Limits) Validate() error {
	var errs []error
	for _, k := range []struct {
		name string
		v    int
	}{{"destinations", l.Destinations}, {"workloads", l.Workloads}, {"meshes", l.Meshes}, {"policies", l.Policies}, {"istio-objects", l.IstioObjects}} {
		if k.v < 0 {
			errs = append(errs, fmt.Errorf("--max-input-%s must not be negative (0: no limit), not %d", k.name, k.v))
		}
	}
	return errors.Join(errs...)
}

// Refusal is the last push of a cluster that ingest refused.
type Refusal struct {
	// Reason is a short name for the metric's label: the limit
	// ("destinations", "policies", ...), "invalid" or "reserved-cluster".
	Reason string
	// Message is the error sent to the agent.
	Message string
	At      time.Time
}

// refusalReason names the cause of a refused push for metrics and
// reports; "" for an error that is not a refusal (the store failed).
func refusalReason(err error) string {
	var le *LimitError
	switch {
	case errors.As(err, &le):
		return le.Limit
	case errors.Is(err, ErrReservedCluster):
		return "reserved-cluster"
	case errors.Is(err, ErrInvalidSnapshot):
		return "invalid"
	}
	return ""
}
