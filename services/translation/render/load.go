package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/meshcrs"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/yaml"
)

// AnnotationCluster names the cluster of a manifest that is not in a
// cluster's subdirectory; it wins over the subdirectory.
const AnnotationCluster = snapshots.LabelCluster

// Inputs are the input snapshots read from a directory, by cluster, and
// what was left out.
type Inputs struct {
	Snapshots map[string]*snapshotv1.InputSnapshot
	// Objects are, by cluster, the Kubernetes objects that are not
	// Meshplane resources (Deployments, Services, ...), for the caller to
	// run discovery on: meshctl runs the agent's. Their clusters have a
	// snapshot, empty when nothing else is in them.
	Objects map[string][]Object
	// Skipped names the objects that are not Meshplane resources and have
	// no cluster, or are the management cluster's KubernetesCluster
	// mirror, as "file: kind namespace/name".
	Skipped []string
}

// Object is a Kubernetes manifest that is not a Meshplane resource.
type Object struct {
	// Where names the file and document, for messages.
	Where string
	JSON  []byte
}

// kind is one resource kind that render reads from a manifest.
type kind struct {
	apiVersion string
	// add decodes spec into a message and appends it to the snapshot.
	add func(in *snapshotv1.InputSnapshot, md *commonv1.ObjectMeta, spec []byte) error
}

func decode[M proto.Message](spec []byte, m M) (M, error) {
	if len(spec) == 0 {
		return m, nil
	}
	return m, protojson.Unmarshal(spec, m)
}

// discoveryKinds are the discovered kinds, which agents report and only
// render reads from manifests. The user resources (VirtualMesh,
// TrafficPolicy, ...) are decoded by libs/kube/meshcrs, as the agent and
// ingest decode them from the API server.
var discoveryKinds = map[string]kind{
	"Mesh": {"discovery.meshplane.dev/v1", func(in *snapshotv1.InputSnapshot, md *commonv1.ObjectMeta, spec []byte) error {
		s, err := decode(spec, &discoveryv1.MeshSpec{})
		in.Meshes = append(in.Meshes, &discoveryv1.Mesh{Metadata: md, Spec: s})
		return err
	}},
	"Workload": {"discovery.meshplane.dev/v1", func(in *snapshotv1.InputSnapshot, md *commonv1.ObjectMeta, spec []byte) error {
		s, err := decode(spec, &discoveryv1.WorkloadSpec{})
		in.Workloads = append(in.Workloads, &discoveryv1.Workload{Metadata: md, Spec: s})
		return err
	}},
	"Destination": {"discovery.meshplane.dev/v1", func(in *snapshotv1.InputSnapshot, md *commonv1.ObjectMeta, spec []byte) error {
		s, err := decode(spec, &discoveryv1.DestinationSpec{})
		in.Destinations = append(in.Destinations, &discoveryv1.Destination{Metadata: md, Spec: s})
		return err
	}},
}

// lookup finds a kind render reads by its name.
func lookup(name string) (kind, bool) {
	for _, k := range meshcrs.Kinds() {
		if k.Kind == name {
			return kind{apiVersion: k.APIVersion(), add: func(in *snapshotv1.InputSnapshot, md *commonv1.ObjectMeta, spec []byte) error {
				var r meshcrs.Resources
				if err := k.DecodeSpec(&r, md, spec); err != nil {
					return err
				}
				r.AddTo(in)
				return nil
			}}, true
		}
	}
	k, ok := discoveryKinds[name]
	return k, ok
}

// Kinds lists the manifest kinds render reads, sorted.
func Kinds() []string {
	out := make([]string, 0, len(discoveryKinds)+len(meshcrs.Kinds()))
	for k := range discoveryKinds {
		out = append(out, k)
	}
	for _, k := range meshcrs.Kinds() {
		out = append(out, k.Kind)
	}
	slices.Sort(out)
	return out
}

// LoadDir reads every .yaml, .yml and .json file under dir, skipping
// names that start with a dot. A file holds either
//
//   - a list of input snapshots in protojson field names, each naming its
//     cluster (the format of services/translation/testdata/golden/*/input.yaml),
//     or
//   - Kubernetes manifests of Meshplane resources (VirtualMesh,
//     TrafficPolicy, AccessPolicy, VirtualDestination, Settings) and
//     discovered objects (Mesh, Workload, Destination), separated by "---",
//     or in a kind: List.
//
// A manifest belongs to the cluster named by its meshplane.dev/cluster
// annotation, else to the cluster named by the first directory under dir
// that holds the file (DIR/east/policies.yaml is in cluster east). The
// management cluster is named by the install ("meshplane" by default).
// Other kinds are skipped and listed in Inputs.Skipped.
func LoadDir(dir string) (*Inputs, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	l := &loader{in: &Inputs{Snapshots: map[string]*snapshotv1.InputSnapshot{}}}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !slices.Contains([]string{".yaml", ".yml", ".json"}, filepath.Ext(path)) {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		cluster := ""
		if parts := strings.Split(filepath.ToSlash(rel), "/"); len(parts) > 1 {
			cluster = parts[0]
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return l.file(path, cluster, data)
	})
	if err != nil {
		return nil, err
	}
	if len(l.in.Snapshots) == 0 {
		return nil, fmt.Errorf("%s: no Meshplane resources or input snapshots found (want .yaml, .yml or .json files; see `meshctl render --help`)", dir)
	}
	return l.in, nil
}

