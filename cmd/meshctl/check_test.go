package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCheckAgainstPartialPlane: check against a server that runs only
// registration reports ingest and distribution as errors, exits 1, and
// says so in every output format.
func TestCheckAgainstPartialPlane(t *testing.T) {
	s := startRegistration(t)
	out, _, code := s.meshctl(t, "check", "-o", "json")
	var rep checkReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 {
		t.Fatalf("check -o json: exit %d, %v:\n%s", code, err, out)
	}
	if rep.OK || len(rep.Services) != 3 || rep.Services[0].Status != "SERVING" || rep.Services[1].Status != "ERROR" || rep.Error == "" {
		t.Errorf("check -o json = %+v", rep)
	}
	out, _, code = s.meshctl(t, "check")
	if code != 1 || !strings.Contains(out, "server") || !strings.Contains(out, "SERVING") || !strings.Contains(out, "meshplane.ingest.v1.IngestService") {
		t.Errorf("check: exit %d:\n%s", code, out)
	}
}

// TestSnapshotDump: the output snapshot of a cluster from a real
// translation server, as YAML, JSON and a table.
func TestSnapshotDump(t *testing.T) {
	s := startTranslation(t)
	for format, wants := range map[string][]string{
		"yaml":  {"cluster: east", "kind: DestinationRule", "host: reviews.default.svc.cluster.local"},
		"json":  {`"cluster": "east"`, `"kind": "VirtualService"`},
		"table": {"cluster east, version sha256:", "KIND", "VirtualService", "AuthorizationPolicy"},
	} {
		out, errOut, code := s.meshctl(t, "snapshot", "dump", "--cluster", "east", "--output", "-o", format)
		if code != 0 {
			t.Fatalf("snapshot dump -o %s: exit %d: %s", format, code, errOut)
		}
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("snapshot dump -o %s lacks %q:\n%.1500s", format, w, out)
			}
		}
	}
	out, _, code := s.meshctl(t, "snapshot", "dump", "--cluster", "mgmt", "-o", "table")
	if code != 0 || !strings.Contains(out, "TrafficPolicy (status)") || !strings.Contains(out, "INVALID") {
		t.Errorf("snapshot dump of the management cluster: exit %d:\n%s", code, out)
	}
	_, errOut, code := s.meshctl(t, "snapshot", "dump", "--cluster", "east", "--input")
	if code != 1 || !strings.Contains(errOut, "ingest") {
		t.Errorf("snapshot dump --input from translation: exit %d: %s", code, errOut)
	}
}
