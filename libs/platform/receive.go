package platform

import "context"

// ReceiveOrDone calls receive (a streaming handler's Receive) and returns
// what it returns, or, when ctx ends first, ctx's cause. A handler blocked
// in Receive does not see its context end: the read of the request body
// goes on until the client sends or closes. So a server shutting down (the
// drain), or a caller whose certificate was revoked, could not end the
// stream. The goroutine left in receive ends when the handler returns and
// the server closes the request body; the handler must not call Receive
// again after ctx ended.
func ReceiveOrDone[T any](ctx context.Context, receive func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := receive()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}
