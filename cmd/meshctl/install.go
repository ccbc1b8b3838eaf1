package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/spf13/cobra"
)

const (
	defaultChart = "deploy/charts/meshplane"
	defaultCRDs  = "deploy/crds"
)

// step is one command of an install or uninstall plan.
type step struct {
	why  string
	argv []string
}

// planFlags are what install and uninstall share: where, with which tools,
// and whether to run the plan or print it.
type planFlags struct {
	kube               kubeFlags
	namespace, release string
	helm, kubectl      string
	yes                bool
	toolFlags          *platform.Flags
}

func (p *planFlags) add(cmd *cobra.Command) {
	p.kube.add(cmd)
	cmd.Flags().StringVarP(&p.namespace, "namespace", "n", "meshplane", "namespace of the management plane")
	cmd.Flags().StringVar(&p.release, "release", "meshplane", "Helm release name")
	cmd.Flags().BoolVarP(&p.yes, "yes", "y", false, "run the steps; without it they are only printed (a dry run)")
	p.helm, p.kubectl = "helm", "kubectl"
	gfs := flag.NewFlagSet(cmd.Name(), flag.ContinueOnError)
	p.toolFlags = platform.NewFlags(gfs, "")
	p.toolFlags.String(&p.helm, "helm", "the helm binary (Helm 3)")
	p.toolFlags.String(&p.kubectl, "kubectl", "the kubectl binary")
	cmd.Flags().AddGoFlagSet(gfs)
}

func (p *planFlags) kubectlArgs(args ...string) []string {
	argv := []string{p.kubectl}
	if p.kube.kubeconfig != "" {
		argv = append(argv, "--kubeconfig", p.kube.kubeconfig)
	}
	if p.kube.context != "" {
		argv = append(argv, "--context", p.kube.context)
	}
	return append(argv, args...)
}

// helmArgs adds helm's spelling of the kube flags (--kube-context).
func (p *planFlags) helmArgs(args ...string) []string {
	argv := append([]string{p.helm}, args...)
	if p.kube.kubeconfig != "" {
		argv = append(argv, "--kubeconfig", p.kube.kubeconfig)
	}
	if p.kube.context != "" {
		argv = append(argv, "--kube-context", p.kube.context)
	}
	return argv
}

// finish prints the plan, or runs it with --yes.
func (p *planFlags) finish(cmd *cobra.Command, verb string, steps []step) error {
	if err := p.toolFlags.Err(); err != nil {
		return usageError{err}
	}
	w := cmd.OutOrStdout()
	if !p.yes {
		fmt.Fprintf(w, "# meshctl %s: the steps, not run. Run them yourself, or pass --yes to let meshctl run them.\n", verb)
		for i, s := range steps {
			fmt.Fprintf(w, "\n# %d. %s\n%s\n", i+1, s.why, shellLine(s.argv))
		}
		return nil
	}
	for _, s := range steps {
		if _, err := exec.LookPath(s.argv[0]); err != nil {
			return toolMissing(s.argv[0], verb, err)
		}
	}
	for i, s := range steps {
		fmt.Fprintf(w, "# %d/%d. %s\n$ %s\n", i+1, len(steps), s.why, shellLine(s.argv))
		if err := runStep(cmd.Context(), w, cmd.ErrOrStderr(), s.argv); err != nil {
			return fmt.Errorf("step %d (%s) failed: %w\nhint: fix the cause and run the same command again: every step is safe to repeat", i+1, s.argv[0], err)
		}
	}
	fmt.Fprintf(w, "# done: %d step(s)\n", len(steps))
	return nil
}

func toolMissing(tool, verb string, err error) error {
	name := filepath.Base(tool)
	how := map[string]string{
		"helm":    "install Helm 3 (https://helm.sh/docs/intro/install/; in a Meshplane checkout `bash hack/tools.sh` caches one, see `bash hack/tools.sh --print`) or pass --helm PATH",
		"kubectl": "install kubectl (https://kubernetes.io/docs/tasks/tools/) or pass --kubectl PATH",
	}[name]
	if how == "" {
		how = "put it on PATH"
	}
	return fmt.Errorf("%s is needed to run the steps: %v\nhint: %s; or run `meshctl %s` without --yes to print the steps", name, err, how, verb)
}

func runStep(ctx context.Context, stdout, stderr io.Writer, argv []string) error {
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Stdout, c.Stderr = stdout, stderr
	return c.Run()
}

