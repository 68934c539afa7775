package sandbox

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/podmeta"
)

// podReadyBuckets spans a cached image on a warm node (a fraction of a second) to a slow pull.
var podReadyBuckets = []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600}

var (
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paddock_sandbox_reconcile_errors_total",
		Help: "Errors met while reconciling Sandboxes, by step (pvc, pod, service, expiry, status).",
	}, []string{"step"})

	podReadySeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "paddock_sandbox_pod_ready_seconds",
		Help:    "Time from a Sandbox Pod's creation to the Sandbox reporting Ready with it.",
		Buckets: podReadyBuckets,
	})

	podRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paddock_sandbox_pod_rejections_total",
		Help: "Sandbox Pods a node's kubelet rejected at admission, deleted to be replaced, by the kubelet's reason (OutOfcpu, OutOfmemory, NodeAffinity, ...).",
	}, []string{"reason"})

	sandboxesDesc = prometheus.NewDesc("agent_sandboxes",
		"Number of Sandboxes, by namespace, readiness, expiry, launch type, template, owner kind and creator.",
		[]string{"namespace", "ready_condition", "expired", "launch_type", "sandbox_template", "owned_by", "created_by"}, nil)
)

// collectTimeout bounds the list behind one scrape of agent_sandboxes.
const collectTimeout = 5 * time.Second

// RegisterMetrics registers the Sandbox controller's metrics with reg. reader lists Sandboxes at
// scrape time for the agent_sandboxes gauge; pass the manager's cached client.
func RegisterMetrics(reg prometheus.Registerer, reader client.Reader) error {
	return errors.Join(
		reg.Register(reconcileErrors),
		reg.Register(podReadySeconds),
		reg.Register(podRejections),
		reg.Register(&sandboxCollector{reader: reader}),
	)
}

// observePodReady records the Pod's time to Ready on the pass that turns the Sandbox Ready.
func observePodReady(sb *agentsv1beta1.Sandbox, before *agentsv1beta1.SandboxStatus, pod *corev1.Pod, now time.Time) {
	if pod == nil || !meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) ||
		meta.IsStatusConditionTrue(before.Conditions, agentsv1beta1.SandboxConditionReady) {
		return
	}
	podReadySeconds.Observe(now.Sub(pod.CreationTimestamp.Time).Seconds())
}

// sandboxCollector computes agent_sandboxes from the cache on every scrape, so the gauge can
// never drift from the objects.
type sandboxCollector struct{ reader client.Reader }

func (c *sandboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sandboxesDesc }

func (c *sandboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	var list agentsv1beta1.SandboxList
	if err := c.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(sandboxesDesc, err)
		return
	}
	counts := map[sandboxLabels]int{}
	for i := range list.Items {
		counts[labelsOf(&list.Items[i])]++
	}
	for l, n := range counts {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(n),
			l.namespace, l.ready, l.expired, l.launchType, l.template, l.ownedBy, l.createdBy)
	}
}

// sandboxLabels are the label values of agent_sandboxes for one Sandbox.
type sandboxLabels struct {
	namespace, ready, expired, launchType, template, ownedBy, createdBy string
}

func labelsOf(sb *agentsv1beta1.Sandbox) sandboxLabels {
	l := sandboxLabels{namespace: sb.Namespace, ready: "false", expired: "false", launchType: agentsv1beta1.LaunchTypeCold,
		template: "unknown", ownedBy: "None", createdBy: "unknown"}
	if ready := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady); ready != nil {
		if ready.Status == metav1.ConditionTrue {
			l.ready = "true"
		}
		if ready.Reason == agentsv1beta1.SandboxReasonExpired {
			l.expired = "true"
		}
	}
	if sb.Labels[agentsv1beta1.LaunchTypeLabel] == agentsv1beta1.LaunchTypeWarm {
		l.launchType = agentsv1beta1.LaunchTypeWarm
	}
	if t := sb.Annotations[agentsv1beta1.SandboxTemplateRefAnnotation]; t != "" {
		l.template = t
	}
	if ref := metav1.GetControllerOfNoCopy(sb); ref != nil && (ref.Kind == "SandboxClaim" || ref.Kind == "SandboxWarmPool") {
		l.ownedBy = ref.Kind
	}
	if v, ok := sb.Labels[agentsv1beta1.CreatedByLabel]; ok {
		l.createdBy = podmeta.NormalizeCreatedBy(v)
	}
	return l
}
