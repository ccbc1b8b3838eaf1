package domain_test

import (
	"slices"
	"strings"
	"testing"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

type rootCA = networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority

func generatedRoot(alg networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_KeyAlgorithm) *rootCA {
	return &rootCA{CaSource: &networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_{
		Generated: &networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated{KeyAlgorithm: alg},
	}}
}

func TestRootGeneration(t *testing.T) {
	base := domain.RootGeneration("meshplane", "vm", generatedRoot(0))
	if !strings.HasPrefix(base, domain.RootGenerationPrefix) {
		t.Fatalf("root generation %q lacks prefix %q", base, domain.RootGenerationPrefix)
	}
	if got := domain.RootGeneration("meshplane", "vm", generatedRoot(0)); got != base {
		t.Errorf("the same configuration hashed twice: %s, then %s", base, got)
	}
	if got := domain.RootGeneration("meshplane", "vm", nil); got != base {
		t.Errorf("no root configuration (generated defaults) = %s, want the same as an empty generated root %s", got, base)
	}
	differs := map[string]string{
		"RSA key":        domain.RootGeneration("meshplane", "vm", generatedRoot(networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_RSA_4096)),
		"user secret":    domain.RootGeneration("meshplane", "vm", &rootCA{CaSource: &networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Secret{Secret: &commonv1.ObjectRef{Name: "root", Namespace: "meshplane"}}}),
		"other name":     domain.RootGeneration("meshplane", "vm2", generatedRoot(0)),
		"other ns":       domain.RootGeneration("other", "vm", generatedRoot(0)),
		"shifted border": domain.RootGeneration("meshplanev", "m", generatedRoot(0)),
	}
	for what, got := range differs {
		if got == base {
			t.Errorf("%s: root generation unchanged (%s)", what, got)
		}
	}
}

// sharedEstate is two clusters, each with one mesh, and a VirtualMesh with
// shared trust over both, held by east.
func sharedEstate(ca *rootCA, ttl *durationpb.Duration) map[string]*snapshotv1.InputSnapshot {
	in := map[string]*snapshotv1.InputSnapshot{}
	for _, c := range []string{"east", "west"} {
		in[c] = &snapshotv1.InputSnapshot{Cluster: c, Meshes: []*discoveryv1.Mesh{fuzzMesh(c, c+".local")}}
	}
	// In the management cluster: a VirtualMesh read from a workload
	// cluster could not hold the other cluster's mesh.
	in["meshplane"] = &snapshotv1.InputSnapshot{Cluster: "meshplane"}
	in["meshplane"].VirtualMeshes = []*networkingv1.VirtualMesh{{
		Metadata: &commonv1.ObjectMeta{Name: "vm", Namespace: "meshplane", Cluster: "meshplane", Generation: 1},
		Spec: &networkingv1.VirtualMeshSpec{
			Meshes: []*commonv1.ObjectRef{
				{Name: "istiod-istio-system-west", Namespace: "istio-system"},
				{Name: "istiod-istio-system-east", Namespace: "istio-system"},
			},
			MtlsConfig: &networkingv1.VirtualMeshSpec_MTLSConfig{TrustModel: &networkingv1.VirtualMeshSpec_MTLSConfig_Shared{
				Shared: &networkingv1.VirtualMeshSpec_MTLSConfig_SharedTrust{RootCertificateAuthority: ca, IntermediateTtl: ttl},
			}},
		},
	}}
	return in
}

func TestIssuedCertificatesFollowTheRoot(t *testing.T) {
	day := durationpb.New(24 * 60 * 60 * 1e9)
	before := translateMap(t, sharedEstate(generatedRoot(0), day))
	for _, c := range []string{"east", "west"} {
		ics := before[c].GetIssuedCertificates()
		if len(ics) != 1 {
			t.Fatalf("%s: %d issued certificates, want 1", c, len(ics))
		}
		ic := ics[0]
		if ic.GetMesh().GetName() != "istiod-istio-system-"+c || ic.GetTrustDomain() != c+".local" ||
			ic.GetSecretNamespace() != "istio-system" || ic.GetSecretName() != "cacerts" ||
			ic.GetVirtualMesh().GetName() != "vm" || !proto.Equal(ic.GetTtl(), day) {
			t.Errorf("%s: issued certificate %v", c, ic)
		}
		if ic.GetKeyAlgorithm() != networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_ECDSA_P256 {
			t.Errorf("%s: key algorithm %v, want the ECDSA_P256 default", c, ic.GetKeyAlgorithm())
		}
	}
	if a, b := before["east"].GetIssuedCertificates()[0].GetRootGeneration(), before["west"].GetIssuedCertificates()[0].GetRootGeneration(); a != b {
		t.Errorf("one VirtualMesh, two root generations: %s and %s", a, b)
	}

	// A longer intermediate lifetime is a new output but the same root.
	longer := translateMap(t, sharedEstate(generatedRoot(0), durationpb.New(48*60*60*1e9)))
	if longer["east"].GetVersion() == before["east"].GetVersion() {
		t.Error("a new intermediate TTL did not change the output version")
	}
	if longer["east"].GetIssuedCertificates()[0].GetRootGeneration() != before["east"].GetIssuedCertificates()[0].GetRootGeneration() {
		t.Error("a new intermediate TTL changed the root generation")
	}

	// Another root source is a new root generation, in every cluster.
	rsa := translateMap(t, sharedEstate(generatedRoot(networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_RSA_4096), day))
	for _, c := range []string{"east", "west"} {
		ic := rsa[c].GetIssuedCertificates()[0]
		if ic.GetRootGeneration() == before[c].GetIssuedCertificates()[0].GetRootGeneration() {
			t.Errorf("%s: an RSA root kept the root generation", c)
		}
		if ic.GetKeyAlgorithm() != networkingv1.VirtualMeshSpec_MTLSConfig_RootCertificateAuthority_Generated_RSA_4096 {
			t.Errorf("%s: key algorithm %v, want RSA_4096", c, ic.GetKeyAlgorithm())
		}
	}
}

// The issued certificates do not depend on the order of the inputs' lists.
func TestIssuedCertificatesDeterministic(t *testing.T) {
	build := func(reverse bool) map[string]*snapshotv1.InputSnapshot {
		in := sharedEstate(nil, nil)
		// A second istiod revision in east, so that east has two entries to
		// order.
		canary := fuzzMesh("east", "east.local")
		canary.Metadata.Name = "istiod-canary-istio-system-east"
		in["east"].Meshes = append(in["east"].Meshes, canary)
		vm := in["meshplane"].VirtualMeshes[0]
		vm.Spec.Meshes = append(vm.Spec.Meshes, &commonv1.ObjectRef{Name: canary.Metadata.Name, Namespace: "istio-system"})
		if reverse {
			slices.Reverse(in["east"].Meshes)
			slices.Reverse(vm.Spec.Meshes)
		}
		return in
	}
	a := translateMap(t, build(false))
	b := translateMap(t, build(true))
	for c := range a {
		if a[c].GetVersion() != b[c].GetVersion() {
			t.Errorf("%s: versions differ with the lists reversed", c)
		}
	}
	// Both revisions run in istio-system and read one cacerts Secret: one
	// IssuedCertificate, for the first mesh by key.
	var names []string
	for _, ic := range a["east"].GetIssuedCertificates() {
		names = append(names, ic.GetMesh().GetName())
	}
	if want := []string{"istiod-canary-istio-system-east"}; !slices.Equal(names, want) {
		t.Errorf("east's issued certificates are for %v, want %v", names, want)
	}
}

func translateMap(t *testing.T, inputs map[string]*snapshotv1.InputSnapshot) map[string]*snapshotv1.OutputSnapshot {
	t.Helper()
	out, err := domain.Translate(inputs, domain.Options{})
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	return out
}
