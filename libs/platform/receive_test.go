package platform_test

import (
	"context"
	"errors"
	"testing"

	"github.com/meshplane/meshplane/libs/platform"
)

func TestReceiveOrDone(t *testing.T) {
	// A receive that returns: its results.
	v, err := platform.ReceiveOrDone(t.Context(), func() (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("ReceiveOrDone = %d, %v; want 7, nil", v, err)
	}
	// A receive blocked until the test ends: the context's cause, at once.
	cause := errors.New("server is shutting down")
	ctx, cancel := context.WithCancelCause(t.Context())
	release := make(chan struct{})
	defer close(release)
	cancel(cause)
	v, err = platform.ReceiveOrDone(ctx, func() (int, error) { <-release; return 1, nil })
	if v != 0 || !errors.Is(err, cause) {
		t.Fatalf("ReceiveOrDone after the context ended = %d, %v; want 0 and the cause", v, err)
	}
}