// Load reads one file's content as LoadDir does; cluster is the cluster of
// its manifests that carry no annotation ("" for none).
func Load(name, cluster string, data []byte, into *Inputs) error {
	if into.Snapshots == nil {
		into.Snapshots = map[string]*snapshotv1.InputSnapshot{}
	}
	return (&loader{in: into}).file(name, cluster, data)
}

type loader struct{ in *Inputs }

func (l *loader) snapshot(cluster string) *snapshotv1.InputSnapshot {
	s := l.in.Snapshots[cluster]
	if s == nil {
		s = &snapshotv1.InputSnapshot{Cluster: cluster}
		l.in.Snapshots[cluster] = s
	}
	return s
}

// documents splits a YAML stream at its "---" lines, returning each
// document with the line it starts on.
func documents(data []byte) (docs [][]byte, lines []int) {
	start, startLine := 0, 1
	line := 1
	for i := 0; i <= len(data); i++ {
		if i < len(data) && data[i] != '\n' {
			continue
		}
		lineStart := bytes.LastIndexByte(data[:i], '\n') + 1
		text := strings.TrimRight(string(data[lineStart:i]), " \t\r")
		if text == "---" || strings.HasPrefix(text, "--- ") || strings.HasPrefix(text, "---\t") {
			docs, lines = append(docs, data[start:lineStart]), append(lines, startLine)
			start, startLine = min(i+1, len(data)), line+1
		}
		line++
	}
	docs, lines = append(docs, data[start:]), append(lines, startLine)
	return docs, lines
}

func (l *loader) file(name, cluster string, data []byte) error {
	docs, lines := documents(data)
	for i, doc := range docs {
		where := name
		if len(docs) > 1 {
			where = fmt.Sprintf("%s:%d (document %d)", name, lines[i], i+1)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return fmt.Errorf("%s: not YAML or JSON: %w", where, err)
		}
		js = bytes.TrimSpace(js)
		switch {
		case len(js) == 0 || string(js) == "null":
			continue
		case js[0] == '[':
			if err := l.snapshotList(where, cluster, js); err != nil {
				return err
			}
		case js[0] == '{':
			if err := l.object(where, cluster, js); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: want a Kubernetes manifest or a list of input snapshots, got %.40s", where, js)
		}
	}
	return nil
}

// snapshotList reads a list of input snapshots, as the golden tests do.
func (l *loader) snapshotList(where, dirCluster string, js []byte) error {
	var items []json.RawMessage
	if err := json.Unmarshal(js, &items); err != nil {
		return fmt.Errorf("%s: want a list of input snapshots: %w", where, err)
	}
	for i, item := range items {
		in := &snapshotv1.InputSnapshot{}
		if err := protojson.Unmarshal(item, in); err != nil {
			return fmt.Errorf("%s: input snapshot %d: %s", where, i, describe(item, "", err))
		}
		cluster := in.GetCluster()
		switch {
		case cluster == "" && dirCluster == "":
			return fmt.Errorf("%s: input snapshot %d: field cluster is empty; name the cluster, or put the file in DIR/<cluster>/", where, i)
		case cluster == "":
			cluster = dirCluster
		case dirCluster != "" && cluster != dirCluster:
			return fmt.Errorf("%s: input snapshot %d: field cluster is %q but the file is in the directory of cluster %q", where, i, cluster, dirCluster)
		}
		s := l.snapshot(cluster)
		proto.Merge(s, in)
		s.Cluster = cluster
	}
	return nil
}

