package platform

import (
	"context"
	"errors"
	"sync"
)

// RunAll runs every function until ctx ends or one of them returns an
// error; then it cancels the others and waits for them. It returns the first
// error. A composition root uses it to run its server beside its loops.
func RunAll(ctx context.Context, fns ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := fn(ctx)
			if err != nil && !errors.Is(err, context.Canceled) {
				once.Do(func() { first = err })
			}
			cancel()
		}()
	}
	wg.Wait()
	return first
}
