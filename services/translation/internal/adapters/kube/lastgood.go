// Package kube holds translation's adapters to the management cluster: the
// last valid versions and first-seen times, kept as ResourceRecord objects, and the expected
// clusters, read from registration's KubernetesCluster mirrors.
package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/services/translation/internal/app"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ResourceRecords is the resource the last valid versions are kept in.
var ResourceRecords = schema.GroupVersionResource{Group: "translation.meshplane.dev", Version: "v1", Resource: "resourcerecords"}

// Labels of a ResourceRecord; only records with translation's labels and
// the install's are read.
const (
	FieldManager   = "meshplane-translation"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelInstall   = "meshplane.dev/install"
	LabelKind      = "meshplane.dev/kind"
	// LabelSourceCluster names the cluster whose input carries the
	// resource (not meshplane.dev/cluster, which marks the objects agents
	// own).
	LabelSourceCluster = "meshplane.dev/source-cluster"
)

// LastGood keeps one ResourceRecord per resource in one namespace, by
// server-side apply.
type LastGood struct {
	client    dynamic.Interface
	namespace string
	install   string
	log       *slog.Logger
}

var _ app.LastGoodStore = (*LastGood)(nil)

// NewLastGood keeps the records of install in namespace.
func NewLastGood(client dynamic.Interface, namespace, install string, log *slog.Logger) *LastGood {
	return &LastGood{client: client, namespace: namespace, install: install, log: log}
}

// RecordName is the name of a resource's record: the kind, and a hash of
// the cluster, namespace and name (which together may be longer than a
// name may be).
func RecordName(kind string, key domain.ObjectKey) string {
	sum := sha256.Sum256([]byte(key.Cluster + "\x00" + key.Namespace + "\x00" + key.Name))
	return strings.ToLower(kind) + "-" + hex.EncodeToString(sum[:10])
}

func (s *LastGood) selector() string {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: FieldManager, LabelInstall: s.install}).String()
}

// Load lists every record of the install, page by page. A record that does
// not read is skipped with an error joined to the result, so that one bad
// object cannot hide the others.
func (s *LastGood) Load(ctx context.Context) ([]domain.KeptVersion, error) {
	var out []domain.KeptVersion
	var bad []error
	opts := metav1.ListOptions{LabelSelector: s.selector(), Limit: 500}
	for {
		list, err := s.client.Resource(ResourceRecords).Namespace(s.namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list ResourceRecords in %s: %w", s.namespace, err)
		}
		for i := range list.Items {
			v, err := versionOf(&list.Items[i])
			if err != nil {
				bad = append(bad, fmt.Errorf("ResourceRecord %s/%s: %w", s.namespace, list.Items[i].GetName(), err))
				continue
			}
			out = append(out, v)
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			break
		}
	}
	if len(bad) > 0 {
		// Left out: their resources count as never valid until they are
		// valid again.
		s.log.Warn("some ResourceRecords do not read and are left out", "error", errors.Join(bad...))
	}
	return out, nil
}

// versionOf reads a record.
func versionOf(u *unstructured.Unstructured) (domain.KeptVersion, error) {
	raw, err := json.Marshal(u.Object["spec"])
	if err != nil {
		return domain.KeptVersion{}, err
	}
	rec := &translationv1.ResourceRecordSpec{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, rec); err != nil {
		return domain.KeptVersion{}, fmt.Errorf("spec: %w", err)
	}
	spec, ok := domain.NewSpec(rec.GetKind())
	if !ok {
		return domain.KeptVersion{}, fmt.Errorf("unknown kind %q", rec.GetKind())
	}
	v := domain.KeptVersion{
		Kind:       rec.GetKind(),
		Key:        domain.ObjectKey{Cluster: rec.GetCluster(), Namespace: rec.GetNamespace(), Name: rec.GetName()},
		Generation: rec.GetLastGoodGeneration(),
		UID:        rec.GetUid(),
	}
	switch {
	case rec.GetFirstSeen() != nil:
		if err := rec.GetFirstSeen().CheckValid(); err != nil {
			return domain.KeptVersion{}, fmt.Errorf("spec.firstSeen: %w", err)
		}
		v.FirstSeen = rec.GetFirstSeen().AsTime()
	case rec.GetLastGoodSpec() != nil:
		// Written before records held the first-seen time: the plane had
		// seen the resource by the time it wrote the record.
		v.FirstSeen = u.GetCreationTimestamp().Time
	}
	if rec.GetLastGoodSpec() == nil {
		return v, nil // never valid: the record holds its first-seen time
	}
	specJSON, err := protojson.Marshal(rec.GetLastGoodSpec())
	if err != nil {
		return domain.KeptVersion{}, err
	}
	// A newer release may have added fields: keep what this one knows.
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(specJSON, spec); err != nil {
		return domain.KeptVersion{}, fmt.Errorf("spec.lastGoodSpec: %w", err)
	}
	v.Spec = spec
	return v, nil
}

// Put writes a resource's record.
func (s *LastGood) Put(ctx context.Context, v domain.KeptVersion) error {
	rec := &translationv1.ResourceRecordSpec{
		Kind: v.Kind, Cluster: v.Key.Cluster, Namespace: v.Key.Namespace, Name: v.Key.Name, Uid: v.UID,
	}
	if !v.FirstSeen.IsZero() {
		rec.FirstSeen = timestamppb.New(v.FirstSeen)
	}
	if v.Spec != nil {
		specJSON, err := protojson.Marshal(v.Spec)
		if err != nil {
			return fmt.Errorf("encode the last valid spec of %s %s: %w", v.Kind, v.Key, err)
		}
		st := &structpb.Struct{}
		if err := protojson.Unmarshal(specJSON, st); err != nil {
			return err
		}
		rec.LastGoodGeneration, rec.LastGoodSpec = v.Generation, st
	}
	raw, err := protojson.Marshal(rec)
	if err != nil {
		return err
	}
	spec := map[string]any{}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	name := RecordName(v.Kind, v.Key)
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(ResourceRecords.GroupVersion().String())
	u.SetKind("ResourceRecord")
	u.SetName(name)
	u.SetNamespace(s.namespace)
	u.SetLabels(map[string]string{
		LabelManagedBy: FieldManager, LabelInstall: s.install, LabelKind: v.Kind, LabelSourceCluster: labelValue(v.Key.Cluster),
	})
	_, err = s.client.Resource(ResourceRecords).Namespace(s.namespace).Apply(ctx, name, u, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("apply ResourceRecord %s/%s for %s %s: %w", s.namespace, name, v.Kind, v.Key, err)
	}
	return nil
}

// labelValue is value when it is a valid label value, else empty: the
// label is for kubectl only, and the spec holds the cluster.
func labelValue(value string) string {
	if len(value) > 63 {
		return ""
	}
	return value
}

// Delete removes a resource's record; one that is gone already is fine.
func (s *LastGood) Delete(ctx context.Context, kind string, key domain.ObjectKey) error {
	name := RecordName(kind, key)
	err := s.client.Resource(ResourceRecords).Namespace(s.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ResourceRecord %s/%s for %s %s: %w", s.namespace, name, kind, key, err)
	}
	return nil
}
