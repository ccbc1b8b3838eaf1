package app

import (
	"sync"

	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	"google.golang.org/protobuf/proto"
)

// GatewayDetection holds the gateway detector of the last output snapshot
// applied: how translation, from the Settings in force, says this
// cluster's gateways are found. The syncer sets it and the pusher
// discovers with it, again whenever it changes.
type GatewayDetection struct {
	mu      sync.Mutex
	d       *settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector
	changed chan struct{}
	// known is closed once the detector to discover with is known: an
	// output was applied (Set), or the cluster holds nothing Meshplane
	// wrote, so no output was ever applied to it (NoneApplied).
	known     chan struct{}
	knownOnce sync.Once
}

// NewGatewayDetection returns a holder with no detector: the agent's
// flags are in force.
func NewGatewayDetection() *GatewayDetection {
	return &GatewayDetection{changed: make(chan struct{}, 1), known: make(chan struct{})}
}

// Set holds d and reports whether it differs from the detector held.
func (g *GatewayDetection) Set(d *settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector) bool {
	defer g.markKnown()
	g.mu.Lock()
	defer g.mu.Unlock()
	if proto.Equal(g.d, d) {
		return false
	}
	g.d = d
	select {
	case g.changed <- struct{}{}:
	default:
	}
	return true
}

// Get returns the detector held; nil when there is none.
func (g *GatewayDetection) Get() *settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.d
}

// NoneApplied says the detector is known without an output: the agent
// starts on a cluster that holds nothing Meshplane wrote.
func (g *GatewayDetection) NoneApplied() { g.markKnown() }

func (g *GatewayDetection) markKnown() { g.knownOnce.Do(func() { close(g.known) }) }

// Known is closed once the detector to discover with is known (Set or
// NoneApplied was called).
func (g *GatewayDetection) Known() <-chan struct{} { return g.known }

// Changed receives after Set changes the detector.
func (g *GatewayDetection) Changed() <-chan struct{} { return g.changed }
