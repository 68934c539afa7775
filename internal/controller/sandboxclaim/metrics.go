package sandboxclaim

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
)

// Metric label values for unknown things.
const (
	unknownTemplate = "__unknown__"
	unknownValue    = "unknown"
)

// The reference's metric names and buckets, in milliseconds, kept for dashboard compatibility.
var (
	startupBuckets  = []float64{100, 250, 500, 750, 1000, 1250, 1500, 2000, 2500, 5000, 10000, 30000, 60000, 120000, 240000}
	creationBuckets = []float64{50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 240000, 300000, 600000}

	webhookStartupLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agent_sandbox_claim_startup_latency_ms", Buckets: startupBuckets,
		Help: "Milliseconds from the admission webhook first seeing a claim to the claim becoming Ready.",
	}, []string{"launch_type", "sandbox_template"})
	controllerStartupLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agent_sandbox_claim_controller_startup_latency_ms", Buckets: startupBuckets,
		Help: "Milliseconds from the controller first seeing a claim to the claim becoming Ready.",
	}, []string{"launch_type", "sandbox_template"})
	clientStartupLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agent_sandbox_client_claim_startup_latency_ms", Buckets: startupBuckets,
		Help: "Milliseconds from a client requesting a claim to the claim becoming Ready.",
	}, []string{"launch_type", "sandbox_template"})
	creationLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agent_sandbox_creation_latency_ms", Buckets: creationBuckets,
		Help: "Milliseconds from a claimed Sandbox's creation to it becoming Ready.",
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
		NormaliseCreatedBy(claim.Labels[agentsv1beta1.CreatedByLabel])).Inc()
}

// observeStartup records the latencies of a claim whose Ready just turned True in a status write
// of this process; firstSeen is when this process first saw the claim.
func observeStartup(claim *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, firstSeen, now time.Time) {
	launch, tpl := unknownValue, unknownTemplate
	if sb != nil {
		launch, tpl = launchTypeOf(sb), templateOf(sb)
	}
	ms := func(from time.Time) float64 { return float64(now.Sub(from).Milliseconds()) }
	if !firstSeen.IsZero() {
		controllerStartupLatency.WithLabelValues(launch, tpl).Observe(ms(firstSeen))
	}
	for h, key := range map[*prometheus.HistogramVec]string{
		webhookStartupLatency: extensionsv1beta1.WebhookFirstObservedAtAnnotation,
		clientStartupLatency:  extensionsv1beta1.ClientFirstRequestedAtAnnotation,
	} {
		if at, err := time.Parse(time.RFC3339Nano, claim.Annotations[key]); err == nil && !at.After(now) {
			h.WithLabelValues(launch, tpl).Observe(ms(at))
		}
	}
	if sb != nil {
		if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady); c != nil && c.Status == "True" {
			creationLatency.WithLabelValues(claim.Namespace, launch, tpl).Observe(float64(c.LastTransitionTime.Sub(sb.CreationTimestamp.Time).Milliseconds()))
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

// NormaliseCreatedBy bounds the created_by metric label to known clients.
func NormaliseCreatedBy(v string) string {
	switch v {
	case "go-client", "python-client", blueprint.CreatedByController:
		return v
	}
	return unknownValue
}
