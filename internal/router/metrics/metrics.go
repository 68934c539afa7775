// Package metrics defines the router's Prometheus metrics. Names match the upstream router so
// dashboards carry over; every label is bounded (see Method and the namespace rule in proxy).
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddock-dev/paddock/internal/version"
)

// NoNamespace is the sandbox_namespace label of requests not tied to a known Sandbox.
const NoNamespace = "-"

// DurationBuckets are the request latency buckets in seconds, from fast API calls to the
// default proxy timeout.
var DurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 180}

// Metrics holds every collector the router updates.
type Metrics struct {
	Requests        *prometheus.CounterVec
	Duration        *prometheus.HistogramVec
	Inflight        prometheus.Gauge
	UpstreamErrors  *prometheus.CounterVec
	UpstreamRetries *prometheus.CounterVec
	ResolveFailures *prometheus.CounterVec
	AuthzDecisions  *prometheus.CounterVec
	Denials         *prometheus.CounterVec
	CertReloads     *prometheus.CounterVec
}

// Reasons of Denials besides the resolve package's (port_not_declared, pod_ip_mismatch,
// pod_ip_unverifiable, unclaimed).
const (
	DenyUnauthenticated        = "unauthenticated"
	DenyForbidden              = "forbidden"
	DenyCredentialsUnavailable = "credentials_unavailable"
)

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_requests_total", Help: "Requests served, by method, status code and sandbox namespace.",
		}, []string{"method", "code", "sandbox_namespace"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sandbox_router_request_duration_seconds", Help: "Time from request to the end of the response (or of the upgraded connection).",
			Buckets: DurationBuckets,
		}, []string{"method", "code", "sandbox_namespace"}),
		Inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sandbox_router_inflight_requests", Help: "Requests being served, upgraded connections included.",
		}),
		UpstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_upstream_errors_total", Help: "Failed upstream exchanges, by cause: dial, refused, timeout, tls, eof, canceled, other.",
		}, []string{"sandbox_namespace", "reason"}),
		UpstreamRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_upstream_retries_total", Help: "Upstream attempts repeated after a dial failure.",
		}, []string{"sandbox_namespace"}),
		ResolveFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_resolve_failures_total", Help: "Requests refused because the target sandbox was unknown, not ready, unclaimed or had no address.",
		}, []string{"reason"}),
		AuthzDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_authz_decisions_total", Help: "Authorization decisions.",
		}, []string{"sandbox_namespace", "decision"}),
		Denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_denied_requests_total", Help: "Requests refused before any upstream connection, by reason: unauthenticated, forbidden, port_not_declared, pod_ip_mismatch, pod_ip_unverifiable, unclaimed, credentials_unavailable.",
		}, []string{"reason"}),
		CertReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandbox_router_cert_reloads_total", Help: "Serving certificate reload attempts, by outcome.",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.Requests, m.Duration, m.Inflight, m.UpstreamErrors, m.UpstreamRetries,
		m.ResolveFailures, m.AuthzDecisions, m.Denials, m.CertReloads)
	return m
}

// RegisterBuildInfo registers sandbox_router_build_info, a gauge fixed at 1 whose labels name
// the build.
func RegisterBuildInfo(reg prometheus.Registerer, i version.Info) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sandbox_router_build_info", Help: "Build of the running router; always 1.",
		ConstLabels: prometheus.Labels{"git_version": i.GitVersion, "git_commit": i.GitCommit, "build_date": i.BuildDate,
			"go_version": i.GoVersion, "compiler": i.Compiler, "platform": i.Platform},
	})
	g.Set(1)
	reg.MustRegister(g)
}

// Method maps an HTTP method to a bounded label value.
func Method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}
