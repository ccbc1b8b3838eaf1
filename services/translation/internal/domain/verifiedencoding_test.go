package domain_test

import (
	"math/rand/v2"
	"testing"

	networkingv1 "github.com/meshplane/meshplane/libs/gen/meshplane/networking/v1"
	"github.com/meshplane/meshplane/services/translation/internal/domain"
)

// TestFastJSONMatchesProtojson translates the fuzz seeds, random fuzz
// estates and small reference estates with every spec and status encoded
// without protojson checked against protojson's bytes
// (WithVerifiedEncoding).
func TestFastJSONMatchesProtojson(t *testing.T) {
	opts := domain.WithVerifiedEncoding(domain.Options{})
	translate := func(data []byte) {
		t.Helper()
		if _, err := domain.Translate(fuzzEstate(data), opts); err != nil {
			t.Fatal(err)
		}
	}
	for _, seed := range fuzzSeeds() {
		translate(seed)
	}
	r := rand.New(rand.NewPCG(9, 10))
	for range 300 {
		data := make([]byte, r.IntN(160))
		for i := range data {
			data[i] = byte(r.IntN(256))
		}
		translate(data)
	}
	permissive := &networkingv1.VirtualMeshSpec_Federation{Mode: &networkingv1.VirtualMeshSpec_Federation_Permissive_{Permissive: &networkingv1.VirtualMeshSpec_Federation_Permissive{}}}
	for _, fed := range []*networkingv1.VirtualMeshSpec_Federation{nil, permissive, selectiveExport} {
		if _, err := domain.Translate(federatedEstate(3, 20, 30, fed), opts); err != nil {
			t.Fatal(err)
		}
	}
}
