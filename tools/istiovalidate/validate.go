// Package istiovalidate runs Istio's own checks on Istio objects, offline:
//
//   - Validator sends each object through istiod's validating webhook
//     (istio.io/istio/pkg/webhooks/validation/server, which calls the
//     ValidateX functions of istio.io/istio/pkg/config/validation through
//     each kind's schema in istio.io/istio/pkg/config/schema/collections),
//     in process, and reports what the webhook rejects or warns on. It also
//     decodes each spec strictly, because istiod drops fields it does not
//     know without a word;
//   - Analyze runs Istio's analyzers (istio.io/istio/pkg/config/analysis,
//     the code of `istioctl analyze`) over a set of objects, with the
//     Kubernetes objects of the cluster they are meant for.
//
// The module is outside go.work, so that no service's or meshctl's go.mod
// takes on istio.io/istio: `meshctl render --validate` runs the
// meshplane-istio-validate command built from cmd/ here.
package istiovalidate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime/debug"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubeyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/collection"
	"istio.io/istio/pkg/config/schema/collections"
	"istio.io/istio/pkg/config/schema/resource"
	"istio.io/istio/pkg/log"
	"istio.io/istio/pkg/webhooks/validation/server"
)

// ClusterLabel is the label naming the cluster a Meshplane object is for.
const ClusterLabel = "meshplane.dev/cluster"

// DomainSuffix is the DNS suffix istiod is given by default, and the one
// the webhook validates against.
const DomainSuffix = "cluster.local"

// Object is one Kubernetes manifest.
type Object struct {
	// JSON is the whole manifest, as read.
	JSON json.RawMessage
	Ref
}

// Ref names an object.
type Ref struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Cluster is the object's meshplane.dev/cluster label, if any.
	Cluster string `json:"cluster,omitempty"`
	// Source says where the object was read from: a file and document.
	Source string `json:"source,omitempty"`
}

// String is "Kind namespace/name", with the cluster when known.
func (r Ref) String() string {
	s := r.Kind + " " + r.Name
	if r.Namespace != "" {
		s = r.Kind + " " + r.Namespace + "/" + r.Name
	}
	if r.Cluster != "" {
		s += " in cluster " + r.Cluster
	}
	return s
}

// Level is how bad a finding is, with Istio's names.
type Level string

// The levels: Error is a rejection (the webhook denies the object, or an
// analyzer reports an error), Warning and Info are what they say.
const (
	Error   Level = "Error"
	Warning Level = "Warning"
	Info    Level = "Info"
)

// Finding is one thing Istio says about an object.
type Finding struct {
	Object Ref   `json:"object"`
	Level  Level `json:"level"`
	// Rule names the check: RuleWebhook, RuleStrictDecode, or an
	// analyzer's message code and name ("IST0101 ReferencedResourceNotFound").
	Rule string `json:"rule"`
	// Message is Istio's own message.
	Message string `json:"message"`
}

// The rules of Validator's findings.
const (
	// RuleWebhook is istiod's validating webhook (its ValidateX functions).
	RuleWebhook = "istiod validation webhook"
	// RuleStrictDecode is a field of the spec that Istio's schema does not
	// have: the webhook and istiod decode leniently and drop it.
	RuleStrictDecode = "unknown field (istiod ignores it)"
)

// String is one line per finding: "Error: VirtualService default/x in
// cluster east: istiod validation webhook: <message>".
func (f Finding) String() string {
	return fmt.Sprintf("%s: %s: %s: %s", f.Level, f.Object, f.Rule, f.Message)
}

// Validator validates objects with istiod's validating webhook, served
// in process.
type Validator struct {
	handler http.Handler
	schemas collection.Schemas
}

// NewValidator returns a Validator with the schemas istiod's webhook uses
// (collections.PilotGatewayAPI) and the default domain suffix. It turns
// Istio's own logging off: what the webhook logs is what it returns.
func NewValidator() (*Validator, error) {
	Quiet()
	mux := http.NewServeMux()
	schemas := collections.PilotGatewayAPI()
	if _, err := server.New(server.Options{Schemas: schemas, DomainSuffix: DomainSuffix, Mux: mux}); err != nil {
		return nil, fmt.Errorf("start istiod's validation webhook: %w", err)
	}
	return &Validator{handler: mux, schemas: schemas}, nil
}

// Quiet turns off the output of every Istio log scope.
func Quiet() {
	for _, s := range log.Scopes() {
		s.SetOutputLevel(log.NoneLevel)
	}
}

// Validate returns what istiod's webhook says about o on create: a
// rejection, its warnings, and any spec field that Istio's schema does not
// know. An error means the webhook could not be asked.
func (v *Validator) Validate(o Object) ([]Finding, error) {
	resp, err := v.review(o)
	if err != nil {
		return nil, err
	}
	var out []Finding
	if !resp.Allowed {
		msg := "denied"
		if resp.Result != nil && resp.Result.Message != "" {
			msg = resp.Result.Message
		}
		out = append(out, Finding{Object: o.Ref, Level: Error, Rule: RuleWebhook, Message: oneLine(msg)})
	}
	for _, w := range resp.Warnings {
		out = append(out, Finding{Object: o.Ref, Level: Warning, Rule: RuleWebhook, Message: oneLine(w)})
	}
	if resp.Allowed {
		if err := v.strictDecode(o); err != nil {
			out = append(out, Finding{Object: o.Ref, Level: Error, Rule: RuleStrictDecode, Message: oneLine(err.Error())})
		}
	}
	return out, nil
}

