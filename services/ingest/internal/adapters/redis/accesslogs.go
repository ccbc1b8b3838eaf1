// Package redis carries access-log entries between ingest replicas over
// Redis pub/sub.
package redis

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	"github.com/meshplane/meshplane/services/ingest/internal/app"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
)

// AccessLogBus publishes each replica's accepted entries on
//
//	meshplane:{I}:accesslogs   pub/sub channel, messages "<replica>\n<WatchAccessLogsResponse>"
//
// Pub/sub keeps nothing: a replica that is not subscribed (or Redis that
// is down) misses those entries, which is acceptable for a live tail.
type AccessLogBus struct {
	client  goredis.UniversalClient
	channel string
	origin  []byte // this replica's prefix, "<replica>\n"
	log     *slog.Logger
}

var _ app.AccessLogBus = (*AccessLogBus)(nil)

// Channel is the pub/sub channel of an install's access logs.
func Channel(install string) string { return fmt.Sprintf("meshplane:{%s}:accesslogs", install) }

// NewAccessLogBus returns the bus of install; replica must be unique among
// the replicas, so that each skips its own messages.
func NewAccessLogBus(client goredis.UniversalClient, install, replica string, log *slog.Logger) *AccessLogBus {
	return &AccessLogBus{client: client, channel: Channel(install), origin: []byte(replica + "\n"), log: log}
}

// Publish implements app.AccessLogBus.
func (b *AccessLogBus) Publish(ctx context.Context, entries []*observabilityv1.AccessLogEntry) error {
	msg, err := proto.Marshal(&ingestv1.WatchAccessLogsResponse{Entries: entries})
	if err != nil {
		return fmt.Errorf("encode access logs: %w", err)
	}
	payload := make([]byte, 0, len(b.origin)+len(msg))
	payload = append(append(payload, b.origin...), msg...)
	if err := b.client.Publish(ctx, b.channel, payload).Err(); err != nil {
		return fmt.Errorf("publish access logs on %s: %w", b.channel, err)
	}
	return nil
}

// Subscribe implements app.AccessLogBus. go-redis resubscribes after a
// connection loss; Subscribe returns only when ctx ends.
func (b *AccessLogBus) Subscribe(ctx context.Context, deliver func([]*observabilityv1.AccessLogEntry)) error {
	ps := b.client.Subscribe(ctx, b.channel)
	defer ps.Close()
	go func() {
		// Receive does not watch ctx; closing unblocks it.
		<-ctx.Done()
		ps.Close()
	}()
	wait := 50 * time.Millisecond
	for {
		msg, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil
			}
			wait = min(2*wait, 2*time.Second)
			continue
		}
		wait = 50 * time.Millisecond
		m, ok := msg.(*goredis.Message)
		if !ok {
			continue
		}
		payload := []byte(m.Payload)
		if bytes.HasPrefix(payload, b.origin) {
			continue // this replica delivered its own entries already
		}
		_, body, found := bytes.Cut(payload, []byte("\n"))
		if !found {
			b.log.Warn("malformed access-log message on Redis", "channel", b.channel)
			continue
		}
		var batch ingestv1.WatchAccessLogsResponse
		if err := proto.Unmarshal(body, &batch); err != nil {
			b.log.Warn("undecodable access-log message on Redis", "channel", b.channel, "error", err)
			continue
		}
		deliver(batch.GetEntries())
	}
}
