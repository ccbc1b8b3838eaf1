// Package httpserver is the browser-facing HTTP side of the console:
// sign-in and sign-out with cookies and CSRF, the Connect API under /api/,
// the single-page app with index.html for unknown paths, and the security
// headers and Content-Security-Policy on every response.
package httpserver

import (
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/meshplane/meshplane/services/console/internal/adapters/connectrpc"
	"github.com/meshplane/meshplane/services/console/internal/app"
)

// CSP is the Content-Security-Policy of every response: scripts, styles,
// fonts and API calls from the console itself only, no inline code, no
// framing.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Options configure the handler.
type Options struct {
	Sessions *app.Sessions
	// APIPath and API are the Connect handler (from connectrpc.Handler.Mount),
	// served under /api/.
	APIPath string
	API     http.Handler
	// Static is the built front end; it may lack index.html (then / says
	// the front end is not built).
	Static fs.FS
	// TLS says the browser reaches the console over HTTPS (directly or
	// through a TLS-terminating proxy): HSTS is sent.
	TLS bool
	Log *slog.Logger
	// Now is the clock.
	Now func() time.Time
}

type server struct {
	opts   Options
	static http.Handler
}

// New builds the handler.
func New(o Options) http.Handler {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &server{opts: o, static: http.FileServerFS(o.Static)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /auth/login", s.login)
	mux.HandleFunc("POST /auth/logout", s.logout)
	mux.HandleFunc("/auth/", func(w http.ResponseWriter, _ *http.Request) { writeJSONError(w, http.StatusNotFound, "not found") })
	mux.Handle("/api/", http.StripPrefix("/api", o.API))
	mux.HandleFunc("/", s.spa)
	return s.headers(mux)
}

// headers sets the security headers on every response, and no-store on
// the API and auth paths.
func (s *server) headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if s.opts.TLS {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		if strings.HasPrefix(r.URL.Path, "/api/") || strings.HasPrefix(r.URL.Path, "/auth/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// clientIP is the TCP peer: the failed sign-in limit counts per peer. A
// proxy in front makes every client one peer, which then shares the limit;
// forwarded headers are not trusted, since anyone can send them.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (s *server) login(w http.ResponseWriter, r *http.Request) {
	// Only JSON: a cross-site HTML form cannot send it without a CORS
	// preflight, so another site cannot sign a browser in as someone else.
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeJSONError(w, http.StatusBadRequest, "malformed sign-in: Content-Type must be application/json")
		return
	}
	token, err := ParseLoginBody(http.MaxBytesReader(w, r.Body, MaxLoginBody))
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, "malformed sign-in: "+err.Error())
		return
	}
	sess, err := s.opts.Sessions.SignIn(r.Context(), clientIP(r), token)
	switch {
	case errors.Is(err, app.ErrTooManyFailures):
		w.Header().Set("Retry-After", "60")
		writeJSONError(w, http.StatusTooManyRequests, err.Error())
		return
	case errors.Is(err, app.ErrTokenRefused):
		s.opts.Log.Info("sign-in refused", "client", clientIP(r))
		writeJSONError(w, http.StatusUnauthorized, app.ErrTokenRefused.Error())
		return
	case err != nil:
		s.opts.Log.Warn("sign-in could not be checked", "client", clientIP(r), "error", err)
		writeJSONError(w, http.StatusServiceUnavailable, "the management cluster could not check the token")
		return
	}
	s.opts.Log.Info("signed in", "user", sess.User.Username, "client", clientIP(r))
	http.SetCookie(w, &http.Cookie{Name: connectrpc.SessionCookie, Value: sess.ID, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	// Readable by the page's script, which copies it into X-CSRF-Token.
	http.SetCookie(w, &http.Cookie{Name: connectrpc.CSRFCookie, Value: sess.CSRF, Path: "/", Secure: true, SameSite: http.SameSiteStrictMode})
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{
		"username":  sess.User.Username,
		"expiresAt": s.opts.Sessions.Policy().ExpiresAt(sess).UTC().Format(time.RFC3339),
	})
}

func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(connectrpc.SessionCookie)
	if err != nil {
		writeJSONError(w, http.StatusUnauthorized, app.ErrUnauthenticated.Error())
		return
	}
	if err := s.opts.Sessions.SignOut(c.Value, r.Header.Get(connectrpc.CSRFHeader)); err != nil {
		writeJSONError(w, http.StatusUnauthorized, app.ErrUnauthenticated.Error())
		return
	}
	for _, name := range []string{connectrpc.SessionCookie, connectrpc.CSRFCookie} {
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: name == connectrpc.SessionCookie, Secure: true, SameSite: http.SameSiteStrictMode})
	}
	w.WriteHeader(http.StatusNoContent)
}

// spa serves the built files; any other path gets index.html, so that the
// app's client-side routes load on a reload.
func (s *server) spa(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	if name != "" && name != "index.html" {
		if st, err := fs.Stat(s.opts.Static, name); err == nil && !st.IsDir() {
			if strings.HasPrefix(name, "assets/") {
				// Vite names assets by content hash.
				w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			}
			s.static.ServeHTTP(w, r)
			return
		}
		if strings.HasPrefix(name, "assets/") {
			http.NotFound(w, r)
			return
		}
	}
	index, err := fs.ReadFile(s.opts.Static, "index.html")
	if err != nil {
		http.Error(w, "the console's front end is not built into this binary", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(index)
}
