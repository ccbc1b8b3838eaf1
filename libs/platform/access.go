package platform

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Allow is the set of callers a procedure admits.
type Allow uint8

const (
	// AllowPublic admits anyone, with or without a certificate.
	AllowPublic Allow = 1 << iota
	// AllowCluster admits agents (spiffe://<td>/cluster/<name>).
	AllowCluster
	// AllowService admits management services (spiffe://<td>/service/<name>).
	AllowService

	// AllowAuthenticated admits any verified identity. It is what a
	// procedure that no policy names gets.
	AllowAuthenticated = AllowCluster | AllowService
)

func (a Allow) admits(k Kind) bool {
	switch k {
	case KindCluster:
		return a&AllowCluster != 0
	case KindService:
		return a&AllowService != 0
	default:
		return false
	}
}

// String lists the admitted callers, for error messages.
func (a Allow) String() string {
	if a&AllowPublic != 0 {
		return "anyone"
	}
	var kinds []string
	if a&AllowCluster != 0 {
		kinds = append(kinds, "clusters")
	}
	if a&AllowService != 0 {
		kinds = append(kinds, "services")
	}
	if len(kinds) == 0 {
		return "nobody"
	}
	return strings.Join(kinds, " and ")
}

// AccessPolicy maps procedures to the callers they admit. A key is either a
// full procedure ("/meshplane.registration.v1.RegistrationService/Register")
// or a whole service ("/grpc.health.v1.Health/"); the procedure wins over its
// service. A procedure that no key matches admits any verified identity and
// nobody else, so a new RPC is never public by accident.
type AccessPolicy map[string]Allow

// Lookup returns what the policy admits for procedure.
func (p AccessPolicy) Lookup(procedure string) Allow {
	if a, ok := p[procedure]; ok {
		return a
	}
	if i := strings.LastIndexByte(procedure, '/'); i > 0 {
		if a, ok := p[procedure[:i+1]]; ok {
			return a
		}
	}
	return AllowAuthenticated
}

// defaultAccessPolicy opens gRPC health checking to anyone, because load
// balancers and probes have no client certificate. Reflection stays behind
// authentication like everything else.
func defaultAccessPolicy() AccessPolicy {
	return AccessPolicy{"/grpc.health.v1.Health/": AllowPublic}
}

// VersionHeader carries the server's build version (Version) on every
// response to a caller with a verified identity.
const VersionHeader = "Meshplane-Server-Version"

// These errors go to callers: short, and naming no internals.
var (
	errNoIdentity = errors.New("no verified client certificate naming a cluster or service")
	errExpired    = errors.New("client certificate has expired; reconnect with a renewed one")
	errRevoked    = errors.New("client certificate has been revoked")
	errRevocation = errors.New("cannot check client certificate revocation right now")
)

// guard is the HTTP middleware in front of every RPC handler. It runs before
// any handler option, so authorization cannot be skipped by a service that
// builds its handler without DefaultHandlerOptions; the price is that calls it
// rejects never reach the logging and metrics interceptors, so it logs and
// counts them itself.
type guard struct {
	next        http.Handler
	logger      *slog.Logger
	policy      *atomic.Pointer[AccessPolicy]
	trustDomain string
	revocation  RevocationChecker
	errWriter   *connect.ErrorWriter
	rejected    *prometheus.CounterVec
	now         func() time.Time
	// calls, when set, tracks admitted calls so that they can be cut when
	// the certificate is revoked or expires while they are open.
	calls *openCalls
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	procedure := r.URL.Path
	id, hasID := g.identity(r)
	if hasID {
		if !g.now().Before(id.NotAfter) {
			// Connection: close makes Go's HTTP/2 server send GOAWAY, so the
			// client's next call dials again with its renewed certificate
			// instead of reusing a connection that can no longer work.
			w.Header().Set("Connection", "close")
			g.reject(w, r, connect.CodeUnauthenticated, errExpired, id)
			return
		}
		if g.revocation != nil {
			revoked, err := g.revocation.IsRevoked(ctx, id.Serial)
			switch {
			case err != nil:
				g.logger.ErrorContext(ctx, "revocation check failed", "procedure", procedure, "identity", id.String(), "serial", id.Serial, "error", err)
				g.reject(w, r, connect.CodeUnavailable, errRevocation, id)
				return
			case revoked:
				w.Header().Set("Connection", "close")
				g.reject(w, r, connect.CodeUnauthenticated, errRevoked, id)
				return
			}
		}
		ctx = ContextWithIdentity(ctx, id)
		// Authenticated callers learn the server's build, so that meshctl
		// version can report it; strangers do not.
		w.Header().Set(VersionHeader, Version)
		if g.calls != nil {
			var body io.Closer
			if r.ProtoMajor == 2 {
				// Closing an HTTP/1 body waits for a blocked Read; an HTTP/2
				// one breaks it.
				body = r.Body
			}
			var done func()
			ctx, done = g.calls.add(ctx, id, procedure, body)
			defer done()
		}
		r = r.WithContext(ctx)
	}

	allow := (*g.policy.Load()).Lookup(procedure)
	switch {
	case allow&AllowPublic != 0:
	case !hasID:
		g.reject(w, r, connect.CodeUnauthenticated,
			fmt.Errorf("%s: %w", procedure, errNoIdentity), Identity{})
		return
	case !allow.admits(id.Kind):
		g.reject(w, r, connect.CodePermissionDenied,
			fmt.Errorf("%s admits only %s; caller is %s", procedure, allow, id), id)
		return
	case allow&AllowPublic == 0 && id.Kind == KindService && readOnlyServices[id.Name] && !ReadOnlyProcedure(procedure):
		g.reject(w, r, connect.CodePermissionDenied,
			fmt.Errorf("%s changes state, and %s may only read", procedure, id), id)
		return
	}
	g.next.ServeHTTP(w, r)
}

