// Package contract holds the contract suites that every adapter of a port
// must pass; the adapters' tests run them. (The suites of the store ports
// that only memory and Redis implement live in this package's tests.)
package contract

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshplane/meshplane/services/registration/internal/adapters/smallstep"
	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
)

// RootStoreSuite is the contract of app.RootStore. newReplica returns a
// store over the same backing place each time: two of them are two
// replicas.
func RootStoreSuite(t *testing.T, newReplica func() app.RootStore) {
	vm := domain.VirtualMesh{Ref: domain.ObjectRef{Name: "shared", Namespace: "meshplane"}}
	mk := func(n *atomic.Int32) func() (domain.RootCA, error) {
		return func() (domain.RootCA, error) {
			n.Add(1)
			return smallstep.VirtualMeshCA{}.NewRoot(vm, time.Now())
		}
	}
	t.Run("create then load", func(t *testing.T) {
		s := newReplica()
		var made atomic.Int32
		r1, created, err := s.LoadOrCreateRoot(t.Context(), "vm-first", mk(&made))
		if err != nil || !created {
			t.Fatalf("first LoadOrCreateRoot: created %v, %v", created, err)
		}
		r2, created, err := newReplica().LoadOrCreateRoot(t.Context(), "vm-first", mk(&made))
		if err != nil || created {
			t.Fatalf("second LoadOrCreateRoot: created %v, %v", created, err)
		}
		if !r1.Cert.Equal(r2.Cert) || r2.Check(time.Now()) != nil || made.Load() != 1 {
			t.Fatalf("second call: same root %v, check %v, made %d times", r1.Cert.Equal(r2.Cert), r2.Check(time.Now()), made.Load())
		}
	})
	t.Run("keys are separate", func(t *testing.T) {
		var made atomic.Int32
		a, _, err := newReplica().LoadOrCreateRoot(t.Context(), "vm-a", mk(&made))
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := newReplica().LoadOrCreateRoot(t.Context(), "vm-b", mk(&made))
		if err != nil {
			t.Fatal(err)
		}
		if a.Cert.Equal(b.Cert) {
			t.Fatal("two keys share a root")
		}
	})
	t.Run("create fails: nothing stored", func(t *testing.T) {
		boom := errors.New("boom")
		_, _, err := newReplica().LoadOrCreateRoot(t.Context(), "vm-fail", func() (domain.RootCA, error) { return domain.RootCA{}, boom })
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
		var made atomic.Int32
		if _, created, err := newReplica().LoadOrCreateRoot(t.Context(), "vm-fail", mk(&made)); err != nil || !created {
			t.Fatalf("after a failed create: created %v, %v", created, err)
		}
	})
	t.Run("racing replicas end with one root", func(t *testing.T) {
		const n = 8
		var wg sync.WaitGroup
		var made, stored atomic.Int32
		roots := make([]domain.RootCA, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := newReplica()
				<-start
				var created bool
				roots[i], created, errs[i] = s.LoadOrCreateRoot(t.Context(), "vm-race", mk(&made))
				if created {
					stored.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("replica %d: %v", i, errs[i])
			}
			if !roots[i].Cert.Equal(roots[0].Cert) || !roots[i].Cert.PublicKey.(domain.PublicKey).Equal(roots[0].Key.Public()) {
				t.Fatalf("replica %d ended with another root", i)
			}
		}
		if stored.Load() != 1 {
			t.Fatalf("%d replicas say they stored the root, want 1 (made %d)", stored.Load(), made.Load())
		}
	})
}
