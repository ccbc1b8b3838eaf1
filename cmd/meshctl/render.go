package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	settingsv1 "github.com/meshplane/meshplane/libs/gen/meshplane/settings/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/discovery"
	"github.com/meshplane/meshplane/services/translation/render"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// renderedCluster is one cluster of `meshctl render -o json|yaml`.
type renderedCluster struct {
	Cluster  string            `json:"cluster"`
	Version  string            `json:"version"`
	Objects  []render.Manifest `json:"objects"`
	Statuses []render.Status   `json:"statuses"`
}

// renderLong is render's help.
const renderLong = `Translate a directory of Meshplane resources and discovered objects into
the Istio objects each cluster would get, offline: no management plane is
called. This is for GitOps and CI review of policy changes.

-f takes a directory (read recursively: every .yaml, .yml and .json file,
skipping names that start with a dot), a file, or - for standard input, and
may be repeated. A file holds

  - Kubernetes manifests of Meshplane resources (VirtualMesh, TrafficPolicy,
    AccessPolicy, VirtualDestination, Settings) and discovered objects
    (Mesh, Workload, Destination), separated by "---" or in a kind: List,
  - a list of input snapshots, as 'meshctl snapshot dump --input' prints
    them and the translation golden tests hold them, or
  - plain Kubernetes manifests of a workload cluster (Namespaces,
    Deployments, StatefulSets, DaemonSets, ReplicaSets, Pods, Services,
    EndpointSlices, Nodes, Istio's mesh config ConfigMap), which the
    agent's own discovery turns into the cluster's Mesh, Workload and
    Destination objects. Without Pods, each controller stands for its pods,
    with Istio's sidecar where the injector would add one (see
    docs/meshctl.md).

A manifest's cluster is its meshplane.dev/cluster annotation, else the
first directory under DIR that holds the file: DIR/east/mesh.yaml is in
cluster east. Resources applied in the management cluster go in
DIR/<install>/ (DIR/meshplane/ by default). Manifests of kinds that
neither translation nor discovery reads are skipped and counted on stderr.

The output is one YAML stream per cluster, each headed by a comment naming
the cluster, with the objects as an agent would apply them. Statuses of
resources that are not ACCEPTED (INVALID policies with their errors) are
printed on stderr; --show-status adds every status to the output as a
commented section, and --strict exits 1 when any resource is INVALID or
FAILED.

--validate runs Istio's own validation (the code of istiod's validating
webhook) on every object printed, offline, with the meshplane-istio-validate
command (found beside meshctl, then on PATH, or given by --validator; build
it with 'make istio-validate'). It prints each object Istio rejects or
warns on, with Istio's message, on stderr, and exits 1 when Istio rejects
one.`

// renderExample is render's examples.
const renderExample = `  # Review what a policy change does, as CI would.
  meshctl render -f policies/ --show-status
  # One cluster, as JSON.
  meshctl render -f policies/ --cluster east -o json | jq '.[0].objects[].kind'
  # An input snapshot dumped from a running management plane.
  meshctl snapshot dump --cluster east --input | meshctl render -f -
  # Fail a CI job when Istio would reject what Meshplane writes.
  meshctl render -f policies/ --strict --validate > /dev/null`

// renderFlags are render's flags.
type renderFlags struct {
	files      []string
	clusters   []string
	showStatus bool
	strict     bool
	validate   bool
	validator  string
	outDir     string
	opts       render.Options
	out        *outputFlag
}