type manifest struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
	Metadata   struct {
		Name              string            `json:"name"`
		Namespace         string            `json:"namespace"`
		Labels            map[string]string `json:"labels"`
		Annotations       map[string]string `json:"annotations"`
		Generation        int64             `json:"generation"`
		UID               string            `json:"uid"`
		CreationTimestamp string            `json:"creationTimestamp"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

func (l *loader) object(where, dirCluster string, js []byte) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(js, &probe); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if _, ok := probe["kind"]; !ok {
		if _, ok := probe["cluster"]; ok {
			return l.snapshotList(where, dirCluster, append(append([]byte("["), js...), ']'))
		}
		return fmt.Errorf("%s: field kind is missing: want a Kubernetes manifest of a Meshplane resource (%s)", where, strings.Join(Kinds(), ", "))
	}
	var m manifest
	if err := json.Unmarshal(js, &m); err != nil {
		return fmt.Errorf("%s: %s", where, describeJSON(js, err))
	}
	if m.Kind == "List" || strings.HasSuffix(m.Kind, "List") && m.Items != nil {
		for i, item := range m.Items {
			if err := l.object(fmt.Sprintf("%s: items[%d]", where, i), dirCluster, item); err != nil {
				return err
			}
		}
		return nil
	}
	id := fmt.Sprintf("%s %s", m.Kind, m.Metadata.Name)
	if m.Metadata.Namespace != "" {
		id = fmt.Sprintf("%s %s/%s", m.Kind, m.Metadata.Namespace, m.Metadata.Name)
	}
	k, ok := lookup(m.Kind)
	group, _, _ := strings.Cut(m.APIVersion, "/")
	cluster := m.Metadata.Annotations[AnnotationCluster]
	if cluster == "" {
		cluster = dirCluster
	}
	switch {
	case !strings.HasSuffix(group, "meshplane.dev") && cluster != "":
		// A Deployment, Service, ... of a workload cluster: an input of
		// discovery.
		if l.in.Objects == nil {
			l.in.Objects = map[string][]Object{}
		}
		l.in.Objects[cluster] = append(l.in.Objects[cluster], Object{Where: where, JSON: js})
		l.snapshot(cluster)
		return nil
	case !strings.HasSuffix(group, "meshplane.dev") || group == "multicluster.meshplane.dev":
		// Not an input of translation: the KubernetesCluster mirror, or
		// an object of no cluster.
		l.in.Skipped = append(l.in.Skipped, fmt.Sprintf("%s: %s (%s)", where, id, m.APIVersion))
		return nil
	case !ok:
		return fmt.Errorf("%s: %s: field kind: %q is not a Meshplane resource that render reads; want one of %s", where, id, m.Kind, strings.Join(Kinds(), ", "))
	case m.APIVersion != k.apiVersion:
		return fmt.Errorf("%s: %s: field apiVersion is %q; want %q", where, id, m.APIVersion, k.apiVersion)
	}
	if m.Metadata.Name == "" {
		return fmt.Errorf("%s: %s: field metadata.name is empty", where, m.Kind)
	}
	if cluster == "" {
		return fmt.Errorf("%s: %s: no cluster: put the file in DIR/<cluster>/ or set the annotation %s", where, id, AnnotationCluster)
	}
	md := &commonv1.ObjectMeta{
		Name: m.Metadata.Name, Namespace: m.Metadata.Namespace, Cluster: cluster,
		Labels: m.Metadata.Labels, Generation: m.Metadata.Generation, Uid: m.Metadata.UID,
	}
	if ann := m.Metadata.Annotations; len(ann) > 0 {
		md.Annotations = ann
	}
	if ts := m.Metadata.CreationTimestamp; ts != "" {
		t, err := time.Parse(time.RFC3339, ts)
		if err != nil {
			return fmt.Errorf("%s: %s: field metadata.creationTimestamp: %w", where, id, err)
		}
		md.CreationTimestamp = timestamppb.New(t)
	}
	spec := []byte(m.Spec)
	if string(spec) == "null" {
		spec = nil
	}
	if len(spec) > 0 && spec[0] != '{' {
		return fmt.Errorf("%s: %s: field spec must be an object", where, id)
	}
	if err := k.add(l.snapshot(cluster), md, spec); err != nil {
		return fmt.Errorf("%s: %s: %s", where, id, describe(spec, "spec", err))
	}
	return nil
}

var errPosition = regexp.MustCompile(`\(line (\d+):(\d+)\)`)

// describe turns a protojson error into one that names the field: protojson
// gives the position, and the JSON here is compact, on one line.
func describe(js []byte, prefix string, err error) string {
	// protojson varies its spacing on purpose (a no-break space at random),
	// so that no one matches its messages; normalise it for people.
	msg := strings.ReplaceAll(err.Error(), "\u00a0", " ")
	msg = strings.TrimPrefix(errPosition.ReplaceAllString(msg, ""), "proto: ")
	msg = strings.TrimPrefix(strings.TrimSpace(strings.ReplaceAll(msg, "  ", " ")), ": ")
	return "field " + dotted(prefix, meshcrs.FieldAt(js, err)) + ": " + msg
}

func dotted(prefix, path string) string {
	switch {
	case prefix == "" && path == "":
		return "(top level)"
	case prefix == "":
		return path
	case path == "":
		return prefix
	case strings.HasPrefix(path, "["):
		return prefix + path
	}
	return prefix + "." + path
}

func describeJSON(js []byte, err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("field %s: want %s, got %s", te.Field, te.Type, te.Value)
	}
	return err.Error()
}
