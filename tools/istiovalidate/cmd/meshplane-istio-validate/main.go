// Command meshplane-istio-validate runs istiod's own validation (its
// validating webhook, in process) on Kubernetes manifests, offline, and
// prints what Istio rejects or warns on. `meshctl render --validate` runs
// it on the objects it renders; CI pipelines can run it on any Istio YAML.
//
//	meshplane-istio-validate [-o text|json] [FILE ...]
//
// It reads each FILE (standard input when none is given, or for "-"): a
// stream of manifests in YAML or JSON separated by "---", or a kind: List.
// Objects of groups other than Istio's (*.istio.io) are skipped and
// counted. It prints one line per finding, naming the object (kind,
// namespace/name, and the cluster of its meshplane.dev/cluster label) and
// Istio's message, and a summary on standard error.
//
// Exit status: 0 when Istio accepts every object (warnings are printed),
// 1 when it rejects one, 2 on bad usage or unreadable input.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/meshplane/meshplane/tools/istiovalidate"
)

// Exit statuses.
const (
	exitOK       = 0
	exitRejected = 1
	exitUsage    = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// report is the -o json output.
type report struct {
	IstioVersion string                  `json:"istioVersion"`
	Objects      int                     `json:"objects"`
	Skipped      int                     `json:"skipped"`
	Findings     []istiovalidate.Finding `json:"findings"`
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("meshplane-istio-validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	output := fs.String("o", "text", "output format: text (one line per finding) or json")
	version := fs.Bool("version", false, "print the istio.io/istio version whose validation this runs, and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: meshplane-istio-validate [-o text|json] [FILE ...]\n\n"+
			"Runs istiod's validation webhook, offline, on each Istio object of the\n"+
			"Kubernetes manifests in FILE (standard input when none, or -), and prints\n"+
			"what Istio rejects or warns on. Exit status: 0 when every object is\n"+
			"accepted, 1 when one is rejected, 2 on bad usage or unreadable input.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *version {
		fmt.Fprintln(stdout, istioVersion())
		return exitOK
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "meshplane-istio-validate: -o %s: want text or json\n", *output)
		return exitUsage
	}
	objs, err := read(fs.Args(), stdin)
	if err != nil {
		fmt.Fprintf(stderr, "meshplane-istio-validate: %v\n", err)
		return exitUsage
	}
	v, err := istiovalidate.NewValidator()
	if err != nil {
		fmt.Fprintf(stderr, "meshplane-istio-validate: %v\n", err)
		return exitUsage
	}
	rep := report{IstioVersion: istioVersion(), Findings: []istiovalidate.Finding{}}
	for _, o := range objs {
		if !istioGroup(o.APIVersion) {
			rep.Skipped++
			continue
		}
		rep.Objects++
		if _, ok := v.Schema(o.Ref); !ok {
			rep.Findings = append(rep.Findings, istiovalidate.Finding{
				Object: o.Ref, Level: istiovalidate.Error, Rule: istiovalidate.RuleWebhook,
				Message: fmt.Sprintf("unrecognized type %s %s: istiod has no schema for it", o.APIVersion, o.Kind),
			})
			continue
		}
		fs, err := v.Validate(o)
		if err != nil {
			fmt.Fprintf(stderr, "meshplane-istio-validate: %v\n", err)
			return exitUsage
		}
		rep.Findings = append(rep.Findings, fs...)
	}
	rejected, warnings := 0, 0
	for _, f := range rep.Findings {
		if f.Level == istiovalidate.Error {
			rejected++
		} else {
			warnings++
		}
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "meshplane-istio-validate: %v\n", err)
			return exitUsage
		}
	} else {
		for _, f := range rep.Findings {
			fmt.Fprintln(stdout, f)
		}
	}
	fmt.Fprintf(stderr, "meshplane-istio-validate: %d Istio object(s) validated with istio.io/istio %s: %d rejected, %d warning(s)", rep.Objects, rep.IstioVersion, rejected, warnings)
	if rep.Skipped > 0 {
		fmt.Fprintf(stderr, "; %d object(s) of other groups skipped", rep.Skipped)
	}
	fmt.Fprintln(stderr)
	if rejected > 0 {
		return exitRejected
	}
	return exitOK
}

// read reads the manifests of every file, or of stdin.
func read(files []string, stdin io.Reader) ([]istiovalidate.Object, error) {
	if len(files) == 0 {
		files = []string{"-"}
	}
	var out []istiovalidate.Object
	for _, f := range files {
		r, name := stdin, "<stdin>"
		if f != "-" {
			file, err := os.Open(f)
			if err != nil {
				return nil, err
			}
			defer file.Close()
			r, name = file, f
		}
		objs, err := istiovalidate.ReadManifests(name, r)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// istioGroup says whether apiVersion is of one of Istio's API groups.
func istioGroup(apiVersion string) bool {
	group, _, ok := strings.Cut(apiVersion, "/")
	return ok && (group == "istio.io" || strings.HasSuffix(group, ".istio.io"))
}

func istioVersion() string {
	if v := istiovalidate.IstioVersion(); v != "" {
		return v
	}
	return "(unknown version)"
}
