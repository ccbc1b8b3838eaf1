package service_test

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/redistest"
	revredis "github.com/meshplane/meshplane/libs/revocation/redis"
	goredis "github.com/redis/go-redis/v9"
)

// A Push stream that is already open when registration revokes its
// certificate (in the shared Redis set) is closed by a standalone ingest
// within seconds, without the agent sending anything more.
func TestRevocationClosesOpenPushStream(t *testing.T) {
	r := redistest.Start(t)
	cfg := memoryConfig()
	cfg.Redis.Addrs = r.Addr()
	e := newEnv(t, cfg)
	cert := e.ca.ClientCert(t, eastID)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	o := e.ca.ClientOptions(t, e.addr, &cert)
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	c := ingestv1connect.NewIngestServiceClient(hc, platform.BaseURL(o), platform.DefaultClientOptions(o)...)
	stream := c.Push(streamCtx(t))
	if _, err := push(t, stream, sealed("east", "a")); err != nil {
		t.Fatalf("push before revocation: %v", err)
	}
	revokedAt := time.Now()
	if err := r.Client(t).ZAdd(t.Context(), revredis.Key(cfg.Install), goredis.Z{
		Member: leaf.SerialNumber.String(), Score: float64(leaf.NotAfter.UnixMilli()),
	}).Err(); err != nil {
		t.Fatal(err)
	}
	// The agent sends nothing more: the server must end the stream itself.
	ended := make(chan error, 1)
	go func() {
		_, err := stream.Receive()
		ended <- err
	}()
	select {
	case err := <-ended:
		if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "revoked") {
			t.Fatalf("open stream ended with %v, want Unauthenticated saying the certificate was revoked", err)
		}
		t.Logf("open stream closed %v after the revocation", time.Since(revokedAt).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("open Push stream still open 20s after its certificate was revoked")
	}
}
