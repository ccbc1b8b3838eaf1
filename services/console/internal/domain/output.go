package domain

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"go.yaml.in/yaml/v3"
)

// RenderYAML writes an output snapshot's objects as Kubernetes manifests,
// "---"-separated, sorted by kind, namespace and name, so that two
// versions diff line by line.
func RenderYAML(out *snapshotv1.OutputSnapshot) (string, error) {
	objs := slices.Clone(out.GetObjects())
	slices.SortFunc(objs, func(a, b *snapshotv1.Object) int {
		return cmp.Or(cmp.Compare(a.GetKind(), b.GetKind()), cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	var b strings.Builder
	for i, o := range objs {
		doc, err := objectYAML(o)
		if err != nil {
			return "", fmt.Errorf("render %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(doc)
	}
	return b.String(), nil
}

func objectYAML(o *snapshotv1.Object) ([]byte, error) {
	meta := map[string]any{"name": o.GetName()}
	if o.GetNamespace() != "" {
		meta["namespace"] = o.GetNamespace()
	}
	if len(o.GetLabels()) > 0 {
		meta["labels"] = o.GetLabels()
	}
	if len(o.GetAnnotations()) > 0 {
		meta["annotations"] = o.GetAnnotations()
	}
	m := map[string]any{"apiVersion": o.GetApiVersion(), "kind": o.GetKind(), "metadata": meta}
	if len(o.GetSpec()) > 0 {
		var spec any
		if err := json.Unmarshal(o.GetSpec(), &spec); err != nil {
			return nil, fmt.Errorf("spec: %w", err)
		}
		m["spec"] = spec
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// History keeps the last few output snapshots of one cluster, newest
// first, so that a user can diff what changed since the console started.
type History struct {
	max      int
	versions []*snapshotv1.OutputSnapshot
}

// NewHistory keeps up to n versions (at least one).
func NewHistory(n int) *History { return &History{max: max(n, 1)} }

// Add records out unless it is the newest already; the oldest beyond the
// bound is dropped. It reports whether out was new.
func (h *History) Add(out *snapshotv1.OutputSnapshot) bool {
	if len(h.versions) > 0 && h.versions[0].GetVersion() == out.GetVersion() {
		return false
	}
	h.versions = slices.Insert(h.versions, 0, out)
	if len(h.versions) > h.max {
		h.versions = h.versions[:h.max]
	}
	return true
}

// Get returns the version named, or the newest for "".
func (h *History) Get(version string) (*snapshotv1.OutputSnapshot, bool) {
	for _, v := range h.versions {
		if version == "" || v.GetVersion() == version {
			return v, true
		}
	}
	return nil, false
}

// Versions lists the versions held, newest first.
func (h *History) Versions() []string {
	out := make([]string, 0, len(h.versions))
	for _, v := range h.versions {
		out = append(out, v.GetVersion())
	}
	return out
}
