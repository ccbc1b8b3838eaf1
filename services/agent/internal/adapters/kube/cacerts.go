package kube

import (
	"context"
	"fmt"
	"maps"

	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CASecrets keeps istiod's plug-in CA Secrets ("cacerts") with the same
// ownership labels as every other object the agent writes. Garbage
// collection does not list Secrets, so a cacerts Secret outlives the
// IssuedCertificate that asked for it.
type CASecrets struct {
	kube    kubernetes.Interface
	install string
	cluster string
}

var _ app.CASecretStore = (*CASecrets)(nil)

// NewCASecrets returns the store for this install and cluster.
func NewCASecrets(kube kubernetes.Interface, install, cluster string) *CASecrets {
	return &CASecrets{kube: kube, install: install, cluster: cluster}
}

func (s *CASecrets) owns(l map[string]string) bool {
	return l[snapshots.LabelManagedBy] == s.install && l[snapshots.LabelCluster] == s.cluster
}

// Get reads a Secret.
func (s *CASecrets) Get(ctx context.Context, namespace, name string) (app.StoredSecret, error) {
	sec, err := s.kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return app.StoredSecret{}, fmt.Errorf("%w: %s/%s", app.ErrSecretNotFound, namespace, name)
	}
	if err != nil {
		return app.StoredSecret{}, err
	}
	return app.StoredSecret{
		Owned:           s.owns(sec.GetLabels()),
		ResourceVersion: sec.GetResourceVersion(),
		Data:            sec.Data,
		Annotations:     sec.GetAnnotations(),
	}, nil
}

func (s *CASecrets) labels() map[string]string {
	return map[string]string{snapshots.LabelManagedBy: s.install, snapshots.LabelCluster: s.cluster}
}

// Create creates the Secret; one that exists already is a conflict.
func (s *CASecrets) Create(ctx context.Context, c app.CASecret) error {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name, Labels: s.labels(), Annotations: maps.Clone(c.Annotations)},
		Type:       corev1.SecretTypeOpaque,
		Data:       c.Data,
	}
	_, err := s.kube.CoreV1().Secrets(c.Namespace).Create(ctx, sec, metav1.CreateOptions{FieldManager: snapshots.FieldManager})
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%w: Secret %s/%s was created by someone else meanwhile", app.ErrConflict, c.Namespace, c.Name)
	}
	return err
}

// Update replaces the data of an owned Secret, only at the resource version
// that was read: the API server refuses the write if anyone changed the
// Secret since, for instance a user who replaced it with their own.
func (s *CASecrets) Update(ctx context.Context, c app.CASecret, resourceVersion string) error {
	client := s.kube.CoreV1().Secrets(c.Namespace)
	sec, err := client.Get(ctx, c.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: Secret %s/%s is gone", app.ErrSecretChanged, c.Namespace, c.Name)
	}
	if err != nil {
		return err
	}
	if !s.owns(sec.GetLabels()) {
		return fmt.Errorf("%w: Secret %s/%s has no %s=%s label", app.ErrConflict, c.Namespace, c.Name, snapshots.LabelManagedBy, s.install)
	}
	if sec.GetResourceVersion() != resourceVersion {
		return fmt.Errorf("%w: Secret %s/%s", app.ErrSecretChanged, c.Namespace, c.Name)
	}
	annotations := maps.Clone(sec.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	maps.Copy(annotations, c.Annotations)
	sec.SetAnnotations(annotations)
	sec.Data = c.Data
	_, err = client.Update(ctx, sec, metav1.UpdateOptions{FieldManager: snapshots.FieldManager})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%w: Secret %s/%s: %v", app.ErrSecretChanged, c.Namespace, c.Name, err)
	}
	return err
}
