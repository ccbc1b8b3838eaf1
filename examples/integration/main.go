// Command integration is an example of talking to Meshplane from your own Go
// program with the generated clients in libs/gen: it lists the registered
// clusters, then watches the statuses that translation gives to the policies
// (TrafficPolicy, AccessPolicy, VirtualMesh, ...) and prints every change.
//
// It uses nothing but libs/gen, connect-go and the standard library, as an
// integration outside this repository would. The caller needs a management
// service certificate (spiffe://<trust-domain>/service/<name>), such as the
// meshctl certificate of a development install:
//
//	go run ./examples/integration --addr 127.0.0.1:9900 \
//	  --ca-file .demo/pki/ca/root.crt --cert-file .demo/pki/meshctl.crt --key-file .demo/pki/meshctl.key
//
// The management plane has no push API for statuses to service callers, so
// the example polls TranslationService.GetOutputSnapshot; statuses are part of
// each cluster's output snapshot, whose version changes when they do.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1/registrationv1connect"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
)

type config struct {
	addr, translationAddr     string
	caFile, certFile, keyFile string
	interval                  time.Duration
	once                      bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var c config
	fs := flag.NewFlagSet("integration", flag.ExitOnError)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:9900", "registration (or all-in-one) address, host:port")
	fs.StringVar(&c.translationAddr, "translation-addr", "", "translation address; empty means --addr")
	fs.StringVar(&c.caFile, "ca-file", "", "PEM roots that sign the servers' certificates")
	fs.StringVar(&c.certFile, "cert-file", "", "PEM client certificate (a service identity)")
	fs.StringVar(&c.keyFile, "key-file", "", "PEM key of --cert-file")
	fs.DurationVar(&c.interval, "interval", 2*time.Second, "how often to poll for status changes")
	fs.BoolVar(&c.once, "once", false, "print the clusters and the current statuses, then exit")
	_ = fs.Parse(os.Args[1:])
	if err := run(ctx, c, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config, out io.Writer) error {
	hc, err := httpClient(c)
	if err != nil {
		return err
	}
	if c.translationAddr == "" {
		c.translationAddr = c.addr
	}
	clusters := registrationv1connect.NewClusterServiceClient(hc, "https://"+c.addr, connect.WithGRPC())
	translation := translationv1connect.NewTranslationServiceClient(hc, "https://"+c.translationAddr, connect.WithGRPC())

	list, err := clusters.ListClusters(ctx, connect.NewRequest(&registrationv1.ListClustersRequest{}))
	if err != nil {
		return fmt.Errorf("list clusters: %w", err)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tSTATUS\tAGENT\tCERTIFICATE EXPIRES")
	names := []string{}
	for _, cl := range list.Msg.GetClusters() {
		names = append(names, cl.GetName())
		expires := "-"
		if cl.GetCertificateExpiresAt() != nil {
			expires = cl.GetCertificateExpiresAt().AsTime().UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cl.GetName(),
			strings.TrimPrefix(cl.GetStatus().String(), "CLUSTER_STATUS_"), cl.GetAgentVersion(), expires)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	seen := map[string]string{} // "<cluster> <kind> <ns>/<name>" -> state and errors
	versions := map[string]string{}
	for {
		for _, name := range names {
			res, err := translation.GetOutputSnapshot(ctx, connect.NewRequest(&translationv1.GetOutputSnapshotRequest{Cluster: name}))
			if connect.CodeOf(err) == connect.CodeNotFound {
				continue // nothing translated for this cluster yet
			}
			if err != nil {
				return fmt.Errorf("output snapshot of %s: %w", name, err)
			}
			snap := res.Msg.GetSnapshot()
			if versions[name] == snap.GetVersion() {
				continue
			}
			versions[name] = snap.GetVersion()
			lines := []string{}
			for _, st := range snap.GetStatuses() {
				key := fmt.Sprintf("%s %s %s/%s", name, st.GetKind(), st.GetNamespace(), st.GetName())
				state := describeStatus(st.GetStatus())
				if seen[key] != state {
					seen[key] = state
					lines = append(lines, key+" "+state)
				}
			}
			slices.Sort(lines)
			for _, l := range lines {
				fmt.Fprintln(out, l)
			}
		}
		if c.once {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.interval):
		}
	}
}

// describeStatus reads the state and errors from a status in its JSON form
// (the protobuf JSON mapping of the resource's status message).
func describeStatus(raw []byte) string {
	var st struct {
		State  string   `json:"state"`
		Errors []string `json:"errors"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return "UNREADABLE (" + err.Error() + ")"
	}
	if st.State == "" {
		st.State = "PENDING"
	}
	if len(st.Errors) > 0 {
		return st.State + ": " + strings.Join(st.Errors, "; ")
	}
	return st.State
}

// httpClient speaks HTTP/2 over mTLS with the given certificate.
func httpClient(c config) (*http.Client, error) {
	caPEM, err := os.ReadFile(c.caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", c.caFile)
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--cert-file/--key-file: %w", err)
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		DialContext:       (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSClientConfig:   &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13},
		ForceAttemptHTTP2: true,
		Protocols:         protocols,
	}}, nil
}
