package e2b

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddock-dev/paddock/internal/router/metrics"
)

// frontDoorMetrics are the front door's own series, beside the router's.
type frontDoorMetrics struct {
	requests *prometheus.CounterVec
	creates  *prometheus.HistogramVec
	data     *prometheus.CounterVec
	probes   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *frontDoorMetrics {
	m := &frontDoorMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_e2b_requests_total", Help: "E2B control-plane requests, by operation (route pattern) and status code.",
		}, []string{"operation", "code"}),
		creates: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sandbox_router_e2b_create_duration_seconds", Help: "E2B create and connect, from request to answer, by outcome (ok or failed).",
			Buckets: metrics.DurationBuckets,
		}, []string{"operation", "outcome"}),
		data: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_e2b_data_plane_refusals_total", Help: "E2B data-plane requests refused before reaching a sandbox, by status code.",
		}, []string{"code"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_e2b_daemon_probes_total", Help: "Calls to a sandbox's daemon made by creates and connects waiting for it to accept requests, by result (ok, or refused: not answering or not yet unlocked).",
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.creates, m.data, m.probes)
	}
	return m
}

// instrument counts every control-plane request by the route pattern that served it.
func (m *frontDoorMetrics) instrument(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		start := time.Now()
		mux.ServeHTTP(rec, r)
		op := r.Pattern // set by the mux on the request it served: a bounded set
		if op == "" || op == "/" {
			op = "unserved"
		}
		m.requests.WithLabelValues(op, strconv.Itoa(rec.code)).Inc()
		if r.Method == http.MethodPost && (op == "POST /sandboxes" || op == "POST /v2/sandboxes" || isConnect(op)) {
			outcome := "ok"
			if rec.code >= 300 {
				outcome = "failed"
			}
			m.creates.WithLabelValues(op, outcome).Observe(time.Since(start).Seconds())
		}
	})
}

func isConnect(op string) bool {
	return op == "POST /sandboxes/{id}/connect" || op == "POST /v2/sandboxes/{id}/connect"
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
