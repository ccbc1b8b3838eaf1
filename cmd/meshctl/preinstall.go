package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshplane/meshplane/libs/gen/crds"
	"github.com/meshplane/meshplane/libs/kube"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// minKubeMinor is the oldest Kubernetes 1.x that Meshplane supports: the
// charts use only APIs that are GA there, and the tests run 1.32.
const minKubeMinor = 29

// kubeFlags are --kubeconfig and --kube-context, as helm names them
// (--context is meshctl's own context, config.go).
type kubeFlags struct {
	kubeconfig, context string
}

func (k *kubeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&k.kubeconfig, "kubeconfig", "", "path of the kubeconfig file; default $KUBECONFIG, else ~/.kube/config")
	cmd.Flags().StringVar(&k.context, "kube-context", "", "the kubeconfig context to use; default its current context")
}

type preInstallFlags struct {
	enabled bool
	kube    kubeFlags
}

func (p *preInstallFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&p.enabled, "pre-install", false, "check a Kubernetes cluster before installing, instead of the management plane")
	p.kube.add(cmd)
}

// preCheck is one line of the pre-install report. Level is ok, warn or
// fail; only fail makes the command exit 1.
type preCheck struct {
	Check  string `json:"check"`
	Level  string `json:"level"`
	Detail string `json:"detail"`
	Hint   string `json:"hint,omitempty"`
}

type preInstallReport struct {
	OK     bool       `json:"ok"`
	Server string     `json:"server,omitempty"`
	Checks []preCheck `json:"checks"`
}

// istioResources are the Istio kinds translation writes.
var istioResources = []struct{ groupVersion, resource string }{
	{"networking.istio.io/v1", "virtualservices"},
	{"networking.istio.io/v1", "destinationrules"},
	{"networking.istio.io/v1", "serviceentries"},
	{"networking.istio.io/v1", "gateways"},
	{"security.istio.io/v1", "authorizationpolicies"},
	{"security.istio.io/v1", "peerauthentications"},
}

func runPreInstallCheck(ctx context.Context, w io.Writer, format string, p *preInstallFlags) error {
	cfg, err := kube.RESTConfigFromKubeconfig(p.kube.kubeconfig, p.kube.context)
	if err != nil {
		return fmt.Errorf("%v\nhint: pass --kubeconfig and --kube-context of the cluster to check", err)
	}
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rep := preInstallCheck(ctx, cs)
	rep.Server = cfg.Host
	if format != "table" {
		if err := printStructured(w, format, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "cluster %s\n\n", cfg.Host)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CHECK\tRESULT\tDETAIL")
		for _, c := range rep.Checks {
			detail := c.Detail
			if c.Hint != "" {
				detail += " (hint: " + c.Hint + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Check, strings.ToUpper(c.Level), detail)
		}
		tw.Flush()
	}
	if !rep.OK {
		return silentError{exitFailure}
	}
	return nil
}

func preInstallCheck(ctx context.Context, cs kubernetes.Interface) preInstallReport {
	rep := preInstallReport{OK: true}
	add := func(c preCheck) {
		if c.Level == "fail" {
			rep.OK = false
		}
		rep.Checks = append(rep.Checks, c)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		add(preCheck{"reachable", "fail", err.Error(), "is the cluster running, and are --kubeconfig and --kube-context right?"})
		return rep
	}
	add(preCheck{Check: "reachable", Level: "ok", Detail: "API server answers"})
	minor, _ := strconv.Atoi(strings.TrimRight(v.Minor, "+"))
	if v.Major == "1" && minor >= minKubeMinor {
		add(preCheck{Check: "kubernetes version", Level: "ok", Detail: v.GitVersion})
	} else {
		add(preCheck{"kubernetes version", "fail", fmt.Sprintf("%s is older than the supported 1.%d", v.GitVersion, minKubeMinor), "upgrade the cluster"})
	}

	has := func(groupVersion, resource string) (bool, error) {
		list, err := cs.Discovery().ServerResourcesForGroupVersion(groupVersion)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, r := range list.APIResources {
			if r.Name == resource {
				return true, nil
			}
		}
		return false, nil
	}
	var missing, present []string
	defs, err := meshplaneCRDs()
	if err != nil {
		add(preCheck{Check: "meshplane CRDs", Level: "fail", Detail: err.Error()})
	}
	for _, d := range defs {
		ok, err := has(d.groupVersion, d.resource)
		if err != nil {
			add(preCheck{Check: "meshplane CRDs", Level: "fail", Detail: err.Error()})
			break
		}
		if ok {
			present = append(present, d.resource+"."+d.group)
		} else {
			missing = append(missing, d.resource+"."+d.group)
		}
	}
	switch {
	case len(missing) == 0 && len(defs) > 0:
		add(preCheck{Check: "meshplane CRDs", Level: "ok", Detail: fmt.Sprintf("all %d installed", len(defs))})
	case len(present) == 0:
		add(preCheck{"meshplane CRDs", "warn", "not installed yet", "`meshctl install --yes` applies them from deploy/crds"})
	default:
		add(preCheck{"meshplane CRDs", "fail", "missing " + strings.Join(missing, ", "), "apply deploy/crds of this release: `kubectl apply --server-side -f deploy/crds`"})
	}

	missing = nil
	for _, r := range istioResources {
		ok, err := has(r.groupVersion, r.resource)
		if err != nil {
			missing = append(missing, r.resource+" ("+err.Error()+")")
			continue
		}
		if !ok {
			missing = append(missing, r.resource+"."+strings.Split(r.groupVersion, "/")[0])
		}
	}
	if len(missing) == 0 {
		add(preCheck{Check: "istio CRDs", Level: "ok", Detail: "networking.istio.io/v1 and security.istio.io/v1 served"})
	} else {
		add(preCheck{"istio CRDs", "fail", "missing " + strings.Join(missing, ", "), "install Istio 1.22 or later (its v1 APIs) in every workload cluster"})
	}
	deps, err := cs.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "app=istiod"})
	switch {
	case err != nil:
		add(preCheck{Check: "istiod", Level: "warn", Detail: "cannot list Deployments: " + err.Error()})
	case len(deps.Items) == 0:
		add(preCheck{"istiod", "warn", "no Deployment labelled app=istiod", "a workload cluster needs istiod; the management cluster does not"})
	default:
		var names []string
		for _, d := range deps.Items {
			names = append(names, d.Namespace+"/"+d.Name)
		}
		add(preCheck{Check: "istiod", Level: "ok", Detail: strings.Join(names, ", ")})
	}
	return rep
}

type crdDef struct{ group, groupVersion, resource string }

// meshplaneCRDs lists the CRDs built into meshctl, which are deploy/crds
// of the same commit.
func meshplaneCRDs() ([]crdDef, error) {
	all, err := crds.All()
	if err != nil {
		return nil, fmt.Errorf("read built-in CRDs: %w", err)
	}
	var out []crdDef
	for _, b := range all {
		var crd struct {
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Plural string `json:"plural"`
				} `json:"names"`
				Versions []struct {
					Name    string `json:"name"`
					Storage bool   `json:"storage"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(b, &crd); err != nil {
			return nil, fmt.Errorf("read built-in CRDs: %w", err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				out = append(out, crdDef{crd.Spec.Group, crd.Spec.Group + "/" + v.Name, crd.Spec.Names.Plural})
			}
		}
	}
	return out, nil
}
