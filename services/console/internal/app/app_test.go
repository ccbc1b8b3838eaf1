package app_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "github.com/meshplane/meshplane/libs/gen/meshplane/discovery/v1"
	distributionv1 "github.com/meshplane/meshplane/libs/gen/meshplane/distribution/v1"
	ingestv1 "github.com/meshplane/meshplane/libs/gen/meshplane/ingest/v1"
	observabilityv1 "github.com/meshplane/meshplane/libs/gen/meshplane/observability/v1"
	registrationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/registration/v1"
	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
	translationv1 "github.com/meshplane/meshplane/libs/gen/meshplane/translation/v1"
	"github.com/meshplane/meshplane/services/console/internal/app"
	"github.com/meshplane/meshplane/services/console/internal/domain"
)

type fakeAuthn map[string]domain.User

func (f fakeAuthn) Authenticate(_ context.Context, token string) (domain.User, bool, error) {
	u, ok := f[token]
	return u, ok, nil
}

// fakeAuthz allows what allow lists, as "verb resource namespace", and
// counts the questions.
type fakeAuthz struct {
	allow []string
	asked int
}

func (f *fakeAuthz) Allowed(_ context.Context, _ domain.User, a domain.Attributes) (bool, error) {
	f.asked++
	return slices.Contains(f.allow, a.Verb+" "+a.Resource+" "+a.Namespace), nil
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestSessions(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := app.NewSessions(fakeAuthn{"good": {Username: "alice"}}, domain.SessionPolicy{TTL: time.Hour, Idle: 10 * time.Minute},
		app.WithClock(c.now), app.WithFailureLimit(2, time.Minute))
	ctx := context.Background()
	if _, err := s.SignIn(ctx, "ip1", "bad"); !errors.Is(err, app.ErrTokenRefused) {
		t.Errorf("bad token: %v, want ErrTokenRefused", err)
	}
	sess, err := s.SignIn(ctx, "ip1", "good")
	if err != nil || sess.User.Username != "alice" || len(sess.ID) < 40 || sess.ID == sess.CSRF {
		t.Fatalf("good token: %+v, %v", sess, err)
	}
	if _, err := s.Check(sess.ID, "wrong"); !errors.Is(err, app.ErrUnauthenticated) {
		t.Errorf("wrong CSRF: %v", err)
	}
	if _, err := s.Check(sess.ID, ""); !errors.Is(err, app.ErrUnauthenticated) {
		t.Errorf("no CSRF: %v", err)
	}
	c.t = c.t.Add(9 * time.Minute)
	if _, err := s.Check(sess.ID, sess.CSRF); err != nil {
		t.Errorf("within idle: %v", err)
	}
	c.t = c.t.Add(11 * time.Minute)
	if _, err := s.Check(sess.ID, sess.CSRF); !errors.Is(err, app.ErrUnauthenticated) {
		t.Errorf("idle session: %v, want ErrUnauthenticated", err)
	}
	// Two failures within a minute use up ip1's tries; ip2 is unaffected.
	_, _ = s.SignIn(ctx, "ip1", "bad")
	_, _ = s.SignIn(ctx, "ip1", "")
	if _, err := s.SignIn(ctx, "ip1", "good"); !errors.Is(err, app.ErrTooManyFailures) {
		t.Errorf("third try from ip1: %v, want ErrTooManyFailures", err)
	}
	sess2, err := s.SignIn(ctx, "ip2", "good")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SignOut(sess2.ID, sess2.CSRF); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Check(sess2.ID, sess2.CSRF); !errors.Is(err, app.ErrUnauthenticated) {
		t.Errorf("after sign-out: %v", err)
	}
}

func TestCachedAuthorizer(t *testing.T) {
	c := &clock{t: time.Now()}
	f := &fakeAuthz{allow: []string{"list destinations "}}
	a := app.NewCachedAuthorizer(f, 10*time.Second, c.now)
	ctx := context.Background()
	alice, bob := domain.User{Username: "alice"}, domain.User{Username: "bob", Groups: []string{"x"}}
	for range 3 {
		if ok, _ := a.Allowed(ctx, alice, domain.GraphAttributes()); !ok {
			t.Fatal("denied")
		}
	}
	_, _ = a.Allowed(ctx, bob, domain.GraphAttributes())
	if f.asked != 2 {
		t.Errorf("asked %d times, want once per user", f.asked)
	}
	c.t = c.t.Add(11 * time.Second)
	_, _ = a.Allowed(ctx, alice, domain.GraphAttributes())
	if f.asked != 3 {
		t.Errorf("asked %d times after the TTL, want 3", f.asked)
	}
}

// fakeUpstream answers from fixed outputs.
type fakeUpstream struct {
	outs map[string]*snapshotv1.OutputSnapshot
}

func (f fakeUpstream) Health(context.Context) []domain.ServiceHealth { return nil }
func (f fakeUpstream) ListClusters(context.Context) ([]*ingestv1.ClusterConnectivity, error) {
	return nil, nil
}
func (f fakeUpstream) ListMeshes(context.Context) ([]*discoveryv1.Mesh, error) { return nil, nil }
func (f fakeUpstream) ListWorkloads(context.Context, *ingestv1.DiscoveryFilter) ([]*discoveryv1.Workload, error) {
	return nil, nil
}
func (f fakeUpstream) ListDestinations(context.Context, *ingestv1.DiscoveryFilter) ([]*discoveryv1.Destination, error) {
	return nil, nil
}
func (f fakeUpstream) ListAcks(context.Context) ([]*distributionv1.ClusterAck, error) {
	return nil, nil
}
func (f fakeUpstream) ListRegistrations(context.Context) ([]*registrationv1.Cluster, error) {
	return nil, errors.New("not served")
}
func (f fakeUpstream) TranslationStatus(context.Context) (*translationv1.GetStatusResponse, error) {
	v := map[string]string{}
	for cl, o := range f.outs {
		v[cl] = o.GetVersion()
	}
	return &translationv1.GetStatusResponse{OutputVersions: v}, nil
}
func (f fakeUpstream) Describe(context.Context, *translationv1.DescribeRequest) (*translationv1.DescribeResponse, error) {
	return &translationv1.DescribeResponse{}, nil
}
func (f fakeUpstream) OutputSnapshot(_ context.Context, cl string) (*snapshotv1.OutputSnapshot, error) {
	return f.outs[cl], nil
}
func (f fakeUpstream) WatchAccessLogs(context.Context, *ingestv1.WatchAccessLogsRequest, func([]*observabilityv1.AccessLogEntry) error) error {
	return nil
}

func TestPoliciesLeavesOutWhatRBACDenies(t *testing.T) {
	up := fakeUpstream{outs: map[string]*snapshotv1.OutputSnapshot{"east": {Cluster: "east", Version: "v1", Statuses: []*snapshotv1.ResourceStatus{
		{ApiVersion: "networking.meshplane.dev/v1", Kind: "TrafficPolicy", Namespace: "a", Name: "tp-a", Status: []byte(`{"state":"ACCEPTED"}`)},
		{ApiVersion: "networking.meshplane.dev/v1", Kind: "TrafficPolicy", Namespace: "b", Name: "tp-b", Status: []byte(`{"state":"INVALID","errors":["spec.retries.attempts: must be positive"]}`)},
		{ApiVersion: "networking.meshplane.dev/v1", Kind: "AccessPolicy", Namespace: "a", Name: "ap-a"},
	}}}}
	ctx := context.Background()
	alice := domain.User{Username: "alice"}
	f := &fakeAuthz{allow: []string{"list trafficpolicies b"}}
	c := app.NewConsole(up, f, nil, nil, slog.New(slog.DiscardHandler))
	ps, err := c.Policies(ctx, alice, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Name != "tp-b" || ps[0].State != "INVALID" || !strings.Contains(ps[0].Errors[0], "spec.retries") {
		t.Errorf("policies = %+v, want only tp-b, INVALID naming the field", ps)
	}
	_, err = app.NewConsole(up, &fakeAuthz{}, nil, nil, slog.New(slog.DiscardHandler)).Policies(ctx, alice, "")
	var denied *app.DeniedError
	if !errors.As(err, &denied) || !strings.Contains(err.Error(), `user "alice" may not list trafficpolicies.networking.meshplane.dev`) {
		t.Errorf("no kind allowed: %v, want a denial naming the verb and resource", err)
	}
	out, err := app.NewConsole(up, &fakeAuthz{allow: []string{"get kubernetesclusters "}}, nil, nil, slog.New(slog.DiscardHandler)).Output(ctx, alice, "east", "")
	if err != nil || out.Version != "v1" {
		t.Errorf("output = %+v, %v", out, err)
	}
	if _, err := app.NewConsole(up, &fakeAuthz{allow: []string{"get kubernetesclusters "}}, nil, nil, slog.New(slog.DiscardHandler)).Output(ctx, alice, "east", "v0"); !errors.Is(err, app.ErrNotFound) {
		t.Errorf("unknown version: %v, want ErrNotFound", err)
	}
}
