package e2e

import (
	"testing"
	"time"

	"github.com/meshplane/meshplane/test/e2e/harness"
)

// Processes stop on SIGTERM without being killed, as a rolling update
// needs: an agent whose push stream to a running plane is open and idle
// exits promptly (closing its sending side ends the stream, which
// cancelling its context alone did not), and the plane exits well within
// its 15 s shutdown timeout while an agent's push stream is open (ingest's
// push handler no longer waits in Receive past the drain).
func TestProcessesStopOnSIGTERM(t *testing.T) {
	harness.RequireE2E(t)
	e := startEstate(t, true)
	for _, c := range e.clusters {
		for _, svc := range harness.BookinfoServices {
			waitDR(t, t.Context(), c, svc, e.procs)
		}
	}
	agents := e.procs[len(e.plane.Procs):]
	if err := agents[0].Terminate(5 * time.Second); err != nil {
		t.Errorf("agent with an open push stream: %v", err)
	}
	for _, p := range e.plane.Procs {
		if err := p.Terminate(5 * time.Second); err != nil {
			t.Errorf("plane with an agent connected: %v", err)
		}
	}
	if err := agents[1].Terminate(5 * time.Second); err != nil {
		t.Errorf("agent after the plane stopped: %v", err)
	}
}
