package app_test

import (
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/libs/snapshots/snapstore"
	"github.com/meshplane/meshplane/services/translation/internal/app"
)

// encodingMetrics records the encoding cache's size.
type encodingMetrics struct {
	app.NopMetrics
	kept atomic.Int64
}

func (m *encodingMetrics) SetEncodingCache(bytes int64) { m.kept.Store(bytes) }

// Every published output is stored with its table, which describes its
// encoding as a scan of every byte does, whether the last encoding was
// kept (the next one copies its unchanged objects) or the cache had no
// room for it.
func TestPublishedOutputsCarryTheirTables(t *testing.T) {
	for _, c := range []struct {
		name   string
		budget int64
		kept   bool
	}{{"kept", 1 << 20, true}, {"no room", 16, false}} {
		t.Run(c.name, func(t *testing.T) {
			inputs, outputs := snapstore.NewMemory(newInput), snapstore.NewMemory(newOutput)
			m := &encodingMetrics{}
			tr := app.NewTranslator(app.Config{Debounce: 5 * time.Millisecond, RetryInterval: 10 * time.Millisecond, EncodingCacheBytes: c.budget},
				inputs, outputs, m, slog.New(slog.NewTextHandler(t.Output(), nil)))
			run(t, tr)
			for _, in := range []*snapshotv1.InputSnapshot{
				input("east", "reviews", "ratings", "details"),
				input("east", "reviews", "ratings", "details", "productpage"),
				input("east", "ratings", "details", "productpage"),
			} {
				if err := tr.Submit("east", in); err != nil {
					t.Fatal(err)
				}
				want := expected(t, in)
				waitVersion(t, outputs, "east", want.GetVersion())
				e, err := snapshots.GetEncoded(t.Context(), outputs, "east")
				if err != nil {
					t.Fatal(err)
				}
				if e.Table == nil {
					t.Fatal("the output was published without its table")
				}
				fromTable, err := snapshots.ScanOutputTable(e.Data, e.Table)
				if err != nil {
					t.Fatalf("the published table does not match its encoding: %v", err)
				}
				full, err := snapshots.ScanOutput(e.Data)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(fromTable.Index.Objects, full.Index.Objects) || fromTable.Objects != len(want.GetObjects()) {
					t.Fatalf("the table's index is not the encoding's (%d objects, want %d)", fromTable.Objects, len(want.GetObjects()))
				}
			}
			if got := m.kept.Load(); (got > 0) != c.kept || got > c.budget {
				t.Fatalf("encoding cache holds %d bytes with a budget of %d", got, c.budget)
			}
		})
	}
}
