package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	distribution "github.com/meshplane/meshplane/services/distribution/service"
	ingest "github.com/meshplane/meshplane/services/ingest/service"
	translation "github.com/meshplane/meshplane/services/translation/service"
	"google.golang.org/protobuf/types/known/timestamppb"
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
	out, _, code := s.meshctl(t, "snapshot", "dump", "--cluster", "meshplane", "-o", "table")
	if code != 0 || !strings.Contains(out, "TrafficPolicy (status)") || !strings.Contains(out, "INVALID") {
		t.Errorf("snapshot dump of the management cluster: exit %d:\n%s", code, out)
	}
	_, errOut, code := s.meshctl(t, "snapshot", "dump", "--cluster", "east", "--input")
	if code != 1 || !strings.Contains(errOut, "ingest") {
		t.Errorf("snapshot dump --input from translation: exit %d: %s", code, errOut)
	}
}

// runService runs a service's Run until the test ends.
func runService(t *testing.T, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// allServices mounts ingest, translation and distribution beside
// registration, with memory stores, as `meshplane all-in-one` does without
// Redis.
func allServices(t *testing.T, srv *platform.Server, log *slog.Logger) {
	inputs := snapstore.NewMemory(func() *snapshotv1.InputSnapshot { return &snapshotv1.InputSnapshot{} })
	outputs := snapstore.NewMemory(func() *snapshotv1.OutputSnapshot { return &snapshotv1.OutputSnapshot{} })
	acks := snapstore.NewMemoryAcks()
	tcfg := translation.DefaultConfig()
	tcfg.SafeStartWindow = 0
	tr, err := translation.New(tcfg, translation.WithLogger(log), translation.WithStores(inputs, outputs), translation.WithAcks(acks))
	if err != nil {
		t.Fatal(err)
	}
	ing, err := ingest.New(ingest.DefaultConfig(), ingest.WithLogger(log), ingest.WithInputs(inputs), ingest.WithNotifier(tr))
	if err != nil {
		t.Fatal(err)
	}
	dist, err := distribution.New(distribution.DefaultConfig(), distribution.WithLogger(log), distribution.WithOutputs(outputs), distribution.WithAcks(acks))
	if err != nil {
		t.Fatal(err)
	}
	tr.Mount(srv)
	ing.Mount(srv)
	dist.Mount(srv)
	runService(t, tr.Run)
	runService(t, ing.Run)
	runService(t, dist.Run)
}

// TestCheckAllInOne: against the four services on one port, a cluster
// that registration knows but whose agent never connected fails the check,
// with its certificate state; safe mode is reported off.
func TestCheckAllInOne(t *testing.T) {
	s := startRegistration(t, allServices)
	if _, errOut, code := s.meshctl(t, "cluster", "register", "east"); code != 0 {
		t.Fatalf("register: %s", errOut)
	}
	out, _, code := s.meshctl(t, "check", "-o", "json")
	var rep checkReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 {
		t.Fatalf("check -o json: exit %d, %v:\n%s", code, err, out)
	}
	for _, sv := range rep.Services {
		if sv.Status != "SERVING" {
			t.Errorf("service %s: %s", sv.Name, sv.Status)
		}
	}
	if rep.OK || rep.SafeMode == nil || rep.SafeMode.On || len(rep.Notes) != 0 {
		t.Errorf("check = %s", out)
	}
	if len(rep.Clusters) != 1 || rep.Clusters[0].Cluster != "east" || rep.Clusters[0].Push != "never" || rep.Clusters[0].Registration != "APPROVED" {
		t.Errorf("clusters = %+v", rep.Clusters)
	}
	// Every service of the plane reports its build to meshctl version.
	out, _, _ = s.meshctl(t, "version", "-o", "json")
	var vr versionReport
	if err := json.Unmarshal([]byte(out), &vr); err != nil || vr.Server == nil || len(vr.Server.Services) != 5 {
		t.Fatalf("version -o json: %v\n%s", err, out)
	}
	for _, sv := range vr.Server.Services {
		if sv.Version != platform.Version || sv.Status != "SERVING" {
			t.Errorf("version of %s = %+v, want %s and SERVING", sv.Service, sv, platform.Version)
		}
	}
	out, _, code = s.meshctl(t, "check")
	if code != 1 || !hasLine(out, "safe mode", "off") || !hasLine(out, "east", "never", "never") || !strings.Contains(out, "CERT EXPIRES") {
		t.Errorf("check: exit %d:\n%s", code, out)
	}
}

func TestCertValid(t *testing.T) {
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	for _, tc := range []struct {
		at   *time.Time
		want bool
	}{{nil, true}, {&past, false}, {&future, true}} {
		r := &registrationv1.Cluster{}
		if tc.at != nil {
			r.CertificateExpiresAt = timestamppb.New(*tc.at)
		}
		var cc clusterCheck
		if got := certValid(&cc, r); got != tc.want || (tc.at != nil) != (cc.CertExpires != nil) {
			t.Errorf("certValid(%v) = %v, expiry %v", tc.at, got, cc.CertExpires)
		}
	}
	var b strings.Builder
	printCheckTable(&b, checkReport{Clusters: []clusterCheck{{Cluster: "east", Push: "connected", Pull: "connected", Applied: "current", CertExpires: &past}}, SafeMode: &safeModeCheck{On: true, Waiting: []string{"west"}}})
	if !hasLine(b.String(), "east", "EXPIRED") || !hasLine(b.String(), "safe mode", "ON", "waiting for west") {
		t.Errorf("table:\n%s", b.String())
	}
}

// The expected clusters that have not reported, and the deletions agents
// hold meanwhile, are shown.
func TestCheckTableMissingAndHeld(t *testing.T) {
	var b strings.Builder
	printCheckTable(&b, checkReport{
		Clusters: []clusterCheck{
			{Cluster: "west", Push: "connected", Pull: "connected", Applied: "current", HeldDeletions: 3},
			{Cluster: "east", Push: "never", Pull: "never", Applied: "-"},
		},
		SafeMode: &safeModeCheck{Missing: []string{"east"}},
	})
	if !hasLine(b.String(), "expected clusters missing", "east", "hold their deletions") || !hasLine(b.String(), "west", "current", "0", "3") ||
		!strings.Contains(b.String(), "HELD DELETIONS") {
		t.Errorf("table:\n%s", b.String())
	}
}

// A cluster whose last push ingest refused says so in the table, with the
// reason and ingest's message.
func TestCheckTableShowsRefusal(t *testing.T) {
	rep := checkReport{Clusters: []clusterCheck{{
		Cluster: "east", Push: "connected, refused", Pull: "connected", Applied: "current",
		Refused: &pushRefusal{Reason: "destinations", Message: "input snapshot over a per-cluster limit: 250000 destinations", At: time.Now()},
	}}}
	var b strings.Builder
	printCheckTable(&b, rep)
	out := b.String()
	if !hasLine(out, "east", "connected, refused") || !strings.Contains(out, "cluster east: last push refused") || !strings.Contains(out, "(destinations): input snapshot over a per-cluster limit: 250000 destinations") {
		t.Fatalf("check table:\n%s", out)
	}
}