// shellLine quotes argv for a POSIX shell.
func shellLine(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@+%", r))
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

func newInstallCmd() *cobra.Command {
	var (
		p                         planFlags
		chart, chartVersion, crds string
		values, sets              []string
		skipCRDs, wait            bool
	)
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Print (or, with --yes, run) the Helm steps that install the management plane",
		Long: `Print, or with --yes run, the steps that install Meshplane's management plane
into the current Kubernetes cluster (--kubeconfig, --kube-context):

  1. apply Meshplane's CRDs (the charts do not install them) from --crds,
     with server-side apply;
  2. build the umbrella chart's dependencies, when --chart is a local
     directory (its services are dependencies by local path);
  3. helm upgrade --install the umbrella chart into --namespace, creating
     it, with your --values files and --set values.

Every step can be run again safely. Then register workload clusters with
'meshctl cluster register', which prints the agent's helm install line, and
check with 'meshctl check'. Before installing, 'meshctl check --pre-install'
checks the cluster. docs/install.md explains the values (Redis, TLS).`,
		Example: `  # See the steps.
  meshctl install --kube-context kind-mgmt -f values-prod.yaml
  # Run them.
  meshctl install --kube-context kind-mgmt -f values-prod.yaml --yes`,
		Args: noArgs,
	}
	p.add(cmd)
	cmd.Flags().StringVar(&chart, "chart", defaultChart, "the umbrella chart: a local directory (a Meshplane checkout or release) or repo/chart")
	cmd.Flags().StringVar(&chartVersion, "chart-version", "", "chart version, for a chart from a repository")
	cmd.Flags().StringVar(&crds, "crds", defaultCRDs, "directory of Meshplane's CRDs")
	cmd.Flags().BoolVar(&skipCRDs, "skip-crds", false, "do not apply the CRDs (they are managed elsewhere)")
	cmd.Flags().StringArrayVarP(&values, "values", "f", nil, "Helm values file (repeatable)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "Helm value, key=value (repeatable)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the management plane's pods are ready")
	_ = cmd.MarkFlagFilename("values", "yaml", "yml")
	_ = cmd.MarkFlagDirname("crds")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if p.yes {
			for _, f := range values {
				if _, err := os.Stat(f); err != nil {
					return usagef("--values %s: %v", f, err)
				}
			}
			if !skipCRDs {
				if st, err := os.Stat(crds); err != nil || !st.IsDir() {
					return usagef("--crds %s is not a directory\nhint: run meshctl from a Meshplane checkout or release, pass --crds DIR, or --skip-crds", crds)
				}
			}
		}
		var steps []step
		if !skipCRDs {
			steps = append(steps, step{"Meshplane's CRDs (the charts do not install them)",
				p.kubectlArgs("apply", "--server-side", "--field-manager=meshctl", "-f", crds)})
		}
		if isLocalChart(chart) {
			steps = append(steps, step{"the umbrella chart's dependencies (the service charts, by local path)",
				[]string{p.helm, "dependency", "build", chart}})
		}
		args := []string{"upgrade", "--install", p.release, chart, "--namespace", p.namespace, "--create-namespace"}
		if chartVersion != "" {
			args = append(args, "--version", chartVersion)
		}
		for _, f := range values {
			args = append(args, "-f", f)
		}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		if wait {
			args = append(args, "--wait")
		}
		steps = append(steps, step{"the management plane (registration, ingest, translation, distribution) in namespace " + p.namespace, p.helmArgs(args...)})
		return p.finish(cmd, "install", steps)
	}
	return cmd
}

func isLocalChart(chart string) bool {
	if chart == defaultChart || strings.HasPrefix(chart, ".") || strings.HasPrefix(chart, "/") {
		return true
	}
	st, err := os.Stat(chart)
	return err == nil && st.IsDir()
}

func newUninstallCmd() *cobra.Command {
	var (
		p                          planFlags
		crds                       string
		deleteCRDs, deleteNS, keep bool
	)
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Print (or, with --yes, run) the steps that remove the management plane",
		Long: `Print, or with --yes run, the steps that remove the management plane:
helm uninstall of the release, then, only when asked, the namespace
(--delete-namespace) and the CRDs (--delete-crds).

Deleting the CRDs deletes every Meshplane resource in the cluster (policies
included). Agents in workload clusters keep what they applied until they
are uninstalled: 'helm uninstall meshplane-agent' in each.`,
		Example: `  meshctl uninstall --kube-context kind-mgmt
  meshctl uninstall --kube-context kind-mgmt --delete-namespace --yes`,
		Args: noArgs,
	}
	p.add(cmd)
	cmd.Flags().StringVar(&crds, "crds", defaultCRDs, "directory of Meshplane's CRDs, for --delete-crds")
	cmd.Flags().BoolVar(&deleteCRDs, "delete-crds", false, "also delete the CRDs, and so every Meshplane resource in the cluster")
	cmd.Flags().BoolVar(&deleteNS, "delete-namespace", false, "also delete the namespace (Secrets such as the registration CA included)")
	cmd.Flags().BoolVar(&keep, "keep-history", false, "keep the Helm release history")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if p.yes && deleteCRDs {
			if st, err := os.Stat(crds); err != nil || !st.IsDir() {
				return usagef("--crds %s is not a directory\nhint: pass --crds DIR", crds)
			}
		}
		args := []string{"uninstall", p.release, "--namespace", p.namespace}
		if keep {
			args = append(args, "--keep-history")
		}
		steps := []step{{"the management plane's Helm release", p.helmArgs(args...)}}
		if deleteNS {
			steps = append(steps, step{"the namespace " + p.namespace + " (with its Secrets, the registration CA included)",
				p.kubectlArgs("delete", "namespace", p.namespace, "--ignore-not-found")})
		}
		if deleteCRDs {
			steps = append(steps, step{"Meshplane's CRDs: this deletes every Meshplane resource in the cluster",
				p.kubectlArgs("delete", "-f", crds, "--ignore-not-found")})
		}
		return p.finish(cmd, "uninstall", steps)
	}
	return cmd
}
