package connectrpc

import (
	"errors"

	"github.com/meshplane/meshplane/services/registration/internal/app"
	"github.com/meshplane/meshplane/services/registration/internal/domain"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count what registration did, so that an operator can alert on
// token guessing or a token used twice.
type Metrics struct {
	issued  *prometheus.CounterVec
	refused *prometheus.CounterVec
}

// NewMetrics registers the counters on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		issued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meshplane", Subsystem: "registration", Name: "certificates_issued_total",
			Help: "Certificates issued, by call: register and renew (cluster certificates), sign_intermediate (VirtualMesh intermediate CAs).",
		}, []string{"call"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "meshplane", Subsystem: "registration", Name: "refused_total",
			Help: "Register, Renew and SignIntermediate calls refused, by call and reason.",
		}, []string{"call", "reason"}),
	}
	m.issued, m.refused = register(reg, m.issued), register(reg, m.refused)
	return m
}

// register adds c to reg, or returns the collector already registered
// under its name (two services built on one registry), so wiring never
// panics.
func register(reg prometheus.Registerer, c *prometheus.CounterVec) *prometheus.CounterVec {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing
			}
		}
	}
	return c
}

func (m *Metrics) ok(call string) {
	if m != nil {
		m.issued.WithLabelValues(call).Inc()
	}
}

func (m *Metrics) fail(call string, err error) {
	if m != nil {
		m.refused.WithLabelValues(call, reason(err)).Inc()
	}
}

// reason names a refusal with a small, fixed set of label values.
func reason(err error) string {
	switch {
	case errors.Is(err, domain.ErrTokenExpired):
		return "token_expired"
	case errors.Is(err, domain.ErrTokenUsed):
		return "token_used"
	case errors.Is(err, domain.ErrTokenInvalid):
		return "token_invalid"
	case errors.Is(err, domain.ErrInvalidCSR), errors.Is(err, app.ErrInvalidArgument):
		return "invalid_request"
	case errors.Is(err, domain.ErrPendingApproval):
		return "pending_approval"
	case errors.Is(err, domain.ErrDeregistered):
		return "deregistered"
	case errors.Is(err, domain.ErrIntermediateDenied):
		return "denied"
	case errors.Is(err, domain.ErrIntermediatePrecondition):
		return "precondition"
	default:
		return "internal"
	}
}
