package e2e

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	"github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1/distributionv1connect"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/pki"
	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/libs/redistest"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/test/e2e/harness"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A VirtualMesh with shared trust over the meshes of two clusters: each
// cluster's agent makes a key, has registration sign an intermediate with
// the VirtualMesh's root, and writes istio-system/cacerts. Both
// intermediates chain to the same root, and they are different
// intermediates.
//
// It runs against the four services as processes and against the
// all-in-one process.
func TestVirtualMeshSharedTrustWritesCACerts(t *testing.T) {
	harness.RequireE2E(t)
	for _, mode := range []struct {
		name     string
		allInOne bool
	}{{"separate-processes", false}, {"all-in-one", true}} {
		t.Run(mode.name, func(t *testing.T) { runCACerts(t, mode.allInOne) })
	}
}

func runCACerts(t *testing.T, allInOne bool) {
	ctx := t.Context()
	dir := t.TempDir()
	all := kubetest.StartMany(t, kubetest.Options{Name: "east"}, kubetest.Options{Name: "west"}, kubetest.Options{Name: "mgmt", SkipIstioCRDs: true})
	clusters, mgmt := all[:2], all[2]
	redis := redistest.Start(t)
	plane, tokens, err := harness.StartPlane(ctx, harness.PlaneOptions{
		BinDir: binDir, Dir: dir, RedisAddr: redis.Addr(), Clusters: []string{"east", "west"},
		AllInOne: allInOne, RegistrationRedis: true, ManagementKubeconfig: mgmt.Kubeconfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plane.Stop)
	procs := append([]*harness.Process{}, plane.Procs...)

	for _, c := range clusters {
		if err := c.ApplyYAML(ctx, harness.IstioControlPlane("", "1.24.0", "cluster.local")); err != nil {
			t.Fatalf("apply istiod to %s: %v", c.Name, err)
		}
		agent, err := plane.StartAgent(harness.AgentOptions{
			BinDir: binDir, Cluster: c.Name, Token: tokens[c.Name], Kubeconfig: c.Kubeconfig(),
			LogDir: filepath.Join(dir, "logs"), StateDir: filepath.Join(dir, "agent-"+c.Name),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(agent.Stop)
		procs = append(procs, agent)
	}

	east := clusters[0]
	// The VirtualMesh is applied in east and holds west's mesh too: the
	// management cluster grants east that scope.
	grantScope(t, mgmt, procs, "east")
	vm := `apiVersion: v1
kind: Namespace
metadata: {name: meshplane-config}
---
apiVersion: networking.meshplane.dev/v1
kind: VirtualMesh
metadata: {name: shared, namespace: meshplane-config}
spec:
  meshes:
  - {name: istiod-istio-system-east, namespace: istio-system}
  - {name: istiod-istio-system-west, namespace: istio-system}
  mtlsConfig:
    shared:
      intermediateTtl: 2592000s
      rootCertificateAuthority:
        generated: {}
`
	if err := east.ApplyYAML(ctx, []byte(vm)); err != nil {
		t.Fatal(err)
	}

	secrets := map[string]*corev1.Secret{}
	for _, c := range clusters {
		err := harness.Wait(ctx, 120*time.Second, fmt.Sprintf("istio-system/cacerts in %s", c.Name), func(ctx context.Context) (bool, error) {
			s, err := c.Clientset().CoreV1().Secrets(harness.IstioNamespace).Get(ctx, "cacerts", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			secrets[c.Name] = s
			return true, nil
		}, procs...)
		if err != nil {
			t.Fatal(err)
		}
	}

	intermediates := map[string]*x509.Certificate{}
	for name, s := range secrets {
		if l := s.GetLabels(); l[snapshots.LabelManagedBy] != snapshots.DefaultInstall || l[snapshots.LabelCluster] != name {
			t.Errorf("%s: cacerts labels %v, want the ownership labels", name, l)
		}
		if s.Type != corev1.SecretTypeOpaque {
			t.Errorf("%s: cacerts type %q, want Opaque", name, s.Type)
		}
		for _, k := range []string{"ca-cert.pem", "ca-key.pem", "root-cert.pem", "cert-chain.pem"} {
			if len(s.Data[k]) == 0 {
				t.Fatalf("%s: cacerts lacks %s", name, k)
			}
		}
		inter := parseOne(t, name+" ca-cert.pem", s.Data["ca-cert.pem"])
		root := parseOne(t, name+" root-cert.pem", s.Data["root-cert.pem"])
		pool := x509.NewCertPool()
		pool.AddCert(root)
		if _, err := inter.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("%s: ca-cert.pem does not verify against root-cert.pem: %v", name, err)
		}
		if !inter.IsCA || inter.MaxPathLen != 0 || !inter.MaxPathLenZero {
			t.Errorf("%s: intermediate IsCA=%v MaxPathLen=%d, want a CA with path length 0", name, inter.IsCA, inter.MaxPathLen)
		}
		key, err := pki.ParseKey(s.Data["ca-key.pem"])
		if err != nil {
			t.Fatalf("%s: ca-key.pem: %v", name, err)
		}
		if !key.Public().(comparableKey).Equal(inter.PublicKey) {
			t.Errorf("%s: ca-key.pem is not the key of ca-cert.pem", name)
		}
		chain, err := pki.ParseCertificates(s.Data["cert-chain.pem"])
		if err != nil || len(chain) < 2 || !chain[0].Equal(inter) || !chain[len(chain)-1].Equal(root) {
			t.Errorf("%s: cert-chain.pem is not the intermediate then the root (%d certificates, %v)", name, len(chain), err)
		}
		intermediates[name] = inter
	}
	if !bytes.Equal(secrets["east"].Data["root-cert.pem"], secrets["west"].Data["root-cert.pem"]) {
		t.Error("east and west hold different roots; a VirtualMesh with shared trust must give them one")
	}
	if intermediates["east"].Equal(intermediates["west"]) || intermediates["east"].SerialNumber.Cmp(intermediates["west"].SerialNumber) == 0 {
		t.Error("east and west hold the same intermediate; each mesh must get its own")
	}
	if bytes.Equal(secrets["east"].Data["ca-key.pem"], secrets["west"].Data["ca-key.pem"]) {
		t.Error("east and west hold the same key")
	}

	// The user takes west's cacerts over (their own CA, no ownership
	// labels). A change of the VirtualMesh sends new snapshots; west's
	// agent leaves the user's Secret alone and acknowledges the conflict.
	west := clusters[1]
	user := secrets["west"].DeepCopy()
	user.Labels, user.Annotations = nil, nil
	user.Data = map[string][]byte{"ca-cert.pem": []byte("the user's own CA")}
	if _, err := west.Clientset().CoreV1().Secrets(harness.IstioNamespace).Update(ctx, user, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := east.ApplyYAML(ctx, []byte(strings.Replace(vm, "intermediateTtl: 2592000s", "intermediateTtl: 1296000s", 1))); err != nil {
		t.Fatal(err)
	}
	dist := distributionClient(t, plane)
	err = harness.Wait(ctx, 60*time.Second, "west's ack to report the user's cacerts", func(ctx context.Context) (bool, error) {
		resp, err := dist.ListAcks(ctx, connect.NewRequest(&distributionv1.ListAcksRequest{}))
		if err != nil {
			return false, err
		}
		for _, c := range resp.Msg.GetClusters() {
			if c.GetCluster() == "west" {
				return c.GetAckedVersion() == c.GetLatestVersion() && c.GetApplyErrors() > 0, nil
			}
		}
		return false, nil
	}, procs...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := west.Clientset().CoreV1().Secrets(harness.IstioNamespace).Get(ctx, "cacerts", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data["ca-cert.pem"]) != "the user's own CA" || len(got.Data) != 1 || len(got.GetLabels()) != 0 {
		t.Errorf("west: the user's cacerts was changed: labels %v, %d keys", got.GetLabels(), len(got.Data))
	}
}

// distributionClient calls distribution with a service identity, as
// meshctl does.
func distributionClient(t testing.TB, plane *harness.Plane) distributionv1connect.DistributionServiceClient {
	t.Helper()
	cert, key, err := plane.PKI.ServiceCert("meshctl")
	if err != nil {
		t.Fatal(err)
	}
	o := platform.NewClientOptions()
	o.Addr, o.CAFile, o.CertFile, o.KeyFile, o.ServerName = plane.Distribution, plane.PKI.RootFile(), cert, key, "localhost"
	hc, err := platform.NewHTTPClient(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	return distributionv1connect.NewDistributionServiceClient(hc, platform.BaseURL(o), platform.DefaultClientOptions(o)...)
}

func parseOne(t *testing.T, what string, pemData []byte) *x509.Certificate {
	t.Helper()
	certs, err := pki.ParseCertificates(pemData)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return certs[0]
}

// comparableKey is a public key that compares with another: every key
// type of the standard library is one (see crypto.PublicKey).
type comparableKey interface {
	Equal(crypto.PublicKey) bool
}
