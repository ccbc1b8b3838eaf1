package snapshots

import (
	"cmp"
	"testing"
)

func TestMergedStrictlySorted(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  []int
		from []int
		want bool
	}{
		{"base only", []int{1, 2, 3}, []int{0, 1, 2}, true},
		{"inserted in place", []int{1, 2, 3}, []int{0, -1, 1}, true},
		{"inserted at the ends", []int{0, 2, 4}, []int{-1, 0, -1}, true},
		{"two inserted in order", []int{1, 2, 3, 4}, []int{0, -1, -1, 1}, true},
		{"duplicate of a base element", []int{1, 2, 2}, []int{0, 1, -1}, false},
		{"duplicate before a base element", []int{1, 3, 3}, []int{0, -1, 1}, false},
		{"two inserted of one key", []int{1, 2, 2, 3}, []int{0, -1, -1, 1}, false},
		{"inserted out of order", []int{1, 5, 3}, []int{0, -1, 1}, false},
	} {
		if got := mergedStrictlySorted(tc.out, tc.from, cmp.Compare[int]); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
