package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --istiod takes auto, on and off (and their spellings in make's ISTIOD),
// and says what it wants otherwise.
func TestParseIstiodMode(t *testing.T) {
	for in, want := range map[string]istiodMode{"": istiodAuto, "auto": istiodAuto, "on": istiodOn, "1": istiodOn, "ON": istiodOn, "off": istiodOff, "0": istiodOff, "false": istiodOff} {
		if got, err := parseIstiodMode(in); err != nil || got != want {
			t.Errorf("parseIstiodMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := parseIstiodMode("sometimes"); err == nil || !strings.Contains(err.Error(), "want auto, on or off") {
		t.Errorf("parseIstiodMode(sometimes): %v", err)
	}
}

// --istiod=on without pilot-discovery is an error that says how to get
// it; auto then runs without istiod and says how to get it too.
func TestIstiodModeWithoutPilotDiscovery(t *testing.T) {
	t.Setenv("MESHPLANE_PILOT_DISCOVERY", filepath.Join(t.TempDir(), "pilot-discovery"))
	if _, _, err := istiodOn.decide(); err == nil || !strings.Contains(err.Error(), "hack/tools.sh") {
		t.Errorf("on: %v, want an error with a how-to", err)
	}
	run, why, err := istiodAuto.decide()
	if err != nil || run || !strings.Contains(why, "make demo ISTIOD=on") {
		t.Errorf("auto: %v, %q, %v; want no istiod and a how-to", run, why, err)
	}
	if run, _, err := istiodOff.decide(); err != nil || run {
		t.Errorf("off: %v, %v", run, err)
	}
}

// The route command's bad input gets an error naming what is wrong.
func TestRouteBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ pod, hostPort, want string }{
		{"bookinfo/productpage-v1-0", "reviews", "want HOST:PORT"},
		{"productpage-v1-0", "reviews:9080", "want namespace/name"},
		{"bookinfo/productpage-v1-0", "reviews:9080", "is the demo running, with istiod?"},
	} {
		err := showRoute(dir, "east", tc.pod, tc.hostPort, "text", "", time.Second)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("route --pod %s %s: %v, want %q", tc.pod, tc.hostPort, err, tc.want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, istiodStateFile), []byte(`{"east":{"xdsAddr":"127.0.0.1:1","clusterID":"east"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := showRoute(dir, "north", "bookinfo/productpage-v1-0", "reviews:9080", "text", "", time.Second); err == nil || !strings.Contains(err.Error(), "runs istiod in [east]") {
		t.Errorf("route --cluster north: %v", err)
	}
}
