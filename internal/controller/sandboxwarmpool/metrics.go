package sandboxwarmpool

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

var (
	desiredDesc = prometheus.NewDesc("paddock_warmpool_desired_replicas",
		"Unclaimed Sandboxes a SandboxWarmPool asks for (spec.replicas).", []string{"namespace", "warmpool"}, nil)
	membersDesc = prometheus.NewDesc("paddock_warmpool_replicas",
		"Unclaimed Sandboxes a SandboxWarmPool holds (status.replicas).", []string{"namespace", "warmpool"}, nil)
	readyDesc = prometheus.NewDesc("paddock_warmpool_ready_replicas",
		"Unclaimed Ready Sandboxes a SandboxWarmPool holds (status.readyReplicas).", []string{"namespace", "warmpool"}, nil)

	// The autosize series exist for pools with paddock.dev/autosize "true" and go with it.
	autosizeReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paddock_warmpool_autosize_replicas",
		Help: "Members autosize decided an autosized SandboxWarmPool keeps, written as its spec.replicas.",
	}, []string{"namespace", "warmpool"})
	autosizeDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paddock_warmpool_autosize_decisions_total",
		Help: "Changes autosize made to an autosized SandboxWarmPool's spec.replicas, by direction (up or down).",
	}, []string{"namespace", "warmpool", "direction"})
)

// collectTimeout bounds the list behind one scrape.
const collectTimeout = 5 * time.Second

// RegisterMetrics registers the warm pool gauges and the autosize metrics with reg. reader lists
// the pools at scrape time; pass the manager's cached client, so a scrape costs no API call.
func RegisterMetrics(reg prometheus.Registerer, reader client.Reader) error {
	for _, c := range []prometheus.Collector{&poolCollector{reader: reader}, autosizeReplicas, autosizeDecisions} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// forgetAutosizeMetrics drops a pool's autosize series: the pool is gone or no longer autosized.
// Every autosized pass sets the gauge, so a pool without it has no series to drop.
func forgetAutosizeMetrics(namespace, name string) {
	if autosizeReplicas.DeleteLabelValues(namespace, name) {
		autosizeDecisions.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "warmpool": name})
	}
}

// poolCollector reports every pool's desired, held and ready members from its spec and status,
// computed on each scrape so the gauges never outlive a deleted pool.
type poolCollector struct{ reader client.Reader }

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- desiredDesc
	ch <- membersDesc
	ch <- readyDesc
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	var pools extensionsv1beta1.SandboxWarmPoolList
	if err := c.reader.List(ctx, &pools); err != nil {
		for _, d := range []*prometheus.Desc{desiredDesc, membersDesc, readyDesc} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
		return
	}
	for i := range pools.Items {
		p := &pools.Items[i]
		desired := int32(1) // the API default when spec.replicas is unset
		if p.Spec.Replicas != nil {
			desired = *p.Spec.Replicas
		}
		for d, v := range map[*prometheus.Desc]int32{desiredDesc: desired, membersDesc: p.Status.Replicas, readyDesc: p.Status.ReadyReplicas} {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), p.Namespace, p.Name)
		}
	}
}
