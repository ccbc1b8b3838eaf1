package service_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/pki"
	revredis "github.com/meshplane/meshplane/libs/revocation/redis"
	"github.com/meshplane/meshplane/services/registration/service"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var kubernetesClusters = schema.GroupVersionResource{Group: "multicluster.meshplane.dev", Version: "v1", Resource: "kubernetesclusters"}

// TestManagementCluster runs registration against a real kube-apiserver:
// the CA kept in a Secret across restarts, VirtualMesh roots in Secrets
// (generated, and the user's own), and the KubernetesCluster mirror.
func TestManagementCluster(t *testing.T) {
	kc := kubetest.Start(t, kubetest.Options{SkipIstioCRDs: true})
	const ns = "meshplane"
	if _, err := kc.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("CA Secret survives a restart", func(t *testing.T) {
		cfg := service.DefaultConfig()
		cfg.TrustDomain, cfg.Kubeconfig, cfg.CASecret = td, kc.Kubeconfig(), ns+"/meshplane-ca"
		cfg.CADir = t.TempDir() + "/must-stay-empty"
		first, err := service.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		second, err := service.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first.TrustBundlePEM(), second.TrustBundlePEM()) {
			t.Fatal("a restart made another CA")
		}
		sec, err := kc.Clientset().CoreV1().Secrets(ns).Get(t.Context(), "meshplane-ca", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sec.Data[pki.RootCertFile], first.TrustBundlePEM()) {
			t.Fatal("the Secret's root is not the one served")
		}
		cfg.CARootCertFile = "/etc/root.pem"
		if _, err := service.New(cfg); err == nil || !strings.Contains(err.Error(), "--ca-secret cannot be combined") {
			t.Fatalf("--ca-secret with --ca-root-cert-file: %v", err)
		}
	})

	e := newIntermediateEnv(t, func(c *service.Config) {
		c.Kubeconfig, c.VirtualMeshRootsNamespace, c.MirrorNamespace, c.MirrorResync = kc.Kubeconfig(), ns, ns, 100*time.Millisecond
	})
	mirror := func(ctx context.Context, name string) (*unstructured.Unstructured, error) {
		return kc.Dynamic().Resource(kubernetesClusters).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	}
	waitMirror := func(t *testing.T, name, state, serial string) {
		t.Helper()
		var last *unstructured.Unstructured
		err := kubetest.WaitFor(t.Context(), 10*time.Second, func(ctx context.Context) (bool, error) {
			u, err := mirror(ctx, name)
			if err != nil {
				return false, nil
			}
			last = u
			st, _, _ := unstructured.NestedString(u.Object, "status", "state")
			sn, _, _ := unstructured.NestedString(u.Object, "status", "certificateSerial")
			return st == state && (serial == "" || sn == serial), nil
		})
		if err != nil {
			t.Fatalf("mirror %s never reached state %s serial %q: %v; last %v", name, state, serial, err, last)
		}
	}

	eastCert, _ := register(t, e.client(t, nil, nil), "east", "east-token")

	t.Run("mirror follows the record", func(t *testing.T) {
		waitMirror(t, "east", "STATE_REGISTERED", eastCert.Leaf.SerialNumber.String())
		admin := e.admin(t, e.serviceCert(t, "meshctl"), nil)
		if _, err := admin.CreateCluster(t.Context(), connect.NewRequest(&registrationv1.CreateClusterRequest{Name: "north", RequireApproval: true})); err != nil {
			t.Fatal(err)
		}
		waitMirror(t, "north", "STATE_PENDING_APPROVAL", "")
		if _, err := admin.ApproveCluster(t.Context(), connect.NewRequest(&registrationv1.ApproveClusterRequest{Name: "north"})); err != nil {
			t.Fatal(err)
		}
		waitMirror(t, "north", "STATE_APPROVED", "")
		if _, err := admin.DeregisterCluster(t.Context(), connect.NewRequest(&registrationv1.DeregisterClusterRequest{Name: "north"})); err != nil {
			t.Fatal(err)
		}
		waitMirror(t, "north", "STATE_DEREGISTERED", "")
	})

	t.Run("VirtualMesh roots in Secrets", func(t *testing.T) {
		// A generated root is kept in a Secret of the roots namespace.
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		east := e.client(t, eastCert, nil)
		res, err := east.SignIntermediate(t.Context(), signReq("shared", "istiod-east", intermediateCSR(t, key, nil), 0))
		if err != nil {
			t.Fatal(err)
		}
		_, root := checkIntermediate(t, res.Msg, key, "east.td", "east", "istiod-east")
		secs, err := kc.Clientset().CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "meshplane.dev/purpose=virtual-mesh-root"})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range secs.Items {
			found = found || bytes.Equal(s.Data["root-cert.pem"], pki.EncodeCertificates(root))
		}
		if !found {
			t.Fatalf("the root is in none of the %d root Secrets", len(secs.Items))
		}

		// The user's own root, from a Secret in the VirtualMesh's
		// namespace.
		corpKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		corpRoot := selfSigned(t, corpKey)
		keyPEM, _ := pki.EncodeKey(corpKey)
		if _, err := kc.Clientset().CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "corp-root"},
			Data:       map[string][]byte{"root-cert.pem": pki.EncodeCertificates(corpRoot), "key.pem": keyPEM},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		byo := virtualMesh("byo", sharedGenerated, 0, "istiod-canary")
		byo.Spec.MtlsConfig.GetShared().RootCertificateAuthority.CaSource = &networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Secret{
			Secret: &commonv1.ObjectRef{Name: "corp-root"},
		}
		missing := virtualMesh("missing", sharedGenerated, 0, "istiod-canary")
		missing.Spec.MtlsConfig.GetShared().RootCertificateAuthority.CaSource = &networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Secret{
			Secret: &commonv1.ObjectRef{Name: "no-such-secret", Namespace: ns},
		}
		putInputs(t, e.redis, &snapshotv1.InputSnapshot{Cluster: "mgmt2", VirtualMeshes: []*networkingv1.VirtualMesh{byo, missing}})
		res, err = east.SignIntermediate(t.Context(), signReq("byo", "istiod-canary", intermediateCSR(t, key, nil), 0))
		if err != nil {
			t.Fatal(err)
		}
		if _, got := checkIntermediate(t, res.Msg, key, "east.td", "east", "istiod-canary"); !got.Equal(corpRoot) {
			t.Fatal("the intermediate is not under the user's root")
		}
		res, err = east.SignIntermediate(t.Context(), signReq("missing", "istiod-canary", intermediateCSR(t, key, nil), 0))
		wantRefused(t, res, err, connect.CodeFailedPrecondition, "no-such-secret")
	})

	t.Run("records a flushed store lost are re-seeded from their mirrors", func(t *testing.T) {
		// The records are lost (Redis restarted empty): the mirrors stay,
		// the records come back from them, and east, whose agent still
		// holds a valid certificate, can be deregistered, which revokes it.
		if err := e.redis.FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		admin := e.admin(t, e.serviceCert(t, "meshctl"), nil)
		err := kubetest.WaitFor(t.Context(), 10*time.Second, func(ctx context.Context) (bool, error) {
			res, err := admin.ListClusters(ctx, connect.NewRequest(&registrationv1.ListClustersRequest{}))
			return err == nil && len(res.Msg.GetClusters()) == 2, nil
		})
		if err != nil {
			t.Fatalf("records not re-seeded: %v", err)
		}
		waitMirror(t, "east", "STATE_REGISTERED", eastCert.Leaf.SerialNumber.String())
		waitMirror(t, "north", "STATE_DEREGISTERED", "")
		res, err := admin.DeregisterCluster(t.Context(), connect.NewRequest(&registrationv1.DeregisterClusterRequest{Name: "east"}))
		if err != nil {
			t.Fatalf("deregistering east after the store loss: %v", err)
		}
		if res.Msg.GetRevokedCertificates() != 1 {
			t.Fatalf("deregistration revoked %d certificates, want east's live one", res.Msg.GetRevokedCertificates())
		}
		revoked, err := e.redis.ZScore(t.Context(), revredis.Key(service.DefaultConfig().Install), eastCert.Leaf.SerialNumber.String()).Result()
		if err != nil || revoked == 0 {
			t.Fatalf("east's certificate is not in the shared revocation set: %v", err)
		}
		if _, err := kc.Clientset().CoreV1().Secrets(ns).Get(t.Context(), "meshplane-ca", metav1.GetOptions{}); err != nil {
			t.Fatalf("the CA Secret went: %v", err)
		}
	})
}