// readOnlyServices are the service identities that may call only the
// procedures that change nothing: the operator console reads for the
// people signed into it, and its certificate must not let anyone who takes
// it register, approve or deregister a cluster, or push a snapshot. The
// console enforces the same on its side; this is the management services'
// own check.
var readOnlyServices = map[string]bool{"console": true}

// ReadOnlyProcedure reports whether procedure ("/pkg.Service/Method") is declared
// with idempotency_level = NO_SIDE_EFFECTS in its proto. A procedure the
// process does not know (no generated package registered it) changes
// state, for all the guard can tell.
//
// The registry lookup is a map read: no cache, which a caller naming
// procedures that do not exist could grow.
func ReadOnlyProcedure(procedure string) bool {
	if name := strings.ReplaceAll(strings.TrimPrefix(procedure, "/"), "/", "."); protoreflect.FullName(name).IsValid() {
		if d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name)); err == nil {
			if m, ok := d.(protoreflect.MethodDescriptor); ok {
				opts, _ := m.Options().(*descriptorpb.MethodOptions)
				return opts.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS
			}
		}
	}
	return false
}

// identity reads the caller from a client certificate that the TLS stack has
// verified. PeerCertificates alone proves nothing: it is whatever the client
// sent, so no verified chain means no identity.
func (g *guard) identity(r *http.Request) (Identity, bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return Identity{}, false
	}
	id, err := IdentityFromCertificate(r.TLS.VerifiedChains[0][0])
	if err != nil {
		g.logger.DebugContext(r.Context(), "client certificate names no identity", "peer", r.RemoteAddr, "error", err)
		return Identity{}, false
	}
	if g.trustDomain != "" && id.TrustDomain != g.trustDomain {
		g.logger.DebugContext(r.Context(), "client certificate from a foreign trust domain", "peer", r.RemoteAddr, "identity", id.String())
		return Identity{}, false
	}
	return id, true
}

func (g *guard) reject(w http.ResponseWriter, r *http.Request, code connect.Code, err error, id Identity) {
	g.rejected.WithLabelValues(code.String()).Inc()
	attrs := []any{"procedure", r.URL.Path, "code", code.String(), "peer", r.RemoteAddr, "reason", err.Error()}
	if id.Name != "" {
		attrs = append(attrs, "identity", id.String())
	}
	g.logger.InfoContext(r.Context(), "rpc rejected", attrs...)
	cerr := connect.NewError(code, err)
	if g.errWriter.IsSupported(r) {
		_ = g.errWriter.Write(w, r, cerr)
		return
	}
	// Not an RPC at all (a browser, a scanner): answer in plain HTTP.
	status := http.StatusForbidden
	switch code {
	case connect.CodeUnauthenticated:
		status = http.StatusUnauthorized
	case connect.CodeUnavailable:
		status = http.StatusServiceUnavailable
	}
	http.Error(w, cerr.Error(), status)
}

// mergePolicy copies the current policy with p's entries on top, so readers
// on the request path never take a lock.
func mergePolicy(cur *atomic.Pointer[AccessPolicy], p AccessPolicy) {
	for {
		old := cur.Load()
		next := maps.Clone(*old)
		maps.Copy(next, p)
		if cur.CompareAndSwap(old, &next) {
			return
		}
	}
}
