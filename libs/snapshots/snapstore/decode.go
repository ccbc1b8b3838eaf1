package snapstore

import (
	"fmt"

	"google.golang.org/protobuf/proto"
)

func decode[T proto.Message](newT func() T, cluster string, data []byte) (T, error) {
	v := newT()
	if err := proto.Unmarshal(data, v); err != nil {
		var zero T
		return zero, fmt.Errorf("decode snapshot of cluster %q: %w", cluster, err)
	}
	return v, nil
}
