package sandboxclaim

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/podmeta"
)

// Metric label values for unknown things.
const (
	unknownTemplate = "__unknown__"
	unknownValue    = "unknown"
)

// The reference's histograms, in seconds as Prometheus conventions ask (the reference counts
// milliseconds in *_ms metrics; docs/compatibility.md maps the names). The bucket bounds are the
// reference's, converted, with finer buckets below 100 ms where warm claims land.
var (
	startupBuckets  = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 2.5, 5, 10, 30, 60, 120, 240}
	creationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 240, 300, 600}

	webhookStartupLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agent_sandbox_claim_startup_latency_seconds", Buckets: startupBuckets,
		Help: "Seconds from the admission webhook first seeing a claim to the claim becoming Ready.",
	}, []string{"launch_type", "sandbox_template"})
	controllerStartupLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agent_sandbox_claim_controller_startup_latency_seconds", Buckets: startupBuckets,
		Help: "Seconds from the controller first seeing a claim to the claim becoming Ready.",
	}, []string{"launch_type", "sandbox_template"})
	clientStartupLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agent_sandbox_client_claim_startup_latency_seconds", Buckets: startupBuckets,
		Help: "Seconds from a client requesting a claim to the claim becoming Ready.",
	}, []string{"launch_type", "sandbox_template"})
	creationLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agent_sandbox_creation_latency_seconds", Buckets: creationBuckets,
		Help: "Seconds from a claimed Sandbox's creation to it becoming Ready.",
	}, []string{"namespace", "launch_type", "sandbox_template"})
	claimCreations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agent_sandbox_claim_creation_total",
		Help: "Sandboxes bound to claims, by launch type (cold create or warm adoption).",
	}, []string{"namespace", "sandbox_template", "launch_type", "warmpool_name", "pod_condition", "created_by"})
)

// RegisterMetrics registers the claim metrics. main calls it once with controller-runtime's
// registry.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{webhookStartupLatency, controllerStartupLatency, clientStartupLatency, creationLatency, claimCreations} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// countCreation counts a binding made in this pass.
func countCreation(claim *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, launch string) {
	condition := "not_ready"
	if meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
		condition = "ready"
	}
	claimCreations.WithLabelValues(claim.Namespace, templateOf(sb), launch, claim.Spec.WarmPoolRef.Name, condition,
		podmeta.NormalizeCreatedBy(claim.Labels[agentsv1beta1.CreatedByLabel])).Inc()
}

// observeStartup records the latencies of a claim whose Ready just turned True in a status write
// of this process; firstSeen is when this process first saw the claim.
func observeStartup(claim *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, firstSeen, now time.Time) {
	launch, tpl := unknownValue, unknownTemplate
	if sb != nil {
		launch, tpl = launchTypeOf(sb), templateOf(sb)
	}
	seconds := func(from time.Time) float64 { return now.Sub(from).Seconds() }
	if !firstSeen.IsZero() {
		controllerStartupLatency.WithLabelValues(launch, tpl).Observe(seconds(firstSeen))
	}
	for h, key := range map[*prometheus.HistogramVec]string{
		webhookStartupLatency: extensionsv1beta1.WebhookFirstObservedAtAnnotation,
		clientStartupLatency:  extensionsv1beta1.ClientFirstRequestedAtAnnotation,
	} {
		if at, err := time.Parse(time.RFC3339Nano, claim.Annotations[key]); err == nil && !at.After(now) {
			h.WithLabelValues(launch, tpl).Observe(seconds(at))
		}
	}
	if sb != nil {
		if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady); c != nil && c.Status == "True" {
			creationLatency.WithLabelValues(claim.Namespace, launch, tpl).Observe(c.LastTransitionTime.Sub(sb.CreationTimestamp.Time).Seconds())
		}
	}
}

func templateOf(sb *agentsv1beta1.Sandbox) string {
	if t := sb.Annotations[agentsv1beta1.SandboxTemplateRefAnnotation]; t != "" {
		return t
	}
	return unknownTemplate
}

func launchTypeOf(sb *agentsv1beta1.Sandbox) string {
	if sb.Labels[agentsv1beta1.LaunchTypeLabel] == agentsv1beta1.LaunchTypeWarm {
		return agentsv1beta1.LaunchTypeWarm
	}
	return agentsv1beta1.LaunchTypeCold
}

