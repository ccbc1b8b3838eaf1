// Package kube is registration's management-cluster adapter (client-go): the
// CA and the generated VirtualMesh roots kept in Secrets, users' VirtualMesh
// roots read from Secrets, and the KubernetesCluster mirror of the cluster
// records. Registration never reaches into workload clusters.
package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// FieldManager names registration's writes in managedFields.
const FieldManager = "meshplane-registration"

// Labels on the objects registration writes.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelInstall   = "meshplane.dev/install"
	LabelPurpose   = "meshplane.dev/purpose"
)

// Keys of a VirtualMesh root Secret, generated or the user's.
const (
	RootCertKey = "root-cert.pem"
	RootKeyKey  = "key.pem"
)

// Keys of the CA Secret: the layout of --ca-dir. A user's own PKI gives
// root.crt with intermediate.crt and intermediate.key, or root.crt with
// root.key (a new intermediate is made from it at every start).
const (
	CARootCertKey         = pki.RootCertFile
	CARootKeyKey          = "root.key"
	CAIntermediateCertKey = pki.IntermediateCertFile
	CAIntermediateKeyKey  = pki.IntermediateKeyFile
)

// createOrGet creates sec, or returns the Secret already there: of racing
// replicas, the first one's Secret wins and the others read it back.
func createOrGet(ctx context.Context, c kubernetes.Interface, sec *corev1.Secret) (*corev1.Secret, bool, error) {
	got, err := c.CoreV1().Secrets(sec.Namespace).Create(ctx, sec, metav1.CreateOptions{FieldManager: FieldManager})
	if err == nil {
		return got, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, false, fmt.Errorf("create Secret %s/%s: %w", sec.Namespace, sec.Name, err)
	}
	got, err = c.CoreV1().Secrets(sec.Namespace).Get(ctx, sec.Name, metav1.GetOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("read Secret %s/%s back: %w", sec.Namespace, sec.Name, err)
	}
	return got, false, nil
}

// Roots keeps generated VirtualMesh roots as Secrets "meshplane-<key>" in
// one namespace, shared by every registration replica.
type Roots struct {
	client    kubernetes.Interface
	namespace string
	install   string
}

var _ app.RootStore = (*Roots)(nil)

// NewRoots keeps roots in namespace.
func NewRoots(client kubernetes.Interface, namespace, install string) *Roots {
	return &Roots{client: client, namespace: namespace, install: install}
}

// SecretName is the Secret that holds the root kept under key.
func SecretName(key string) string { return "meshplane-" + key }

func (r *Roots) LoadOrCreateRoot(ctx context.Context, key string, create func() (domain.RootCA, error)) (domain.RootCA, bool, error) {
	if err := pki.ValidateName(key); err != nil {
		return domain.RootCA{}, false, fmt.Errorf("root key: %w", err)
	}
	name := SecretName(key)
	sec, err := r.client.CoreV1().Secrets(r.namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		root, err := decodeRoot(sec)
		return root, false, err
	case !apierrors.IsNotFound(err):
		return domain.RootCA{}, false, fmt.Errorf("read Secret %s/%s: %w", r.namespace, name, err)
	}
	root, err := create()
	if err != nil {
		return domain.RootCA{}, false, err
	}
	keyPEM, err := pki.EncodeKey(root.Key)
	if err != nil {
		return domain.RootCA{}, false, err
	}
	sec = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.namespace, Labels: map[string]string{
			LabelManagedBy: FieldManager, LabelInstall: r.install, LabelPurpose: "virtual-mesh-root",
		}, Annotations: map[string]string{"meshplane.dev/root-expires": root.Cert.NotAfter.UTC().Format(time.RFC3339)}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{RootCertKey: pki.EncodeCertificates(root.Cert), RootKeyKey: keyPEM},
	}
	got, created, err := createOrGet(ctx, r.client, sec)
	if err != nil {
		return domain.RootCA{}, false, err
	}
	if created {
		return root, true, nil
	}
	root, err = decodeRoot(got)
	return root, false, err
}

// UserRoots reads the roots users supply for VirtualMeshes.
type UserRoots struct {
	client kubernetes.Interface
}

var _ app.UserRoots = (*UserRoots)(nil)

// NewUserRoots reads Secrets with client.
func NewUserRoots(client kubernetes.Interface) *UserRoots { return &UserRoots{client: client} }

func (u *UserRoots) UserRoot(ctx context.Context, ref domain.ObjectRef) (domain.RootCA, error) {
	sec, err := u.client.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return domain.RootCA{}, app.ErrNotFound
	}
	if err != nil {
		return domain.RootCA{}, fmt.Errorf("read Secret: %w", err)
	}
	return decodeRoot(sec)
}

// decodeRoot reads root-cert.pem and key.pem. Errors never quote the key.
func decodeRoot(sec *corev1.Secret) (domain.RootCA, error) {
	certPEM, keyPEM := sec.Data[RootCertKey], sec.Data[RootKeyKey]
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return domain.RootCA{}, fmt.Errorf("secret %s/%s must hold %s and %s", sec.Namespace, sec.Name, RootCertKey, RootKeyKey)
	}
	certs, err := pki.ParseCertificates(certPEM)
	if err != nil {
		return domain.RootCA{}, fmt.Errorf("secret %s/%s: %s: %w", sec.Namespace, sec.Name, RootCertKey, err)
	}
	key, err := pki.ParseKey(keyPEM)
	if err != nil {
		return domain.RootCA{}, fmt.Errorf("secret %s/%s: %s: %w", sec.Namespace, sec.Name, RootKeyKey, err)
	}
	return domain.RootCA{Cert: certs[0], Key: key}, nil
}