// review sends o to the webhook as the API server would on a create.
func (v *Validator) review(o Object) (*admissionv1.AdmissionResponse, error) {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("%s: apiVersion: %w", o.Ref, err)
	}
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("meshplane-istio-validate"),
			Kind:      metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: o.Kind},
			Resource:  metav1.GroupVersionResource{Group: gv.Group, Version: gv.Version, Resource: strings.ToLower(o.Kind) + "s"},
			Name:      o.Name,
			Namespace: o.Namespace,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: o.JSON},
		},
	}
	body, err := json.Marshal(ar)
	if err != nil {
		return nil, err
	}
	req := httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	v.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("%s: the webhook answered %d: %s", o.Ref, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Response == nil {
		return nil, fmt.Errorf("%s: the webhook's answer does not decode (%v): %s", o.Ref, err, rec.Body.String())
	}
	return got.Response, nil
}

// strictDecode decodes o's spec into its Istio type, refusing unknown
// fields.
func (v *Validator) strictDecode(o Object) error {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return err
	}
	s, ok := v.schemas.FindByGroupKind(config.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: o.Kind})
	if !ok {
		return nil // the webhook has said so
	}
	var m struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(o.JSON, &m); err != nil || len(m.Spec) == 0 {
		return err
	}
	inst, err := s.NewInstance()
	if err != nil {
		return err
	}
	return config.ApplyJSONStrict(inst, string(m.Spec))
}

// Schema returns the Istio schema of o's kind, if istiod's webhook knows it.
func (v *Validator) Schema(o Ref) (resource.Schema, bool) {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return nil, false
	}
	return v.schemas.FindByGroupKind(config.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: o.Kind})
}

// ValidateAll validates every object and returns the findings in order.
func (v *Validator) ValidateAll(objs []Object) ([]Finding, error) {
	var out []Finding
	for _, o := range objs {
		f, err := v.Validate(o)
		if err != nil {
			return out, err
		}
		out = append(out, f...)
	}
	return out, nil
}

// ReadManifests reads a stream of Kubernetes manifests in YAML or JSON,
// separated by "---", as `meshctl render` prints them; a kind: List is
// read item by item, and documents holding nothing but comments are
// skipped. name is the stream's name, for the objects' Source.
func ReadManifests(name string, r io.Reader) ([]Object, error) {
	rd := kubeyaml.NewYAMLReader(bufio.NewReaderSize(r, 1<<20))
	var out []Object
	for doc := 1; ; doc++ {
		raw, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue
		}
		objs, err := parseManifest(js, fmt.Sprintf("%s: document %d", name, doc))
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
}

// parseManifest reads one manifest, or the items of a List.
func parseManifest(js []byte, where string) ([]Object, error) {
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &m); err != nil {
		return nil, fmt.Errorf("%s: not a Kubernetes manifest: %w", where, err)
	}
	if m.Kind == "List" || (strings.HasSuffix(m.Kind, "List") && m.Items != nil) {
		var out []Object
		for i, item := range m.Items {
			objs, err := parseManifest(item, fmt.Sprintf("%s, item %d", where, i+1))
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
		return out, nil
	}
	if m.APIVersion == "" || m.Kind == "" || m.Metadata.Name == "" {
		return nil, fmt.Errorf("%s: not a Kubernetes manifest: apiVersion, kind and metadata.name are required", where)
	}
	return []Object{{JSON: js, Ref: Ref{
		APIVersion: m.APIVersion, Kind: m.Kind, Namespace: m.Metadata.Namespace, Name: m.Metadata.Name,
		Cluster: m.Metadata.Labels[ClusterLabel], Source: where,
	}}}, nil
}

// NewObject makes an Object from its parts, as a manifest.
func NewObject(apiVersion, kind, namespace, name string, labels, annotations map[string]string, spec json.RawMessage) (Object, error) {
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	m := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
	if len(spec) > 0 {
		m["spec"] = spec
	}
	js, err := json.Marshal(m)
	if err != nil {
		return Object{}, fmt.Errorf("%s %s/%s: %w", kind, namespace, name, err)
	}
	return Object{JSON: js, Ref: Ref{APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name, Cluster: labels[ClusterLabel]}}, nil
}

// IstioVersion is the version of the istio.io/istio module this binary
// was built with, or "" when unknown.
func IstioVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == "istio.io/istio" {
			return d.Version
		}
	}
	return ""
}

// oneLine folds the multi-line lists Istio's multierror prints
// ("configuration is invalid: 2 errors occurred:\n\t* a\n\t* b") into
// "configuration is invalid: a; b".
func oneLine(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "* ")
		if m := errorsOccurred.FindStringIndex(line); m != nil {
			line = strings.TrimSpace(line[:m[0]])
		}
		if line == "" {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

var errorsOccurred = regexp.MustCompile(`\d+ errors? occurred:$`)
