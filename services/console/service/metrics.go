package service

import (
	"github.com/meshplane/meshplane/services/console/internal/app"
	"github.com/meshplane/meshplane/services/console/internal/domain"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the console's own; API calls by method and code come from
// platform's handler interceptors (meshplane_rpc_*).
type metrics struct {
	signIns  *prometheus.CounterVec
	sessions prometheus.Gauge
	denials  *prometheus.CounterVec
	upstream *prometheus.CounterVec
}

var _ app.Metrics = (*metrics)(nil)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		signIns:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "meshplane_console_sign_ins_total", Help: "Sign-ins by result: ok or refused."}, []string{"result"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{Name: "meshplane_console_active_sessions", Help: "Sessions not expired."}),
		denials:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "meshplane_console_rbac_denials_total", Help: "Calls refused by the user's Kubernetes RBAC, by view."}, []string{"view"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "meshplane_console_upstream_errors_total", Help: "Failed reads of the management services, by call."}, []string{"call"}),
	}
	for _, c := range []prometheus.Collector{m.signIns, m.sessions, m.denials, m.upstream} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) SignIn(ok bool) {
	if ok {
		m.signIns.WithLabelValues("ok").Inc()
		return
	}
	m.signIns.WithLabelValues("refused").Inc()
}

func (m *metrics) ActiveSessions(n int)      { m.sessions.Set(float64(n)) }
func (m *metrics) Denied(v domain.View)      { m.denials.WithLabelValues(string(v)).Inc() }
func (m *metrics) UpstreamError(call string) { m.upstream.WithLabelValues(call).Inc() }