// CASecret keeps registration's own CA in a Secret.
type CASecret struct {
	client          kubernetes.Interface
	namespace, name string
	install         string
}

// NewCASecret keeps the CA in the Secret namespace/name.
func NewCASecret(client kubernetes.Interface, namespace, name, install string) *CASecret {
	return &CASecret{client: client, namespace: namespace, name: name, install: install}
}

// CASecretSource is the app.CASource of a CASecret: when there is no
// Secret, a development CA called devName is made and stored there.
type CASecretSource struct {
	*CASecret
	devName string
}

var _ app.CASource = (*CASecretSource)(nil)

// NewCASecretSource loads the CA from the Secret namespace/name.
func NewCASecretSource(client kubernetes.Interface, namespace, name, install, devName string) *CASecretSource {
	return &CASecretSource{CASecret: NewCASecret(client, namespace, name, install), devName: devName}
}

// LoadCA implements app.CASource with LoadOrCreate.
func (s *CASecretSource) LoadCA(ctx context.Context) (*pki.CA, bool, error) {
	return s.LoadOrCreate(ctx, func() (*pki.CA, error) { return pki.NewCA(s.devName) })
}

// String implements app.CASource.
func (s *CASecretSource) String() string { return "Secret " + s.namespace + "/" + s.name }

// ErrCASecretIncomplete is returned for a Secret that holds neither an
// intermediate with its key nor a root with its key.
var ErrCASecretIncomplete = errors.New("CA Secret is incomplete")

// LoadOrCreate returns the CA in the Secret. A Secret with root.crt,
// intermediate.crt and intermediate.key is used as it is (a development CA
// made earlier, or the user's intermediate); one with root.crt and root.key
// is the user's root, and a new intermediate is made from it. When there is
// no Secret, newCA makes a development CA and it is stored, unless a
// replica stored one first: then that one is used.
func (s *CASecret) LoadOrCreate(ctx context.Context, newCA func() (*pki.CA, error)) (*pki.CA, bool, error) {
	sec, err := s.client.CoreV1().Secrets(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	switch {
	case err == nil:
		ca, err := s.decode(sec)
		return ca, false, err
	case !apierrors.IsNotFound(err):
		return nil, false, fmt.Errorf("read CA Secret %s/%s: %w", s.namespace, s.name, err)
	}
	ca, err := newCA()
	if err != nil {
		return nil, false, err
	}
	keyPEM, err := pki.EncodeKey(ca.Signer())
	if err != nil {
		return nil, false, err
	}
	sec = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace, Labels: map[string]string{
			LabelManagedBy: FieldManager, LabelInstall: s.install, LabelPurpose: "registration-ca",
		}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			CARootCertKey:         pki.EncodeCertificates(ca.Root),
			CAIntermediateCertKey: pki.EncodeCertificates(ca.Intermediate),
			CAIntermediateKeyKey:  keyPEM,
		},
	}
	got, created, err := createOrGet(ctx, s.client, sec)
	if err != nil {
		return nil, false, err
	}
	if created {
		return ca, true, nil
	}
	ca, err = s.decode(got)
	return ca, false, err
}

func (s *CASecret) decode(sec *corev1.Secret) (*pki.CA, error) {
	where := "CA Secret " + sec.Namespace + "/" + sec.Name
	rootPEM := sec.Data[CARootCertKey]
	if len(rootPEM) == 0 {
		return nil, fmt.Errorf("%w: %s has no %s", ErrCASecretIncomplete, where, CARootCertKey)
	}
	roots, err := pki.ParseCertificates(rootPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", where, CARootCertKey, err)
	}
	if intPEM, keyPEM := sec.Data[CAIntermediateCertKey], sec.Data[CAIntermediateKeyKey]; len(intPEM) > 0 && len(keyPEM) > 0 {
		ints, err := pki.ParseCertificates(intPEM)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", where, CAIntermediateCertKey, err)
		}
		key, err := pki.ParseKey(keyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", where, CAIntermediateKeyKey, err)
		}
		ca, err := pki.NewCAFromParts(roots[0], ints[0], key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if !time.Now().Before(ca.Intermediate.NotAfter) {
			return nil, fmt.Errorf("%s: the intermediate expired at %s; replace it, or delete the Secret to make a new development CA",
				where, ca.Intermediate.NotAfter.UTC().Format(time.RFC3339))
		}
		return ca, nil
	}
	if keyPEM := sec.Data[CARootKeyKey]; len(keyPEM) > 0 {
		key, err := pki.ParseKey(keyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", where, CARootKeyKey, err)
		}
		// A year, capped by the root, as with --ca-root-key-file.
		ca, err := pki.NewIntermediateCA(roots[0], key, "Meshplane", 365*24*time.Hour)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		return ca, nil
	}
	return nil, fmt.Errorf("%w: %s needs %s and %s, or %s", ErrCASecretIncomplete, where, CAIntermediateCertKey, CAIntermediateKeyKey, CARootKeyKey)
}
