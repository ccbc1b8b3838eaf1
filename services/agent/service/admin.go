package service

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/meshplane/meshplane/libs/platform"
	"github.com/meshplane/meshplane/services/agent/internal/app"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// adminServer serves /healthz, /readyz and /metrics on the admin port.
type adminServer struct {
	ln    net.Listener
	mux   *http.ServeMux
	srv   *http.Server
	ready atomic.Bool
	// cacerts reports the state of the Istio intermediate CAs, once the
	// manager exists.
	cacerts atomic.Pointer[func() []app.CACertsStatus]
}

func (a *Agent) adminServer() (*adminServer, error) {
	ln := a.adminLn
	if ln == nil {
		var err error
		if ln, err = platform.Listen(context.Background(), a.cfg.AdminAddr); err != nil {
			return nil, err
		}
	}
	s := &adminServer{ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "not ready: registering or syncing caches", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	// The state of each wanted cacerts Secret: current (with expiry and
	// renewal time), conflict (the user's own Secret, left alone), failing
	// (with the last error) or pending. No key material.
	mux.HandleFunc("/debug/cacerts", func(w http.ResponseWriter, _ *http.Request) {
		states := []app.CACertsStatus{}
		if f := s.cacerts.Load(); f != nil {
			states = (*f)()
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(states)
	})
	s.mux = mux
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

func (s *adminServer) setReady(v bool) { s.ready.Store(v) }

func (s *adminServer) setCACerts(f func() []app.CACertsStatus) { s.cacerts.Store(&f) }

func (s *adminServer) serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.srv.Shutdown(sctx)
	}()
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
