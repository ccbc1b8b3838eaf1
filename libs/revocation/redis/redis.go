// Package redis reads the revocation set that registration keeps in Redis.
package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// Revoked returns the revocations that have not expired at now, by serial.
func (s *Source) Revoked(ctx context.Context, now time.Time) ([]revocation.Revoked, error) {
	zs, err := s.client.ZRangeByScoreWithScores(ctx, Key(s.install), &goredis.ZRangeBy{
		Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("redis: read revocations: %w", err)
	}
	return FromScores(zs), nil
}

// FromScores reads the set's members: serial, and expiry in unix ms.
func FromScores(zs []goredis.Z) []revocation.Revoked {
	out := make([]revocation.Revoked, 0, len(zs))
	for _, z := range zs {
		serial, _ := z.Member.(string)
		out = append(out, revocation.Revoked{Serial: serial, NotAfter: time.UnixMilli(int64(z.Score))})
	}
	slices.SortFunc(out, func(a, b revocation.Revoked) int { return strings.Compare(a.Serial, b.Serial) })
	return out
}
