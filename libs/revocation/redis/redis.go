// Package redis reads the revocation set that registration keeps in Redis.
package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/meshplane/meshplane/libs/revocation"
	goredis "github.com/redis/go-redis/v9"
)

// Key is the sorted set of revoked serials of an install: member = serial
// in decimal, score = the certificate's expiry in unix milliseconds.
// Registration writes it; every service reads it.
func Key(install string) string {
	return fmt.Sprintf("meshplane:{%s}:registration:revoked", install)
}

// Source reads the set. It never writes: pruning expired entries is
// registration's job.
type Source struct {
	client  goredis.UniversalClient
	install string
}

var _ revocation.Source = (*Source)(nil)

// NewSource returns a source for install.
func NewSource(client goredis.UniversalClient, install string) *Source {
	return &Source{client: client, install: install}
}

// RevokedSerials returns the serials that have not expired at now.
func (s *Source) RevokedSerials(ctx context.Context, now time.Time) ([]string, error) {
	out, err := s.client.ZRangeByScore(ctx, Key(s.install), &goredis.ZRangeBy{
		Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: read revocations: %w", err)
	}
	slices.Sort(out)
	return out, nil
}
