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

// statusBlock is the part of every status that render summarises: the
// ResourceStatus shape of policies, whose destinations carry warnings.
type statusBlock struct {
	State        string   `json:"state"`
	Errors       []string `json:"errors"`
	Warnings     []string `json:"warnings"`
	Destinations map[string]struct {
		Warnings []string `json:"warnings"`
	} `json:"destinations"`
}

// Statuses returns the statuses of out with their state, errors and
// warnings read out.
func Statuses(out *snapshotv1.OutputSnapshot) []Status {
	list := make([]Status, 0, len(out.GetStatuses()))
	for _, s := range out.GetStatuses() {
		raw := json.RawMessage(s.GetStatus())
		var b statusBlock
		if len(raw) == 0 || json.Unmarshal(raw, &b) != nil {
			raw = json.RawMessage("{}")
		}
		if b.State == "" {
			b.State = "PENDING"
		}
		warnings := slices.Clone(b.Warnings)
		for _, key := range sortedKeys(b.Destinations) {
			for _, w := range b.Destinations[key].Warnings {
				warnings = append(warnings, "destination "+key+": "+w)
			}
		}
		list = append(list, Status{
			Cluster: out.GetCluster(), APIVersion: s.GetApiVersion(), Kind: s.GetKind(), Namespace: s.GetNamespace(), Name: s.GetName(),
			State: b.State, Errors: b.Errors, Warnings: warnings, Status: raw,
		})
	}
	return list
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
