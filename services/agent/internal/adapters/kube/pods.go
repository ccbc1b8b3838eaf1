package kube

import (
	"context"
	"fmt"

	"github.com/meshplane/meshplane/services/agent/discovery"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/meshplane/meshplane/services/agent/internal/domain"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// MeshPods lists and deletes pods for the rotation of an Istio CA. It
// reads the API server directly rather than discovery's cache: a rotation
// is rare, and it must see a deleted pod's replacement as the API server
// does, not as a cache that may lag.
type MeshPods struct {
	kube       kubernetes.Interface
	namespaces []string
}

var _ app.MeshPods = (*MeshPods)(nil)

// podPage bounds one List call.
const podPage = 500

// NewMeshPods returns the adapter. namespaces limits the listing; empty
// lists every namespace.
func NewMeshPods(kube kubernetes.Interface, namespaces []string) *MeshPods {
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	return &MeshPods{kube: kube, namespaces: namespaces}
}

// List returns the pods, a page at a time.
func (m *MeshPods) List(ctx context.Context) ([]domain.BouncePod, error) {
	var out []domain.BouncePod
	for _, ns := range m.namespaces {
		opts := metav1.ListOptions{Limit: podPage}
		for {
			list, err := m.kube.CoreV1().Pods(ns).List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("list pods in %q: %w", ns, err)
			}
			for i := range list.Items {
				p := &list.Items[i]
				c := discovery.Pod(p)
				out = append(out, domain.BouncePod{
					Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Labels: p.Labels,
					Controller: c.Controller, Sidecar: c.Sidecar, SidecarRevision: c.SidecarRevision,
					Istiod: c.DiscoveryImage != "", Ready: c.Ready, Terminating: p.DeletionTimestamp != nil,
					Finished:  p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed,
					CreatedAt: p.CreationTimestamp.Time,
				})
			}
			if list.Continue == "" {
				break
			}
			opts.Continue = list.Continue
		}
	}
	return out, nil
}

// Delete deletes the pod if it still has uid. Its controller makes the
// replacement; the grace period is the pod's own.
func (m *MeshPods) Delete(ctx context.Context, namespace, name, uid string) error {
	u := types.UID(uid)
	err := m.kube.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &u}})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		// The UID precondition failed: a new pod of that name (a
		// StatefulSet's) is already there.
		return nil
	}
	return err
}
