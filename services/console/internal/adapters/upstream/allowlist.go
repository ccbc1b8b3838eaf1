package upstream

import (
	"fmt"
	"net/http"

	"connectrpc.com/grpchealth"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
)

// ReadProcedures are the only procedures the console calls. The console is
// read-only: nothing that creates, approves, deregisters, notifies, acks or
// pushes is here, and ReadOnly refuses anything that is not.
var ReadProcedures = map[string]bool{
	ingestv1connect.IngestServiceListClustersProcedure:                true,
	ingestv1connect.IngestServiceListMeshesProcedure:                  true,
	ingestv1connect.IngestServiceListWorkloadsProcedure:               true,
	ingestv1connect.IngestServiceListDestinationsProcedure:            true,
	ingestv1connect.IngestServiceWatchAccessLogsProcedure:             true,
	ingestv1connect.IngestServiceGetInputSnapshotProcedure:            true,
	distributionv1connect.DistributionServiceListAcksProcedure:        true,
	registrationv1connect.ClusterServiceListClustersProcedure:         true,
	translationv1connect.TranslationServiceGetStatusProcedure:         true,
	translationv1connect.TranslationServiceDescribeProcedure:          true,
	translationv1connect.TranslationServiceGetOutputSnapshotProcedure: true,
	"/" + grpchealth.HealthV1ServiceName + "/Check":                   true,
}

// ReadOnly wraps the transport every upstream client uses, so that the
// allowlist is enforced in one place whatever client code asks: a call to
// any other procedure fails before it leaves the process.
type ReadOnly struct{ Next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (r ReadOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if !ReadProcedures[req.URL.Path] {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("console upstream: procedure %s is not on the console's read-only allowlist", req.URL.Path)
	}
	return r.Next.RoundTrip(req)
}
