package connectrpc

import (
	"errors"
	"testing"

	"connectrpc.com/connect"
	"github.com/meshplane/meshplane/libs/snapshots/meshview"
	"github.com/meshplane/meshplane/services/console/internal/app"
)

func TestClusterPushStates(t *testing.T) {
	for _, tc := range []struct {
		in   meshview.ClusterCheck
		want string
	}{
		{meshview.ClusterCheck{Push: "connected"}, "connected"},
		{meshview.ClusterCheck{Push: "connected, refused", Refused: &meshview.PushRefusal{Reason: "destinations", Message: "over"}}, "connected"},
		{meshview.ClusterCheck{Push: "disconnected", Stale: true}, "stale"},
		{meshview.ClusterCheck{Push: "disconnected"}, "disconnected"},
		{meshview.ClusterCheck{Push: "never"}, "never"},
	} {
		if got := clusterToProto(tc.in).GetPush(); got != tc.want {
			t.Errorf("push %q (stale %v) = %q, want %q", tc.in.Push, tc.in.Stale, got, tc.want)
		}
	}
	if got := clusterToProto(meshview.ClusterCheck{Refused: &meshview.PushRefusal{Reason: "invalid", Message: "bad"}}).GetRefused(); got != "invalid: bad" {
		t.Errorf("refused = %q", got)
	}
}

func TestErrorTable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want connect.Code
	}{
		{&app.DeniedError{User: "a", What: "list x"}, connect.CodePermissionDenied},
		{app.ErrUnauthenticated, connect.CodeUnauthenticated},
		{errors.Join(app.ErrInvalid, errors.New("kind")), connect.CodeInvalidArgument},
		{app.ErrNotFound, connect.CodeNotFound},
		{app.ErrUnavailable, connect.CodeUnavailable},
		{errors.New("other"), connect.CodeInternal},
	} {
		if got := connect.CodeOf(toConnect(tc.err)); got != tc.want {
			t.Errorf("%v -> %v, want %v", tc.err, got, tc.want)
		}
	}
}