func newRenderCmd() *cobra.Command {
	f := &renderFlags{}
	cmd := &cobra.Command{
		Use:     "render -f DIR|FILE [-o yaml|json] [--cluster NAME] [--strict] [--validate]",
		Short:   "Translate Meshplane resources and discovered objects into Istio YAML per cluster, offline",
		Long:    renderLong,
		Example: renderExample,
		Args:    noArgs,
	}
	cmd.Flags().StringArrayVarP(&f.files, "filename", "f", nil, "directory or file of resources to render, - for standard input (repeatable)")
	cmd.Flags().StringSliceVar(&f.clusters, "cluster", nil, "print only these clusters (repeatable); all are translated together")
	cmd.Flags().BoolVar(&f.showStatus, "show-status", false, "add every resource's status to the output, as comments (yaml) or a statuses list (json)")
	cmd.Flags().StringVar(&f.outDir, "output-dir", "", "write one file per cluster, DIR/<cluster>.yaml (or .json), instead of standard output")
	_ = cmd.MarkFlagDirname("output-dir")
	cmd.Flags().BoolVar(&f.strict, "strict", false, "exit 1 when any resource is INVALID or FAILED")
	cmd.Flags().BoolVar(&f.validate, "validate", false, "run Istio's validation on every object printed (meshplane-istio-validate); exit 1 when Istio rejects one")
	cmd.Flags().StringVar(&f.validator, "validator", "", "path of meshplane-istio-validate for --validate (default: beside meshctl, then on PATH)")
	_ = cmd.MarkFlagFilename("validator")
	cmd.Flags().StringVar(&f.opts.Install, "install", snapshots.DefaultInstall, "install name: the managed-by label, and the name of the management cluster")
	cmd.Flags().StringVar(&f.opts.ClusterDomain, "cluster-domain", "cluster.local", "DNS suffix of Services in workload clusters")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	f.out = addOutputFlag(cmd, "yaml", "yaml", "json")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return f.run(cmd) }
	return cmd
}

// run checks the flags, loads the inputs, translates them, prints the
// chosen clusters' outputs and validates them when asked.
func (f *renderFlags) run(cmd *cobra.Command) error {
	if len(f.files) == 0 {
		return usagef("name the resources: -f DIR or -f FILE")
	}
	if err := f.out.validate(); err != nil {
		return err
	}
	if f.validator != "" && !f.validate {
		return usagef("--validator is for --validate")
	}
	var validatorPath string
	if f.validate {
		var err error
		if validatorPath, err = findValidator(f.validator); err != nil {
			return err
		}
	}
	in, err := f.load(cmd.InOrStdin())
	if err != nil {
		return err
	}
	outputs, skipped, err := discoverAndTranslate(in, f.opts)
	if err != nil {
		return err
	}
	names, err := f.chosen(outputs)
	if err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	if len(skipped) > 0 {
		fmt.Fprintf(stderr, "render: skipped %d object(s) that neither translation nor discovery reads, e.g. %s\n", len(skipped), skipped[0])
	}
	bad := reportStatuses(stderr, outputs)
	if err := f.write(cmd.OutOrStdout(), outputs, names); err != nil {
		return err
	}
	if f.validate {
		if err := validateRendered(cmd.Context(), validatorPath, stderr, outputs, names); err != nil {
			return err
		}
	}
	if f.strict && bad > 0 {
		return silentError{exitFailure}
	}
	return nil
}

