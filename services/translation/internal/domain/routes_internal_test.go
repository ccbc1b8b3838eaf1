package domain

import (
	"slices"
	"testing"

	istiov1alpha3 "istio.io/api/networking/v1alpha3"
)

func TestNormalizeWeights(t *testing.T) {
	for _, tc := range []struct {
		in   []uint32
		want []int32
	}{
		{[]uint32{50, 50}, []int32{50, 50}},
		{[]uint32{1, 1}, []int32{50, 50}},
		{[]uint32{1, 1, 1}, []int32{34, 33, 33}},
		{[]uint32{1, 0}, []int32{100, 0}},
		{[]uint32{2, 1, 1}, []int32{50, 25, 25}},
		{[]uint32{1, 2}, []int32{33, 67}},
		{[]uint32{1, 199}, []int32{1, 99}},
		// A weight that would round to 0 at 100 (istiod would drop its
		// destination): the first power of ten that keeps it.
		{[]uint32{999, 1}, []int32{999, 1}},
		{[]uint32{1, 2000}, []int32{5, 9995}},
		{[]uint32{1, 1, 1, 997}, []int32{1, 1, 1, 997}},
		// Past a million, it gets 1, taken from the largest.
		{[]uint32{4294967295, 4294967295, 1}, []int32{499999, 500000, 1}},
		{[]uint32{0, 0}, []int32{0, 0}},
	} {
		if got := normalizeWeights(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("normalizeWeights(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestSubsetName(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"version": "v2"}, "version-v2"},
		{map[string]string{"version": "v2", "app": "reviews"}, "app-reviews-version-v2"},
		{map[string]string{"topology.kubernetes.io/zone": "a"}, "topology-kubernetes-io-zone-a-"},
		{map[string]string{"Version": "V2"}, "version-v2-"},
	} {
		got := SubsetName(tc.labels)
		if len(got) > 63 || got[:len(tc.want)] != tc.want {
			t.Errorf("SubsetName(%v) = %q, want prefix %q", tc.labels, got, tc.want)
		}
	}
	// Labels that clean up to the same text still get distinct names.
	if a, b := SubsetName(map[string]string{"a.b": "c"}), SubsetName(map[string]string{"a_b": "c"}); a == b {
		t.Errorf("distinct labels share the subset name %q", a)
	}
	long := map[string]string{"a-very-long-label-key-that-goes-on-and-on": "and-a-value-that-is-also-rather-long"}
	if got := SubsetName(long); len(got) > 63 {
		t.Errorf("SubsetName of long labels = %q, longer than a DNS label", got)
	}
}

func prefix(p string) *istiov1alpha3.HTTPMatchRequest {
	return &istiov1alpha3.HTTPMatchRequest{Uri: &istiov1alpha3.StringMatch{MatchType: &istiov1alpha3.StringMatch_Prefix{Prefix: p}}}
}

func TestCompareMatchSpecificity(t *testing.T) {
	exact := &istiov1alpha3.HTTPMatchRequest{Uri: &istiov1alpha3.StringMatch{MatchType: &istiov1alpha3.StringMatch_Exact{Exact: "/"}}}
	regex := &istiov1alpha3.HTTPMatchRequest{Uri: &istiov1alpha3.StringMatch{MatchType: &istiov1alpha3.StringMatch_Regex{Regex: "/.*"}}}
	withHeader := prefix("/a")
	withHeader.Headers = map[string]*istiov1alpha3.StringMatch{"x": {}}
	withSource := prefix("/a")
	withSource.SourceNamespace = "shop"
	headersOnly := &istiov1alpha3.HTTPMatchRequest{Headers: map[string]*istiov1alpha3.StringMatch{"x": {}}}
	want := []*istiov1alpha3.HTTPMatchRequest{exact, regex, prefix("/a/b"), withHeader, withSource, prefix("/a"), headersOnly, {}}
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortFunc(got, compareMatch)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("position %d: got %v, want %v", i, got[i], want[i])
		}
	}
}
