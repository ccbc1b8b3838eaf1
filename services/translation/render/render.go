// Package render is the offline entry point to translation: it reads a
// directory of Meshplane resources and discovered objects into input
// snapshots, and translates them with the same domain code the translation
// service runs, without a management plane. `meshctl render` is built on it.
//
// It is an adapter: it only reads files and shapes outputs for people; the
// rules live in internal/domain.
package render

import (
	"encoding/json"
	"fmt"
	"slices"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
)

// Options are the install-wide settings of the translation service that
// change its output.
type Options struct {
	// Install is the value of the meshplane.dev/managed-by label, and the
	// name of the management cluster; default "meshplane".
	Install string
	// ClusterDomain is the DNS suffix of Services; default cluster.local.
	ClusterDomain string
}

// Translate seals every input (sorts it and computes its version) and
// translates them all, as the translation service would.
func Translate(inputs map[string]*snapshotv1.InputSnapshot, opts Options) (map[string]*snapshotv1.OutputSnapshot, error) {
	for cluster, in := range inputs {
		if in.GetCluster() == "" {
			in.Cluster = cluster
		}
		snapshots.SealInput(in)
	}
	out, err := domain.Translate(inputs, domain.Options{Install: opts.Install, ClusterDomain: opts.ClusterDomain})
	if err != nil {
		return nil, fmt.Errorf("translate: %w", err)
	}
	return out, nil
}

// Manifest is an output object as a Kubernetes manifest.
type Manifest struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   ManifestMeta    `json:"metadata"`
	Spec       json.RawMessage `json:"spec"`
}

// ManifestMeta is a manifest's metadata.
type ManifestMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Manifests returns the objects of out as manifests, in the output's
// (sorted) order.
func Manifests(out *snapshotv1.OutputSnapshot) []Manifest {
	list := make([]Manifest, 0, len(out.GetObjects()))
	for _, o := range out.GetObjects() {
		spec := json.RawMessage(o.GetSpec())
		if len(spec) == 0 || !json.Valid(spec) {
			spec = json.RawMessage("{}")
		}
		list = append(list, Manifest{
			APIVersion: o.GetApiVersion(), Kind: o.GetKind(),
			Metadata: ManifestMeta{Name: o.GetName(), Namespace: o.GetNamespace(), Labels: o.GetLabels(), Annotations: o.GetAnnotations()},
			Spec:     spec,
		})
	}
	return list
}

// Status is the status translation computed for one user resource.
type Status struct {
	Cluster    string          `json:"cluster"`
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Namespace  string          `json:"namespace,omitempty"`
	Name       string          `json:"name"`
	State      string          `json:"state"`
	Errors     []string        `json:"errors,omitempty"`
	Warnings   []string        `json:"warnings,omitempty"`
	Status     json.RawMessage `json:"status"`
}

// Statuses returns the statuses of out with their state, errors and
// warnings read out. Status shapes differ by kind (a policy's destinations
// are a map, a VirtualMesh's are a list and its per-mesh states a map), so
// each status is read field by field: a field of an unexpected shape is
// left out of the summary, never the status itself. Errors and warnings of
// per-target entries (a map of ApprovalStatus: a policy's destinations, a
// VirtualMesh's or VirtualDestination's meshes) are summarised too, each
// prefixed with its target.
func Statuses(out *snapshotv1.OutputSnapshot) []Status {
	list := make([]Status, 0, len(out.GetStatuses()))
	for _, s := range out.GetStatuses() {
		raw := json.RawMessage(s.GetStatus())
		var fields map[string]json.RawMessage
		if len(raw) == 0 || json.Unmarshal(raw, &fields) != nil {
			raw = json.RawMessage("{}")
		}
		var st Status
		_ = json.Unmarshal(fields["state"], &st.State)
		_ = json.Unmarshal(fields["errors"], &st.Errors)
		_ = json.Unmarshal(fields["warnings"], &st.Warnings)
		if st.State == "" {
			st.State = "PENDING"
		}
		for _, f := range sortedKeys(fields) {
			var targets map[string]struct {
				Errors   []string `json:"errors"`
				Warnings []string `json:"warnings"`
			}
			if json.Unmarshal(fields[f], &targets) != nil {
				continue
			}
			what := targetNames[f]
			if what == "" {
				what = f
			}
			for _, key := range sortedKeys(targets) {
				for _, e := range targets[key].Errors {
					// Policies repeat their per-destination errors at the
					// top, prefixed the same way.
					if e = what + " " + key + ": " + e; !slices.Contains(st.Errors, e) {
						st.Errors = append(st.Errors, e)
					}
				}
				for _, w := range targets[key].Warnings {
					st.Warnings = append(st.Warnings, what+" "+key+": "+w)
				}
			}
		}
		st.Cluster, st.APIVersion, st.Kind, st.Namespace, st.Name, st.Status = out.GetCluster(), s.GetApiVersion(), s.GetKind(), s.GetNamespace(), s.GetName(), raw
		list = append(list, st)
	}
	return list
}

// targetNames name one entry of a status's per-target map.
var targetNames = map[string]string{"destinations": "destination", "meshes": "mesh"}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
