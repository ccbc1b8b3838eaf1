package app

import (
	"context"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

// EnvoyConfig is what every agent replica serves to the Envoy proxies of its
// cluster on port 9977: the Wasm filter configs (ECDS) and the access-log
// policies that filter what the Access Log Service sink keeps. It comes
// from the output snapshot the leader applies, and reaches the other
// replicas through the Raft log.
type EnvoyConfig struct {
	// Version is the output snapshot version the config was taken from.
	Version           string
	WasmFilters       []*snapshotv1.WasmFilterConfig
	AccessLogPolicies []*snapshotv1.AccessLogPolicyConfig
}

// EnvoyConfigFromOutput takes the EnvoyConfig out of an output snapshot.
func EnvoyConfigFromOutput(s *snapshotv1.OutputSnapshot) EnvoyConfig {
	return EnvoyConfig{Version: s.GetVersion(), WasmFilters: s.GetWasmFilters(), AccessLogPolicies: s.GetAccessLogPolicies()}
}

// EnvoyConfigSink receives the EnvoyConfig on every replica: the 9977
// servers (ECDS, access-log filtering) serve from it. Implementations must
// be safe for concurrent use and must not block.
type EnvoyConfigSink interface {
	SetEnvoyConfig(EnvoyConfig)
}

// EnvoyConfigReplicator hands the EnvoyConfig the leader applied to every
// replica's sink. With one replica it calls the local sink; with Raft it
// appends the config to the log, and each replica's state machine calls its
// sink when the entry commits.
type EnvoyConfigReplicator interface {
	Replicate(ctx context.Context, c EnvoyConfig) error
}

// LocalEnvoyConfig is the EnvoyConfigReplicator of a single replica.
type LocalEnvoyConfig struct{ Sink EnvoyConfigSink }

// Replicate implements EnvoyConfigReplicator.
func (l LocalEnvoyConfig) Replicate(_ context.Context, c EnvoyConfig) error {
	if l.Sink != nil {
		l.Sink.SetEnvoyConfig(c)
	}
	return nil
}
