package snapshots

import (
	"encoding/json"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// RenderJSON encodes a snapshot for people: indented JSON with protojson's
// field names, where an output snapshot's objects[].spec and
// statuses[].status show the JSON they hold instead of base64. A value that
// is not valid JSON is left as base64. The debug pages and meshctl share it.
func RenderJSON(m proto.Message) ([]byte, error) {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	out, ok := m.(*snapshotv1.OutputSnapshot)
	if !ok {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		return json.MarshalIndent(v, "", "  ")
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
	decode("objects", "spec", func(i int) []byte { return out.GetObjects()[i].GetSpec() })
	decode("statuses", "status", func(i int) []byte { return out.GetStatuses()[i].GetStatus() })
	return json.MarshalIndent(doc, "", "  ")
}
