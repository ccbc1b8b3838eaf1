// Package debughttp serves distribution's debug pages on the admin port.
package debughttp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"github.com/meshplane/meshplane/libs/snapshots"
	"google.golang.org/protobuf/encoding/protojson"
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

// Render encodes snap as indented JSON with protojson's field names, and
// replaces the base64 of objects[].spec and statuses[].status with the JSON
// they hold. A value that is not valid JSON is left as base64.
func Render(snap *snapshotv1.OutputSnapshot) ([]byte, error) {
	raw, err := protojson.Marshal(snap)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	decode := func(list, field string, values func(i int) []byte) {
		items, _ := doc[list].([]any)
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				continue
			}
			b := values(i)
			if len(b) == 0 || !json.Valid(b) {
				continue
			}
			m[field] = json.RawMessage(b)
		}
	}
	decode("objects", "spec", func(i int) []byte { return snap.GetObjects()[i].GetSpec() })
	decode("statuses", "status", func(i int) []byte { return snap.GetStatuses()[i].GetStatus() })
	return json.MarshalIndent(doc, "", "  ")
}
