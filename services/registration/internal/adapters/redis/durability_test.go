package redis_test

import (
	"context"
	"errors"
	"github.com/meshplane/meshplane/libs/revocation"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/meshplane/meshplane/libs/kube/kubetest"
	"github.com/meshplane/meshplane/libs/redistest"
	redisstore "github.com/meshplane/meshplane/services/registration/internal/adapters/redis"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// With replicas wanted and none answering, a revocation is not reported
// done: the caller is told, and retries.
func TestSecurityWritesWaitForReplicas(t *testing.T) {
	d := redistest.StartDeployment(t, redistest.Sentinel)
	ctx := t.Context()
	s := redisstore.New(d.Client(t), "prod").WithDurability(redisstore.Durability{Replicas: 1, Timeout: 300 * time.Millisecond})
	now := time.Now()
	if err := s.Revoke(ctx, []domain.IssuedCert{{Serial: "1", NotAfter: now.Add(time.Hour)}}); err != nil {
		t.Fatalf("Revoke with replicas up: %v", err)
	}
	primary, err := d.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range d.Nodes {
		if n != primary {
			n.Kill()
		}
	}
	writes := map[string]func() error{
		"revoke": func() error {
			return s.Revoke(ctx, []domain.IssuedCert{{Serial: "2", NotAfter: now.Add(time.Hour)}})
		},
		"put token": func() error {
			return s.PutToken(ctx, domain.BootstrapToken{Cluster: "east", Hash: domain.HashToken("t"), CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
		},
		"spend token": func() error {
			_, err := s.MarkTokenUsed(ctx, "east", domain.HashToken("t"), now)
			return err
		},
		"update cluster": func() error {
			_, err := s.UpdateCluster(ctx, "east", func(c *domain.Cluster, _ bool) error {
				*c = domain.NewCluster("east", false, now)
				return nil
			})
			return err
		},
		"delete token": func() error { return s.DeleteToken(ctx, "east") },
	}
	for _, name := range []string{"revoke", "put token", "spend token", "update cluster", "delete token"} {
		if err := writes[name](); !errors.Is(err, redisstore.ErrNotReplicated) {
			t.Errorf("%s with no replica: %v, want ErrNotReplicated", name, err)
		}
	}
}

// SIGKILL of the Sentinel primary while revocations and cluster records
// are written: every write that was reported done is on the promoted
// replica.
func TestAcknowledgedSecurityWritesSurviveFailover(t *testing.T) {
	d := redistest.StartDeployment(t, redistest.Sentinel)
	ctx := t.Context()
	client := d.Client(t)
	s := redisstore.New(client, "prod").WithDurability(redisstore.Durability{Replicas: 1, Timeout: time.Second})
	notAfter := time.Now().Add(time.Hour)

	var mu sync.Mutex
	var acked []string
	failed := 0
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; wctx.Err() == nil; i++ {
			serial := strconv.Itoa(i)
			err := s.Revoke(wctx, []domain.IssuedCert{{Serial: serial, NotAfter: notAfter}})
			if err == nil {
				_, err = s.UpdateCluster(wctx, "c"+serial, func(c *domain.Cluster, _ bool) error {
					*c = domain.NewCluster("c"+serial, false, time.Now())
					return nil
				})
			}
			mu.Lock()
			if err == nil {
				acked = append(acked, serial)
			} else {
				failed++
			}
			mu.Unlock()
		}
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitUntil(t, 10*time.Second, func() bool { return count() >= 50 }, "50 writes before the kill")
	old, err := d.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old.Kill()
	before := count()
	waitUntil(t, 30*time.Second, func() bool { return count() >= before+50 }, "50 more writes after the failover")
	stop()
	wg.Wait()

	if p, err := d.Primary(ctx); err != nil || p == old {
		t.Fatalf("no failover: primary %v, %v", p, err)
	}
	revoked, err := revocation.Serials(redisstore.New(client, "prod").Revoked(ctx, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range revoked {
		have[r] = true
	}
	var lost []string
	for _, serial := range acked {
		if !have[serial] {
			lost = append(lost, serial)
			continue
		}
		if _, err := s.Cluster(ctx, "c"+serial); err != nil {
			lost = append(lost, "cluster c"+serial)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged writes lost in the failover (of %d; %d reported failed): %v", len(lost), len(acked), failed, lost)
	}
	t.Logf("%d writes acknowledged, %d reported failed and retried", len(acked), failed)
}

func waitUntil(t *testing.T, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	err := kubetest.WaitFor(t.Context(), timeout, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
