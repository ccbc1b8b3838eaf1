package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// FieldManager is the server-side apply field manager of ApplyYAML.
const FieldManager = "meshplane-test"

// noMatchWait bounds how long ApplyYAML waits for discovery to learn a kind
// it does not know yet (typically one whose CRD was just created).
const noMatchWait = 15 * time.Second

// DecodeYAML splits multi-document YAML (or a JSON object) into objects.
// Empty documents and documents holding only comments are dropped. A
// document of kind List contributes its items.
func DecodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		j = bytes.TrimSpace(j)
		if len(j) == 0 || bytes.Equal(j, []byte("null")) || bytes.Equal(j, []byte("{}")) {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if obj.IsList() {
			err := obj.EachListItem(func(o runtime.Object) error {
				objs = append(objs, o.(*unstructured.Unstructured))
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", i, err)
			}
			continue
		}
		objs = append(objs, obj)
	}
}

// ApplyYAML server-side applies every object in multi-document YAML, in
// order, with field manager "meshplane-test" and force (the test owns what
// it applies). mapper maps kinds to resources; when it is a
// meta.ResettableRESTMapper (e.g. restmapper.NewDeferredDiscoveryRESTMapper,
// or Cluster.Mapper) an unknown kind resets it and is retried for a while,
// so YAML may create a CRD and then use it. Namespaced objects without a
// namespace go to "default".
func ApplyYAML(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, yamlData []byte) error {
	objs, err := DecodeYAML(yamlData)
	if err != nil {
		return fmt.Errorf("kubetest: apply: %w", err)
	}
	if err := applyObjects(ctx, dyn, mapper, objs); err != nil {
		return fmt.Errorf("kubetest: apply: %w", err)
	}
	return nil
}

func applyObjects(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := restMapping(ctx, mapper, obj)
		if err != nil {
			return fmt.Errorf("%s %q: %w", gvk.Kind, obj.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				obj.SetNamespace("default")
			}
			ri = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		} else {
			obj.SetNamespace("")
		}
		if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("%s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

func restMapping(ctx context.Context, mapper meta.RESTMapper, obj *unstructured.Unstructured) (*meta.RESTMapping, error) {
	gvk := obj.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("object without apiVersion or kind")
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil || !meta.IsNoMatchError(err) {
		return mapping, err
	}
	resettable, ok := mapper.(meta.ResettableRESTMapper)
	if !ok {
		return nil, err
	}
	// Discovery may not know the kind yet: its CRD can be new.
	werr := WaitFor(ctx, noMatchWait, func(context.Context) (bool, error) {
		resettable.Reset()
		mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil && meta.IsNoMatchError(err) {
			return false, nil
		}
		return true, err
	})
	if err != nil {
		return nil, err
	}
	if werr != nil {
		return nil, werr
	}
	return mapping, nil
}