// load reads every -f into one set of inputs; - is stdin.
func (f *renderFlags) load(stdin io.Reader) (*render.Inputs, error) {
	in := &render.Inputs{}
	for _, path := range f.files {
		if path == "-" {
			data, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("read standard input: %w", err)
			}
			if err := render.Load("<stdin>", "", data, in); err != nil {
				return nil, err
			}
			continue
		}
		if err := loadPath(path, in); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// chosen returns the clusters to print, sorted: --cluster's, each of
// which must have an output, else all.
func (f *renderFlags) chosen(outputs map[string]*snapshotv1.OutputSnapshot) ([]string, error) {
	names := slices.Sorted(maps.Keys(outputs))
	for _, c := range f.clusters {
		if outputs[c] == nil {
			return nil, usagef("--cluster %s: no input names that cluster; the inputs name %s", c, strings.Join(names, ", "))
		}
	}
	if len(f.clusters) > 0 {
		names = slices.DeleteFunc(names, func(c string) bool { return !slices.Contains(f.clusters, c) })
	}
	return names, nil
}

// write prints the clusters' outputs to w, or one file each in
// --output-dir (naming each file on w).
func (f *renderFlags) write(w io.Writer, outputs map[string]*snapshotv1.OutputSnapshot, names []string) error {
	if f.outDir == "" {
		return writeRendered(w, f.out.format, outputs, names, f.showStatus)
	}
	if err := os.MkdirAll(f.outDir, 0o755); err != nil {
		return err
	}
	for _, c := range names {
		var b bytes.Buffer
		if err := writeRendered(&b, f.out.format, outputs, []string{c}, f.showStatus); err != nil {
			return err
		}
		path := filepath.Join(f.outDir, c+"."+f.out.format)
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(w, "wrote %s\n", path)
	}
	return nil
}

// loadPath reads a directory or one file into in.
func loadPath(path string, in *render.Inputs) error {
	st, err := os.Stat(path)
	if err != nil {
		return usagef("-f %s: %v", path, err)
	}
	if st.IsDir() {
		got, err := render.LoadDir(path)
		if err != nil {
			return err
		}
		if in.Snapshots == nil {
			in.Snapshots = map[string]*snapshotv1.InputSnapshot{}
		}
		for c, objs := range got.Objects {
			if in.Objects == nil {
				in.Objects = map[string][]render.Object{}
			}
			in.Objects[c] = append(in.Objects[c], objs...)
		}
		for c, s := range got.Snapshots {
			if old := in.Snapshots[c]; old != nil {
				mergeInput(old, s)
				continue
			}
			in.Snapshots[c] = s
		}
		in.Skipped = append(in.Skipped, got.Skipped...)
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return render.Load(path, "", data, in)
}

// discoverAndTranslate runs the agent's discovery on each cluster's
// Kubernetes objects, adds what it finds to the cluster's input snapshot
// and translates. As an agent does when an output snapshot brings it the
// gateway detection that Settings give its cluster, a cluster whose
// output has a detector is discovered again with it, and the inputs are
// translated again. It returns the outputs and every object that was
// read by neither discovery nor translation.
func discoverAndTranslate(in *render.Inputs, opts render.Options) (map[string]*snapshotv1.OutputSnapshot, []string, error) {
	var detectors map[string]*settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector
	for {
		snaps, skipped, err := discoverObjects(in, opts, detectors)
		if err != nil {
			return nil, nil, err
		}
		outputs, err := render.Translate(snaps, opts)
		if err != nil {
			return nil, nil, err
		}
		if detectors != nil || len(in.Objects) == 0 {
			return outputs, skipped, nil
		}
		detectors = map[string]*settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector{}
		for c := range in.Objects {
			if d := outputs[c].GetGatewayDetector(); d != nil {
				detectors[c] = d
			}
		}
		if len(detectors) == 0 {
			return outputs, skipped, nil
		}
	}
}

// discoverObjects returns the input snapshots with what the agent's
// discovery finds in each cluster's Kubernetes objects added (with the
// cluster's gateway detector in detectors, if any), and every object that
// was read by neither. in is not modified.
func discoverObjects(in *render.Inputs, opts render.Options, detectors map[string]*settingsv1.SettingsSpec_DiscoverySettings_GatewayDetector) (map[string]*snapshotv1.InputSnapshot, []string, error) {
	snaps := make(map[string]*snapshotv1.InputSnapshot, len(in.Snapshots))
	for c, s := range in.Snapshots {
		snaps[c] = s
	}
	skipped := slices.Clone(in.Skipped)
	for _, c := range slices.Sorted(maps.Keys(in.Objects)) {
		objs := in.Objects[c]
		ms := make([]discovery.Manifest, 0, len(objs))
		for _, o := range objs {
			ms = append(ms, discovery.Manifest{Where: o.Where, JSON: o.JSON})
		}
		id := discovery.Identity{Cluster: c, ClusterDomain: opts.ClusterDomain, Install: opts.Install}
		s, sk, err := discovery.FromManifests(id, discovery.Options{}.WithDetector(detectors[c]), ms)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster %s: %w", c, err)
		}
		merged := proto.CloneOf(in.Snapshots[c])
		mergeInput(merged, s)
		snaps[c] = merged
		skipped = append(skipped, sk...)
	}
	return snaps, skipped, nil
}

func mergeInput(dst, src *snapshotv1.InputSnapshot) {
	dst.Meshes = append(dst.Meshes, src.Meshes...)
	dst.Workloads = append(dst.Workloads, src.Workloads...)
	dst.Destinations = append(dst.Destinations, src.Destinations...)
	dst.VirtualMeshes = append(dst.VirtualMeshes, src.VirtualMeshes...)
	dst.TrafficPolicies = append(dst.TrafficPolicies, src.TrafficPolicies...)
	dst.AccessPolicies = append(dst.AccessPolicies, src.AccessPolicies...)
	dst.VirtualDestinations = append(dst.VirtualDestinations, src.VirtualDestinations...)
	dst.Settings = append(dst.Settings, src.Settings...)
	dst.UserIstioObjects = append(dst.UserIstioObjects, src.UserIstioObjects...)
}

// reportStatuses prints every status that is not ACCEPTED, and the
// warnings of those that are, in every cluster (a policy's status is in the
// cluster it was applied in, which --cluster may leave out), and returns
// how many are INVALID or FAILED.
func reportStatuses(w io.Writer, outputs map[string]*snapshotv1.OutputSnapshot) int {
	bad := 0
	for _, c := range sortedClusters(outputs) {
		for _, s := range render.Statuses(outputs[c]) {
			if s.State == "INVALID" || s.State == "FAILED" {
				bad++
			}
			if s.State == "ACCEPTED" && len(s.Warnings) == 0 {
				continue
			}
			fmt.Fprintf(w, "%s %s in cluster %s: %s\n", s.Kind, nsName(s.Namespace, s.Name), s.Cluster, s.State)
			for _, e := range s.Errors {
				fmt.Fprintf(w, "  error: %s\n", e)
			}
			for _, e := range s.Warnings {
				fmt.Fprintf(w, "  warning: %s\n", e)
			}
		}
	}
	return bad
}

func sortedClusters(outputs map[string]*snapshotv1.OutputSnapshot) []string {
	names := make([]string, 0, len(outputs))
	for c := range outputs {
		names = append(names, c)
	}
	slices.Sort(names)
	return names
}

func nsName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func writeRendered(w io.Writer, format string, outputs map[string]*snapshotv1.OutputSnapshot, clusters []string, showStatus bool) error {
	if format == "json" {
		list := make([]renderedCluster, 0, len(clusters))
		for _, c := range clusters {
			rc := renderedCluster{Cluster: c, Version: outputs[c].GetVersion(), Objects: render.Manifests(outputs[c])}
			if showStatus {
				rc.Statuses = render.Statuses(outputs[c])
			}
			list = append(list, rc)
		}
		return printStructured(w, "json", list)
	}
	for i, c := range clusters {
		o := outputs[c]
		objs := render.Manifests(o)
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "# cluster: %s\n# %d object(s), output version %s\n", c, len(objs), o.GetVersion())
		for _, m := range objs {
			b, err := json.Marshal(m)
			if err == nil {
				b, err = yaml.JSONToYAML(b)
			}
			if err != nil {
				return fmt.Errorf("encode %s %s: %w", m.Kind, m.Metadata.Name, err)
			}
			fmt.Fprintf(w, "---\n%s", b)
		}
		if showStatus {
			sts := render.Statuses(o)
			fmt.Fprintf(w, "# statuses in cluster %s: %d\n", c, len(sts))
			for _, s := range sts {
				b, err := yaml.Marshal(struct {
					APIVersion string          `json:"apiVersion"`
					Kind       string          `json:"kind"`
					Namespace  string          `json:"namespace,omitempty"`
					Name       string          `json:"name"`
					Status     json.RawMessage `json:"status"`
				}{s.APIVersion, s.Kind, s.Namespace, s.Name, s.Status})
				if err != nil {
					return err
				}
				for j, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
					prefix := "#   "
					if j == 0 {
						prefix = "# - "
					}
					fmt.Fprintf(w, "%s%s\n", prefix, line)
				}
			}
		}
	}
	return nil
}
