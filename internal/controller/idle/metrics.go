package idle

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	suspends = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paddock_sandbox_suspends_total",
		Help: "Sandboxes suspended by the control plane, by reason (Idle).",
	}, []string{"reason"})

	activityErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "paddock_idle_activity_errors_total",
		Help: "Activity queries to sandboxd that failed; a Sandbox is not suspended while its daemon cannot answer.",
	})
)

// RegisterMetrics registers the idle controller's metrics with reg.
func RegisterMetrics(reg prometheus.Registerer) error {
	return errors.Join(reg.Register(suspends), reg.Register(activityErrors))
}
