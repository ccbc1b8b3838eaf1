package upstream_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/console/internal/adapters/upstream"
)

// recorder answers every request with 404 and remembers its path: what
// reached the network.
type recorder struct{ paths []string }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.paths = append(r.paths, req.URL.Path)
	return &http.Response{StatusCode: http.StatusNotFound, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}, Request: req}, nil
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	rec := &recorder{}
	hc := &http.Client{Transport: upstream.ReadOnly{Next: rec}}
	ctx := context.Background()

	clusters := registrationv1connect.NewClusterServiceClient(hc, "https://plane.example")
	_, err := clusters.ApproveCluster(ctx, connect.NewRequest(&registrationv1.ApproveClusterRequest{}))
	if err == nil || !strings.Contains(err.Error(), "read-only allowlist") {
		t.Errorf("ApproveCluster: %v, want refused by the allowlist", err)
	}
	tr := translationv1connect.NewTranslationServiceClient(hc, "https://plane.example")
	if _, err := tr.Notify(ctx, connect.NewRequest(&translationv1.NotifyRequest{})); err == nil {
		t.Error("Notify was not refused")
	}
	if len(rec.paths) != 0 {
		t.Errorf("write procedures reached the network: %v", rec.paths)
	}
	// A read passes.
	_, err = tr.GetStatus(ctx, connect.NewRequest(&translationv1.GetStatusRequest{}))
	if len(rec.paths) != 1 || rec.paths[0] != translationv1connect.TranslationServiceGetStatusProcedure {
		t.Errorf("GetStatus reached %v (err %v), want it sent", rec.paths, err)
	}
	if errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

func TestAllowlistHoldsOnlyReads(t *testing.T) {
	for p := range upstream.ReadProcedures {
		name := p[strings.LastIndexByte(p, '/')+1:]
		for _, verb := range []string{"Create", "Approve", "Deregister", "Notify", "Ack", "Push", "Register", "Renew", "Sign", "Watch"} {
			if strings.HasPrefix(name, verb) && name != "WatchAccessLogs" {
				t.Errorf("allowlist holds %s, which is not a read", p)
			}
		}
	}
}

// Every procedure the console may call is declared as changing nothing
// (idempotency_level = NO_SIDE_EFFECTS), which is what the management
// services' guard admits from the console's certificate: the allowlist and
// the servers' check cannot drift apart.
func TestReadProceduresChangeNothing(t *testing.T) {
	for p := range upstream.ReadProcedures {
		if strings.HasPrefix(p, "/grpc.health.v1.Health/") {
			continue // public: no identity needed
		}
		if !platform.ReadOnlyProcedure(p) {
			t.Errorf("%s is on the console's allowlist but not declared NO_SIDE_EFFECTS: the services would refuse it", p)
		}
	}
}
