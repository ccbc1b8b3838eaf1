// Package debughttp serves distribution's debug pages on the admin port.
package debughttp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
)

// SnapshotsPath is where Snapshots is mounted; the cluster follows it.
const SnapshotsPath = "/debug/snapshots/"

// SnapshotSource returns a cluster's current output snapshot, or
// snapshots.ErrNotFound.
type SnapshotSource func(ctx context.Context, cluster string) (*snapshotv1.OutputSnapshot, error)

// Snapshots serves GET /debug/snapshots/<cluster>: the cluster's current
// output snapshot as JSON, with each object's spec and each status decoded
// to a JSON object instead of base64.
func Snapshots(src SnapshotSource, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		cluster := strings.TrimPrefix(r.URL.Path, SnapshotsPath)
		if cluster == "" || strings.Contains(cluster, "/") {
			http.Error(w, "usage: "+SnapshotsPath+"<cluster>", http.StatusNotFound)
			return
		}
		snap, err := src(r.Context(), cluster)
		if errors.Is(err, snapshots.ErrNotFound) {
			http.Error(w, "no output snapshot for cluster "+cluster, http.StatusNotFound)
			return
		}
		if err != nil {
			log.Warn("debug: reading an output snapshot failed", "cluster", cluster, "error", err)
			http.Error(w, "reading the output snapshot failed: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		b, err := Render(snap)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
}

// Render encodes snap as snapshots.RenderJSON does.
func Render(snap *snapshotv1.OutputSnapshot) ([]byte, error) { return snapshots.RenderJSON(snap) }
