package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1/ingestv1connect"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1/translationv1connect"
	"github.com/meshplane/meshplane/libs/snapshots/meshview"
	"github.com/spf13/cobra"
)

// checkReport is what `meshctl check -o json|yaml` prints.
type checkReport struct {
	OK       bool           `json:"ok"`
	Services []serviceCheck `json:"services"`
	// SafeMode is translation's: publishing held until every cluster has
	// reported. Empty when translation is not served at --addr.
	SafeMode *safeModeCheck `json:"safeMode,omitempty"`
	Clusters []clusterCheck `json:"clusters"`
	// Notes say which optional checks could not run, and why.
	Notes []string `json:"notes,omitempty"`
	Error string   `json:"error,omitempty"`
}

// The report's parts are meshview's, shared with the console.
type (
	safeModeCheck = meshview.SafeMode
	clusterCheck  = meshview.ClusterCheck
	pushRefusal   = meshview.PushRefusal
)

type serviceCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

func newCheckCmd() *cobra.Command {
	var pre preInstallFlags
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Show whether the management plane is serving and which clusters are connected",
		Long: `Show whether the management plane is serving and which clusters are
connected: for every cluster, whether its agent pushes (ingest) and pulls
(distribution), and whether it applied the current version without errors.
Exits 1 when anything is not healthy.

With --pre-install, check a Kubernetes cluster before installing instead:
that it is reachable (--kubeconfig, --kube-context), its version is supported,
and Meshplane's CRDs and Istio are present.`,
		Example: `  meshctl check --pki-dir .dev-pki
  meshctl check --addr meshplane.example.com:9900 --ca-file ca.crt --cert-file meshctl.crt --key-file meshctl.key -o json
  meshctl check --pre-install --kube-context kind-mgmt`,
		Args: noArgs,
	}
	cf := addClientFlags(cmd)
	pre.add(cmd)
	out := addOutputFlag(cmd, "table", "table", "yaml", "json")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.validate(); err != nil {
			return err
		}
		if pre.enabled {
			return runPreInstallCheck(cmd.Context(), cmd.OutOrStdout(), out.format, &pre)
		}
		c, err := cf.connect()
		if err != nil {
			return err
		}
		defer c.close()
		ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Second)
		defer cancel()
		rep := checkManagementPlane(ctx, c)
		w := cmd.OutOrStdout()
		if out.format != "table" {
			if err := printStructured(w, out.format, rep); err != nil {
				return err
			}
		} else {
			printCheckTable(w, rep)
		}
		if !rep.OK {
			return silentError{exitFailure}
		}
		return nil
	}
	return cmd
}

// checkManagementPlane asks the management plane whether it serves, and
// which clusters have pushed and acknowledged.
func checkManagementPlane(ctx context.Context, c *conn) checkReport {
	rep := checkReport{OK: true, Services: []serviceCheck{}, Clusters: []clusterCheck{}}
	health := grpchealth.NewClient(c.hc, c.base, c.opts...)
	for _, svc := range []string{"", ingestv1connect.IngestServiceName, distributionv1connect.DistributionServiceName} {
		name := svc
		if name == "" {
			name = "server"
		}
		res, err := health.Check(ctx, &grpchealth.CheckRequest{Service: svc})
		switch {
		case err != nil:
			rep.OK = false
			rep.Services = append(rep.Services, serviceCheck{Name: name, Status: "ERROR", Error: hintFor("", c.addr, err)})
		case res.Status != grpchealth.StatusServing:
			rep.OK = false
			rep.Services = append(rep.Services, serviceCheck{Name: name, Status: res.Status.String()})
		default:
			rep.Services = append(rep.Services, serviceCheck{Name: name, Status: "SERVING"})
		}
	}

	ingest := ingestv1connect.NewIngestServiceClient(c.hc, c.base, c.opts...)
	dist := distributionv1connect.NewDistributionServiceClient(c.hc, c.base, c.opts...)
	clusters, err := ingest.ListClusters(ctx, connect.NewRequest(&ingestv1.ListClustersRequest{}))
	if err != nil {
		rep.OK = false
		rep.Error = "clusters: " + hintFor("ingest", c.addr, err)
		return rep
	}
	acks, err := dist.ListAcks(ctx, connect.NewRequest(&distributionv1.ListAcksRequest{}))
	if err != nil {
		rep.OK = false
		rep.Error = "acks: " + hintFor("distribution", c.addr, err)
		return rep
	}
	in := meshview.CheckInput{Clusters: clusters.Msg.GetClusters(), Acks: acks.Msg.GetClusters(), Now: time.Now()}
	// Registration and translation may run elsewhere than --addr (split
	// services without a front door): then their checks are skipped.
	if res, err := c.clusters().ListClusters(ctx, connect.NewRequest(&registrationv1.ListClustersRequest{})); err != nil {
		rep.Notes = append(rep.Notes, "certificates not checked: "+notServedOr(err, "registration", c.addr))
	} else {
		in.Records = res.Msg.GetClusters()
	}
	tc := translationv1connect.NewTranslationServiceClient(c.hc, c.base, c.opts...)
	if st, err := tc.GetStatus(ctx, connect.NewRequest(&translationv1.GetStatusRequest{})); err != nil {
		rep.Notes = append(rep.Notes, "safe mode not checked: "+notServedOr(err, "translation", c.addr))
	} else {
		in.Translation = st.Msg
	}
	cr := meshview.CheckClusters(in)
	rep.OK = rep.OK && cr.OK
	rep.SafeMode, rep.Clusters = cr.SafeMode, cr.Clusters
	return rep
}

