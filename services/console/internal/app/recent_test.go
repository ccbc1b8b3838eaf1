package app_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	commonv1 "github.com/meshplane/meshplane/libs/gen/meshplane/common/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/services/console/internal/app"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// changingUpstream serves an output whose version the test changes, and
// one access-log batch on a stream that stays open.
type changingUpstream struct {
	fakeUpstream
	mu      sync.Mutex
	version string
	fetched int
}

func (u *changingUpstream) set(v string) { u.mu.Lock(); u.version = v; u.mu.Unlock() }

func (u *changingUpstream) current() *snapshotv1.OutputSnapshot {
	u.mu.Lock()
	defer u.mu.Unlock()
	return &snapshotv1.OutputSnapshot{Cluster: "east", Version: u.version}
}

func (u *changingUpstream) OutputSnapshot(context.Context, string) (*snapshotv1.OutputSnapshot, error) {
	u.mu.Lock()
	u.fetched++
	u.mu.Unlock()
	return u.current(), nil
}

func (u *changingUpstream) TranslationStatus(context.Context) (*translationv1.GetStatusResponse, error) {
	return &translationv1.GetStatusResponse{OutputVersions: map[string]string{"east": u.current().GetVersion()}}, nil
}

func (u *changingUpstream) WatchAccessLogs(ctx context.Context, _ *ingestv1.WatchAccessLogsRequest, fn func([]*observabilityv1.AccessLogEntry) error) error {
	_ = fn([]*observabilityv1.AccessLogEntry{{Cluster: "east", Direction: "outbound", Authority: "reviews:9080", ResponseCode: 500,
		Workload: &commonv1.ClusterObjectRef{Name: "web", Namespace: "ns"}, StartTime: timestamppb.New(time.Now())}})
	<-ctx.Done()
	return ctx.Err()
}

func TestRecentKeepsVersionsAndTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &changingUpstream{version: "v1"}
		r := app.NewRecent(up, slog.New(slog.DiscardHandler), 2, time.Minute, time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		synctest.Wait()
		for _, v := range []string{"v2", "v3"} {
			up.set(v)
			time.Sleep(time.Second) // fake time: one poll
			synctest.Wait()
		}
		time.Sleep(5 * time.Second) // polls with nothing new
		synctest.Wait()
		_, versions := r.Output("east", "")
		if got := strings.Join(versions, ","); got != "v3,v2" {
			t.Errorf("versions = %s, want the last two, newest first", got)
		}
		if up.fetched != 3 {
			t.Errorf("fetched %d outputs, want one per new version", up.fetched)
		}
		counts, available := r.Traffic(time.Now(), time.Minute)
		if !available || len(counts) != 1 || counts[0].Errors != 1 {
			t.Errorf("traffic = %+v (available %v), want one request with an error", counts, available)
		}
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}
