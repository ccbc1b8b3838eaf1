package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshplane/meshplane/libs/snapshots"
	"github.com/meshplane/meshplane/services/distribution/internal/app"
	goredis "github.com/redis/go-redis/v9"
)

// IndexTTL bounds how long an output index is kept, whatever happens to
// the list that trims them.
const IndexTTL = 24 * time.Hour

// Indexes is an app.IndexStore in Redis, shared by every replica:
//
//	meshplane:{I}:index3:<cluster>:<version>   string: snapshots.OutputIndex.Encode(), expires after IndexTTL
//	meshplane:{I}:indexes3:<cluster>           list of versions, newest first, at most app.KeepIndexes
//
// The "3" is the definition of the content hash (snapshots.ScanOutput's,
// XXH64 over the object's encoding; "2" was SHA-256): a replica of a
// release that hashed objects
// otherwise keeps its indexes under the old names, so that the two never
// diff one's index against the other's hashes during an upgrade (which
// would only send bigger deltas, but for nothing).
type Indexes struct {
	client goredis.UniversalClient
	base   string
}

var _ app.IndexStore = (*Indexes)(nil)

// NewIndexes returns the index store of install.
func NewIndexes(client goredis.UniversalClient, install string) *Indexes {
	return &Indexes{client: client, base: fmt.Sprintf("meshplane:{%s}", install)}
}

func (s *Indexes) key(cluster, version string) string {
	return s.base + ":index3:" + cluster + ":" + version
}
func (s *Indexes) listKey(cluster string) string { return s.base + ":indexes3:" + cluster }

// PutIndex writes the index and makes its version the newest of the
// cluster's list, in one transaction; the indexes of versions the list
// no longer holds are deleted after it.
func (s *Indexes) PutIndex(ctx context.Context, cluster, version string, idx snapshots.OutputIndex) error {
	list := s.listKey(cluster)
	var older *goredis.StringSliceCmd
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, s.key(cluster, version), idx.Encode(), IndexTTL)
		p.LRem(ctx, list, 0, version)
		p.LPush(ctx, list, version)
		older = p.LRange(ctx, list, app.KeepIndexes, -1)
		p.LTrim(ctx, list, 0, app.KeepIndexes-1)
		p.Expire(ctx, list, IndexTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("put the output index of cluster %q version %s: %w", cluster, version, err)
	}
	if len(older.Val()) == 0 {
		return nil
	}
	keys := make([]string, 0, len(older.Val()))
	for _, v := range older.Val() {
		if v != version {
			keys = append(keys, s.key(cluster, v))
		}
	}
	if err := s.client.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("delete old output indexes of cluster %q: %w", cluster, err)
	}
	return nil
}

// GetIndex reads an index; one the list no longer holds is gone too.
func (s *Indexes) GetIndex(ctx context.Context, cluster, version string) (snapshots.OutputIndex, error) {
	b, err := s.client.Get(ctx, s.key(cluster, version)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return snapshots.OutputIndex{}, snapshots.ErrNotFound
	}
	if err != nil {
		return snapshots.OutputIndex{}, fmt.Errorf("get the output index of cluster %q version %s: %w", cluster, version, err)
	}
	idx, err := snapshots.DecodeIndex(b)
	if err != nil {
		// A damaged index is as good as none: the agent gets the whole
		// snapshot.
		return snapshots.OutputIndex{}, fmt.Errorf("%w: cluster %q version %s: %v", snapshots.ErrNotFound, cluster, version, err)
	}
	return idx, nil
}