// certValid fills the certificate's expiry and says whether it is still
// valid.
func certValid(cc *clusterCheck, r *registrationv1.Cluster) bool {
	return meshview.CertValid(cc, r, time.Now())
}

// notServedOr explains a failed optional call: not served at this address,
// or the error with its hint.
func notServedOr(err error, service, addr string) string {
	switch connect.CodeOf(err) {
	case connect.CodeUnimplemented, connect.CodeNotFound:
		return service + " is not served at " + addr
	}
	return hintFor(service, addr, err)
}

func printCheckTable(w io.Writer, rep checkReport) {
	for _, s := range rep.Services {
		if s.Error != "" {
			fmt.Fprintf(w, "%-45s %s %s\n", s.Name, s.Status, s.Error)
			continue
		}
		fmt.Fprintf(w, "%-45s %s\n", s.Name, s.Status)
	}
	if rep.Error != "" {
		fmt.Fprintf(w, "\n%s\n", rep.Error)
		return
	}
	if sm := rep.SafeMode; sm != nil {
		state := "off"
		if sm.On {
			state = "ON: publishing held until every cluster reports"
			if len(sm.Waiting) > 0 {
				state += "; waiting for " + strings.Join(sm.Waiting, ", ")
			}
		}
		fmt.Fprintf(w, "%-45s %s\n", "safe mode", state)
		if len(sm.Missing) > 0 {
			fmt.Fprintf(w, "%-45s %s\n", "expected clusters missing", strings.Join(sm.Missing, ", ")+": outputs are incomplete, agents hold their deletions")
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tPUSH\tINPUT VERSION\tLAST PUSH\tPULL\tAPPLIED\tAPPLY ERRORS\tHELD DELETIONS\tCERT EXPIRES")
	for _, c := range rep.Clusters {
		last := "-"
		if c.LastPush != nil {
			last = time.Since(*c.LastPush).Round(time.Second).String() + " ago"
		}
		cert := "-"
		if c.CertExpires != nil {
			if d := time.Until(*c.CertExpires); d > 0 {
				cert = "in " + d.Round(time.Minute).String()
			} else {
				cert = "EXPIRED " + (-d).Round(time.Minute).String() + " ago"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", c.Cluster, c.Push, dash(short(c.InputVersion)), last, c.Pull, c.Applied, c.ApplyErrors, c.HeldDeletions, cert)
	}
	tw.Flush()
	for _, c := range rep.Clusters {
		if r := c.Refused; r != nil {
			fmt.Fprintf(w, "cluster %s: last push refused %s ago (%s): %s\n", c.Cluster, time.Since(r.At).Round(time.Second), r.Reason, r.Message)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
