package service

import "github.com/prometheus/client_golang/prometheus"

// deltaMetrics counts the deltas the agent received from distribution.
type deltaMetrics struct {
	received *prometheus.CounterVec
}

func newDeltaMetrics(reg prometheus.Registerer) (*deltaMetrics, error) {
	m := &deltaMetrics{received: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "meshplane_agent_deltas_total",
		Help: "Deltas received from distribution, by outcome: applied, or refused because the state they make is not the version they name (the agent then asks for the whole snapshot and deletes nothing).",
	}, []string{"outcome"})}
	for _, o := range []string{"applied", "refused"} {
		m.received.WithLabelValues(o)
	}
	if err := reg.Register(m.received); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *deltaMetrics) observe(applied bool) {
	if applied {
		m.received.WithLabelValues("applied").Inc()
		return
	}
	m.received.WithLabelValues("refused").Inc()
}
