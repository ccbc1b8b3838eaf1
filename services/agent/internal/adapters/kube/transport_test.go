package kube

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// Writes through the wrapped transport name the replica and term in the
// API server's audit log, and a write the fence holds back never reaches
// the API server; reads are never held.
func TestWrapTransportNamesTheWriterAndFencesWrites(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east", Audit: true})
	ctx := t.Context()
	createNamespace(t, c.Clientset(), ns)
	var term atomic.Int64
	term.Store(7)
	held := errors.New("not confirmed")
	var refuse atomic.Bool
	cfg := c.RESTConfig()
	cfg.WrapTransport = WrapTransport(
		func() string {
			return "meshplane-agent/test (east/east-1; term " + strconv.FormatInt(term.Load(), 10) + ")"
		},
		func(context.Context) error {
			if refuse.Load() {
				return held
			}
			return nil
		})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dr := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"host": name},
		}}
	}
	drs := dyn.Resource(outputKinds[0].gvr).Namespace(ns)
	if _, err := drs.Create(ctx, dr("written"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refuse.Store(true)
	term.Store(8)
	if _, err := drs.Create(ctx, dr("held"), metav1.CreateOptions{}); !errors.Is(err, held) {
		t.Fatalf("create while the fence holds: %v, want the fence's error", err)
	}
	if _, err := drs.Get(ctx, "written", metav1.GetOptions{}); err != nil {
		t.Fatalf("a read while the fence holds: %v", err)
	}
	if _, err := c.Dynamic().Resource(outputKinds[0].gvr).Namespace(ns).Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the held DestinationRule: %v, want NotFound", err)
	}

	events, err := c.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	var ours []kubetest.AuditEvent
	for _, e := range events {
		if e.ObjectRef.Resource == "destinationrules" {
			ours = append(ours, e)
		}
	}
	if len(ours) != 1 || ours[0].ObjectRef.Name != "written" || ours[0].UserAgent != "meshplane-agent/test (east/east-1; term 7)" {
		t.Fatalf("audit log holds %+v, want only the create of written, by east-1 in term 7", ours)
	}
}
