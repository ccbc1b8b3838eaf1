package kube

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"testing"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rootSigner signs intermediates with a root of its own, as the
// registration service does with a VirtualMesh's root.
type rootSigner struct {
	root  *x509.Certificate
	key   crypto.Signer
	calls int
}

func newRootSigner(t *testing.T) *rootSigner {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "VirtualMesh root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	root, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &rootSigner{root: root, key: key}
}

func (s *rootSigner) SignIntermediate(_ context.Context, req app.IntermediateRequest) (app.SignedIntermediate, error) {
	s.calls++
	csr, err := pki.ParseCSR(req.CSRPEM)
	if err != nil {
		return app.SignedIntermediate{}, err
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = time.Hour // the server's default
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(int64(100 + s.calls)), Subject: pkix.Name{CommonName: "istiod " + req.MeshName},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(ttl),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}, s.root, csr.PublicKey, s.key)
	if err != nil {
		return app.SignedIntermediate{}, err
	}
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	root := pki.EncodeCertificates(s.root)
	return app.SignedIntermediate{CertPEM: cert, ChainPEM: append(append([]byte{}, cert...), root...), RootPEM: root}, nil
}

func issuedFor(namespace string) *snapshotv1.IssuedCertificate {
	return &snapshotv1.IssuedCertificate{
		VirtualMesh:     &commonv1.ObjectRef{Name: "vm", Namespace: "meshplane"},
		Mesh:            &commonv1.ObjectRef{Name: "istiod", Namespace: namespace},
		TrustDomain:     "east.example.org",
		SecretNamespace: namespace, SecretName: "cacerts",
		RootGeneration: "root-sha256:1",
	}
}

func TestCASecretsWithTheManager(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east"})
	kc := c.Clientset()
	for _, n := range []string{"istio-system", "istio-user"} {
		createNamespace(t, kc, n)
	}
	// The user brought their own plug-in CA in istio-user.
	userSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cacerts", Namespace: "istio-user"},
		Data:       map[string][]byte{"ca-cert.pem": []byte("the user's CA")},
	}
	if _, err := kc.CoreV1().Secrets("istio-user").Create(t.Context(), userSecret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	store := NewCASecrets(kc, install, "east")
	signer := newRootSigner(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := app.NewCACerts(signer, store, app.CACertsOptions{Log: log})
	m.SetDesired([]*snapshotv1.IssuedCertificate{issuedFor("istio-system"), issuedFor("istio-user")})
	m.Reconcile(t.Context())

	sec, err := kc.CoreV1().Secrets("istio-system").Get(t.Context(), "cacerts", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cacerts in istio-system: %v", err)
	}
	if sec.Type != corev1.SecretTypeOpaque {
		t.Errorf("type %q, want Opaque", sec.Type)
	}
	if l := sec.GetLabels(); l[snapshots.LabelManagedBy] != install || l[snapshots.LabelCluster] != "east" {
		t.Errorf("labels %v, want the ownership labels", l)
	}
	for _, k := range []string{app.CACertKey, app.CAKeyKey, app.RootCertKey, app.CertChainKey} {
		if len(sec.Data[k]) == 0 {
			t.Errorf("Secret lacks %s", k)
		}
	}
	if got := sec.GetAnnotations()[app.AnnotationRootGeneration]; got != "root-sha256:1" {
		t.Errorf("root generation annotation %q", got)
	}
	if _, err := time.Parse(time.RFC3339, sec.GetAnnotations()[app.AnnotationExpiresAt]); err != nil {
		t.Errorf("expiry annotation: %v", err)
	}
	inter, err := pki.ParseCertificates(sec.Data[app.CACertKey])
	if err != nil {
		t.Fatal(err)
	}
	roots, err := pki.ParseCertificates(sec.Data[app.RootCertKey])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(roots[0])
	if _, err := inter[0].Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("ca-cert.pem does not verify against root-cert.pem: %v", err)
	}

	user, err := kc.CoreV1().Secrets("istio-user").Get(t.Context(), "cacerts", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(user.Data["ca-cert.pem"]) != "the user's CA" || len(user.Data) != 1 || len(user.GetLabels()) != 0 {
		t.Errorf("the user's Secret was changed: labels %v, keys %d", user.GetLabels(), len(user.Data))
	}
	if signer.calls != 1 {
		t.Errorf("%d signings, want 1 (none for the user's mesh)", signer.calls)
	}
	var conflict bool
	for _, st := range m.Status() {
		if st.Namespace == "istio-user" && st.State == app.CAStateConflict {
			conflict = true
		}
	}
	if !conflict {
		t.Errorf("status %+v, want a conflict for istio-user/cacerts", m.Status())
	}

	// A restarted agent reuses the Secret.
	again := app.NewCACerts(signer, store, app.CACertsOptions{Log: log})
	again.SetDesired([]*snapshotv1.IssuedCertificate{issuedFor("istio-system")})
	again.Reconcile(t.Context())
	if signer.calls != 1 {
		t.Errorf("%d signings after a restart, want still 1", signer.calls)
	}
}

func TestCASecretsStore(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t, kubetest.Options{Name: "east"})
	kc := c.Clientset()
	createNamespace(t, kc, "istio-system")
	ctx := t.Context()
	store := NewCASecrets(kc, install, "east")

	if _, err := store.Get(ctx, "istio-system", "cacerts"); !errors.Is(err, app.ErrSecretNotFound) {
		t.Fatalf("Get of a missing Secret: %v, want ErrSecretNotFound", err)
	}
	secret := app.CASecret{Namespace: "istio-system", Name: "cacerts", Data: map[string][]byte{app.CACertKey: []byte("one")}, Annotations: map[string]string{app.AnnotationRootGeneration: "g1"}}
	if err := store.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := store.Create(ctx, secret); !errors.Is(err, app.ErrConflict) {
		t.Errorf("second Create: %v, want ErrConflict", err)
	}
	got, err := store.Get(ctx, "istio-system", "cacerts")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Owned || string(got.Data[app.CACertKey]) != "one" || got.Annotations[app.AnnotationRootGeneration] != "g1" {
		t.Fatalf("read back %+v", got)
	}

	secret.Data = map[string][]byte{app.CACertKey: []byte("two")}
	secret.Annotations = map[string]string{app.AnnotationRootGeneration: "g2"}
	if err := store.Update(ctx, secret, got.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	if err := store.Update(ctx, secret, got.ResourceVersion); !errors.Is(err, app.ErrSecretChanged) {
		t.Errorf("Update at a stale version: %v, want ErrSecretChanged", err)
	}
	now, err := store.Get(ctx, "istio-system", "cacerts")
	if err != nil {
		t.Fatal(err)
	}
	if string(now.Data[app.CACertKey]) != "two" || now.Annotations[app.AnnotationRootGeneration] != "g2" {
		t.Errorf("after Update: %+v", now)
	}

	// The user takes the Secret over by removing the labels: it is theirs.
	sec, err := kc.CoreV1().Secrets("istio-system").Get(ctx, "cacerts", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Labels = nil
	if _, err := kc.CoreV1().Secrets("istio-system").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	theirs, err := store.Get(ctx, "istio-system", "cacerts")
	if err != nil {
		t.Fatal(err)
	}
	if theirs.Owned {
		t.Error("a Secret without the labels reads as owned")
	}
	if err := store.Update(ctx, secret, theirs.ResourceVersion); !errors.Is(err, app.ErrConflict) {
		t.Errorf("Update of the user's Secret: %v, want ErrConflict", err)
	}
}
