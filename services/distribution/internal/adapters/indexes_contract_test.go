package adapters_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/distribution/internal/adapters/memory"
	redisacks "github.com/meshplane/meshplane/services/distribution/internal/adapters/redis"
	"github.com/meshplane/meshplane/services/distribution/internal/app"
)

// The IndexStore contract, against memory and a real Redis: the newest
// app.KeepIndexes versions of each cluster are kept and seen by every
// replica; older ones, and other clusters' versions, are not found.
func TestIndexStoreContract(t *testing.T) {
	type factory struct {
		name string
		new  func(t *testing.T) (app.IndexStore, app.IndexStore)
	}
	factories := []factory{
		{"memory", func(t *testing.T) (app.IndexStore, app.IndexStore) { s := memory.NewIndexes(); return s, s }},
	}
	for _, d := range deployments(t) {
		factories = append(factories, factory{"redis-" + string(d.Topology), func(t *testing.T) (app.IndexStore, app.IndexStore) {
			return redisacks.NewIndexes(d.Client(t), "test"), redisacks.NewIndexes(d.Client(t), "test")
		}})
	}
	for _, f := range factories {
		t.Run(f.name, func(t *testing.T) {
			a, b := f.new(t)
			ctx := t.Context()
			index := func(i int) snapshots.OutputIndex {
				return snapshots.OutputIndex{Objects: snapshots.IndexEntries{{Key: uint64(i), Hash: uint64(i * 7)}, {Key: 1 << 63, Hash: 5}}, Statuses: snapshots.IndexEntries{{Key: uint64(i), Hash: 1}}}
			}
			if _, err := a.GetIndex(ctx, "east", "v0"); !errors.Is(err, snapshots.ErrNotFound) {
				t.Fatalf("GetIndex of nothing = %v, want ErrNotFound", err)
			}
			n := app.KeepIndexes + 2
			for i := range n {
				if err := a.PutIndex(ctx, "east", fmt.Sprint("v", i), index(i)); err != nil {
					t.Fatal(err)
				}
			}
			// Putting a kept version again makes it the newest, once.
			if err := a.PutIndex(ctx, "east", fmt.Sprint("v", n-app.KeepIndexes), index(n-app.KeepIndexes)); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				got, err := b.GetIndex(ctx, "east", fmt.Sprint("v", i))
				if i < n-app.KeepIndexes {
					if !errors.Is(err, snapshots.ErrNotFound) {
						t.Errorf("v%d (older than the newest %d) = %v, want ErrNotFound", i, app.KeepIndexes, err)
					}
					continue
				}
				if err != nil || !slices.Equal(got.Objects, index(i).Objects) || !slices.Equal(got.Statuses, index(i).Statuses) {
					t.Errorf("v%d = %+v, %v", i, got, err)
				}
			}
			if _, err := b.GetIndex(ctx, "west", fmt.Sprint("v", n-1)); !errors.Is(err, snapshots.ErrNotFound) {
				t.Errorf("another cluster's version = %v, want ErrNotFound", err)
			}
		})
	}
}
